import { serialize } from 'pg-protocol';
import { describe, expect, it } from 'vitest';
import { useConformanceServer } from '../fixtures/conformance.js';
import { errorFields, WireClient } from '../fixtures/wire.js';

/**
 * A portal that returns no rows runs once. Executed again after it
 * completed, PostgreSQL refuses it (55000, "portal cannot be run"); running
 * it again would repeat a COPY's output, a SET or a write.
 */
const s = useConformanceServer();

describe('an extended-protocol portal', () => {
  it.each([
    ['COPY (SELECT 1 UNION ALL SELECT 2) TO STDOUT', ['H', 'd', 'd', 'c', 'C', 'E', 'Z'], 'COPY 2'],
    ["SET application_name = 'twice'", ['C', 'E', 'Z'], 'SET'],
    ['CREATE TEMP TABLE portal_once (a int)', ['C', 'E', 'Z'], 'CREATE TABLE'],
  ])('without rows, run again after it completed, is refused: %s', async (text, types, tag) => {
    const c = await WireClient.startup(s.server.port);
    try {
      c.write(serialize.parse({ text, name: '' }));
      c.write(serialize.bind({ statement: '', portal: '' }));
      c.write(serialize.execute({ portal: '', rows: 1 }));
      c.write(serialize.execute({ portal: '', rows: 1 }));
      c.write(serialize.sync());
      const msgs = (await c.until('Z')).filter((m) => m.type !== '1' && m.type !== '2' && m.type !== 'S');
      expect(msgs.map((m) => m.type)).toEqual(types);
      expect(msgs.find((m) => m.type === 'C')?.body.toString('utf8')).toBe(`${tag}\0`);
      const error = errorFields(msgs.find((m) => m.type === 'E')?.body as Buffer);
      expect([error.C, error.M]).toEqual(['55000', 'portal "" cannot be run']);
    } finally {
      c.end();
    }
  });

  it('that returns rows answers an Execute after its last row with none (SELECT 0), as PostgreSQL does', async () => {
    const c = await WireClient.startup(s.server.port);
    try {
      c.write(serialize.parse({ text: 'SELECT 1 UNION ALL SELECT 2', name: '' }));
      c.write(serialize.bind({ statement: '', portal: '' }));
      c.write(serialize.execute({ portal: '', rows: 0 }));
      c.write(serialize.execute({ portal: '', rows: 0 }));
      c.write(serialize.sync());
      const msgs = (await c.until('Z')).filter((m) => m.type !== '1' && m.type !== '2' && m.type !== 'S');
      expect(msgs.map((m) => (m.type === 'C' ? m.body.toString('utf8') : m.type))).toEqual(['D', 'D', 'SELECT 2\0', 'SELECT 0\0', 'Z']);
    } finally {
      c.end();
    }
  });
});

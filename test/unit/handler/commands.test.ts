import { describe, expect, it } from 'vitest';
import { recognizeCommand } from '../../../src/engines/duckdb/handler/commands.js';
import { tokenize } from '../../../src/sql/lexer.js';

const recognize = (sql: string): ReturnType<typeof recognizeCommand> => recognizeCommand(tokenize(sql), sql);

describe('cursor and DEALLOCATE commands', () => {
  it('reads DECLARE with its options and the query after FOR', () => {
    expect(recognize('DECLARE "Big" BINARY NO SCROLL CURSOR WITHOUT HOLD FOR SELECT 1')).toEqual({
      kind: 'declare',
      name: 'Big',
      binary: true,
      hold: false,
      scroll: false,
      query: 'SELECT 1',
      queryOffset: 55,
    });
    expect(recognize('declare c scroll cursor with hold for values (1)')).toMatchObject({ name: 'c', scroll: true, hold: true, query: 'values (1)' });
    expect(recognize('DECLARE c CURSOR SELECT 1')).toBeNull();
    expect(recognizeCommand(tokenize('DECLARE c CURSOR FOR SELECT 1'))).toBeNull();
  });

  it.each([
    ['FETCH c', { count: 1, backward: false }],
    ['FETCH NEXT FROM c', { count: 1, backward: false }],
    ['FETCH 20 IN c', { count: 20, backward: false }],
    ['FETCH ALL c', { count: null, backward: false }],
    ['FETCH FORWARD c', { count: 1, backward: false }],
    ['FETCH FORWARD 5 FROM c', { count: 5, backward: false }],
    ['FETCH FORWARD ALL FROM c', { count: null, backward: false }],
    ['FETCH PRIOR FROM c', { backward: true }],
    ['FETCH ABSOLUTE 3 FROM c', { backward: true }],
    ['FETCH BACKWARD ALL FROM c', { backward: true }],
    ['FETCH -2 FROM c', { backward: true }],
  ])('reads %s', (sql, expected) => {
    expect(recognize(sql)).toMatchObject({ kind: 'fetch', name: 'c', move: false, ...expected });
  });

  it('reads MOVE, CLOSE and DEALLOCATE', () => {
    expect(recognize('MOVE 3 FROM c')).toMatchObject({ kind: 'fetch', move: true, count: 3 });
    expect(recognize('CLOSE c')).toEqual({ kind: 'close', name: 'c' });
    expect(recognize('CLOSE ALL')).toEqual({ kind: 'close', name: null });
    expect(recognize('DEALLOCATE PREPARE "_pg3_0"')).toEqual({ kind: 'deallocate', name: '_pg3_0' });
    expect(recognize('DEALLOCATE ALL')).toEqual({ kind: 'deallocate', name: null });
    expect(recognize('FETCH 1 FROM c extra')).toBeNull();
  });
});

describe('CREATE EXTENSION and DROP EXTENSION', () => {
  it('reads the name (quoted, a string or a word), IF [NOT] EXISTS and the schema', () => {
    expect(recognize('CREATE EXTENSION IF NOT EXISTS "uuid-ossp"')).toEqual({ kind: 'create-extension', name: 'uuid-ossp', ifNotExists: true, schema: null });
    expect(recognize("create extension pgcrypto with schema public version '1.3' cascade")).toEqual({
      kind: 'create-extension',
      name: 'pgcrypto',
      ifNotExists: false,
      schema: 'public',
    });
    expect(recognize("CREATE EXTENSION 'uuid-ossp' SCHEMA s")).toMatchObject({ name: 'uuid-ossp', schema: 's' });
    expect(recognize('CREATE EXTENSION pgcrypto WITH nonsense')).toBeNull();
    expect(recognize('DROP EXTENSION IF EXISTS "uuid-ossp", pgcrypto CASCADE')).toEqual({
      kind: 'drop-extension',
      names: ['uuid-ossp', 'pgcrypto'],
      ifExists: true,
    });
    expect(recognize('DROP EXTENSION pgcrypto')).toEqual({ kind: 'drop-extension', names: ['pgcrypto'], ifExists: false });
  });
});

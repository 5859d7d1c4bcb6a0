import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';

/**
 * pgx v4 (Debian's golang-github-jackc-pgx-v4-dev, built offline in GOPATH
 * mode) runs the same flows against cotwire and PostgreSQL: binary
 * parameters and results, ';' and empty statements, batches, transactions
 * and errors.
 */
const run = promisify(execFile);
const servers = useCotwireAndPostgres();
let dir: string;
let binary: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cotwire-pgx-'));
  binary = join(dir, 'pgx_flows');
  const env = { ...process.env, GO111MODULE: 'off', GOPATH: '/usr/share/gocode', GOCACHE: join(dir, 'cache'), GOFLAGS: '' };
  await run('go', ['build', '-o', binary, join(import.meta.dirname, 'go', 'pgx_flows.go')], { env });
}, 300_000);

afterAll(async () => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('pgx', () => {
  it('gets what PostgreSQL gives, flow by flow', async () => {
    const flows = async (url: string, target: string): Promise<Record<string, unknown>> =>
      JSON.parse((await run(binary, [url, target])).stdout) as Record<string, unknown>;
    const [cot, real] = await Promise.all([
      flows(`postgres://cotwire@127.0.0.1:${servers.cotwire.port}/cotwire`, 'cotwire'),
      flows(`postgres://${servers.postgres.user}@127.0.0.1:${servers.postgres.port}/postgres`, 'postgres'),
    ]);
    for (const key of Object.keys(real)) expect(cot[key], key).toEqual(real[key]);
    expect(real.row).toEqual([1, 'widget', '9.99', '2026-03-04T05:06:07Z', ['a', 'b'], true, 0.25]);
    expect(cot.ledger_returning).toBe(0);
  });
});

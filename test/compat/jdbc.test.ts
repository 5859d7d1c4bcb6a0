import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';

/**
 * pgjdbc (Debian's libpostgresql-jdbc-java) runs the same flows against
 * cotwire and PostgreSQL: DatabaseMetaData as DBeaver and Metabase use it,
 * prepared statements past pgjdbc's server-prepare threshold, batches,
 * transactions and errors.
 */
const run = promisify(execFile);
const JAR = '/usr/share/java/postgresql.jar';
const PROGRAM = join(import.meta.dirname, 'java', 'JdbcFlows.java');

const servers = useCotwireAndPostgres();

async function flows(url: string, user: string, target: string): Promise<Record<string, unknown>> {
  const { stdout } = await run('java', ['-cp', JAR, PROGRAM, url, user, target], { env: { ...process.env, TZ: 'UTC' } });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe('pgjdbc', () => {
  it('gets what PostgreSQL gives, flow by flow', async () => {
    const [cot, real] = await Promise.all([
      flows(`jdbc:postgresql://127.0.0.1:${servers.cotwire.port}/cotwire`, 'cotwire', 'cotwire'),
      flows(`jdbc:postgresql://127.0.0.1:${servers.postgres.port}/postgres`, servers.postgres.user, 'postgres'),
    ]);
    for (const key of Object.keys(real)) {
      // DuckDB's transactions are snapshot isolation, which cotwire reports as REPEATABLE READ (docs/compatibility.md).
      if (key === 'isolation') expect(cot[key]).toBe(4);
      else expect(cot[key], key).toEqual(real[key]);
    }
    expect(cot.ledger_returning).toBe(0);
  });
});

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';

/**
 * Python drivers (Debian's python3-psycopg2, ...) run the same flows against
 * cotwire and against PostgreSQL; each script prints what Python received,
 * and the two must agree, except where docs/compatibility.md says why not.
 */
const run = promisify(execFile);
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const SCRIPTS = join(import.meta.dirname, 'python');

const servers = useCotwireAndPostgres();

/**
 * SQLAlchemy 2 (whose psycopg dialect runs on psycopg 3), installed by .ci/run from the machine's
 * wheels beside Debian's SQLAlchemy 1.4: `python3 -m pip install --target .ci/python sqlalchemy==2.0.54`.
 */
const SQLALCHEMY2 = join(import.meta.dirname, '../../.ci/python');

/** Each flow: its script, and what its environment adds. */
const RUNS: Readonly<Record<string, { readonly script: string; readonly env?: Readonly<Record<string, string>> }>> = {
  'psycopg2_flows.py': { script: 'psycopg2_flows.py' },
  'psycopg3_flows.py': { script: 'psycopg3_flows.py' },
  'asyncpg_flows.py': { script: 'asyncpg_flows.py' },
  'pandas_flows.py': { script: 'pandas_flows.py' },
  'sqlalchemy_flows.py': { script: 'sqlalchemy_flows.py' },
  'sqlalchemy_flows.py on psycopg 3': { script: 'sqlalchemy_flows.py', env: { SA_DRIVER: 'psycopg', PYTHONPATH: SQLALCHEMY2 } },
};

async function flows(name: string, target: 'cotwire' | 'postgres'): Promise<Record<string, unknown>> {
  const { script, env: extra = {} } = RUNS[name] ?? { script: name };
  if (extra.PYTHONPATH !== undefined && !existsSync(join(extra.PYTHONPATH, 'sqlalchemy'))) {
    throw new Error(`SQLAlchemy 2 is not installed in ${extra.PYTHONPATH}: run .ci/run, or python3 -m pip install --target .ci/python sqlalchemy==2.0.54`);
  }
  const env =
    target === 'cotwire'
      ? { PGHOST: '127.0.0.1', PGPORT: String(servers.cotwire.port), PGUSER: 'cotwire', PGDATABASE: 'cotwire' }
      : { PGHOST: '127.0.0.1', PGPORT: String(servers.postgres.port), PGUSER: servers.postgres.user, PGDATABASE: 'postgres' };
  const { stdout } = await run(PYTHON, [join(SCRIPTS, script), target], { env: { ...process.env, ...env, ...extra, PGTZ: 'UTC' } });
  return JSON.parse(stdout) as Record<string, unknown>;
}

/** Results that differ on purpose, with what cotwire answers (docs/compatibility.md, "Differences"). None so far. */
const DIFFERENCES: Readonly<Record<string, unknown>> = {};

/** What each script sees of the ledger, which only cotwire has. */
const LEDGER: Readonly<Record<string, Record<string, unknown>>> = {
  'psycopg2_flows.py': { ledger_returning: [0, 64], ledger_update: '42501' },
  'psycopg3_flows.py': { ledger_returning: 0 },
  'asyncpg_flows.py': { ledger_returning: 0 },
  'pandas_flows.py': { ledger_to_sql: 2, ledger_read: [0, 1] },
  'sqlalchemy_flows.py': {
    ledger_returning: 0,
    ledger_orm: [36, 0],
    ledger_columns: ['trace_id', 'org_id', 'agent_id', 'session_id', 'step_index', 'step_type'],
    driver: 'psycopg2',
  },
  'sqlalchemy_flows.py on psycopg 3': {
    ledger_returning: 0,
    ledger_orm: [36, 0],
    ledger_columns: ['trace_id', 'org_id', 'agent_id', 'session_id', 'step_index', 'step_type'],
    driver: 'psycopg',
  },
};

describe.each(Object.keys(LEDGER))('%s', (script) => {
  let cot: Record<string, unknown>;
  let real: Record<string, unknown>;

  beforeAll(async () => {
    [cot, real] = await Promise.all([flows(script, 'cotwire'), flows(script, 'postgres')]);
  });

  it('gets what PostgreSQL gives, flow by flow', () => {
    for (const key of Object.keys(real)) {
      if (key in DIFFERENCES) expect(cot[key], key).toEqual(DIFFERENCES[key]);
      else expect(cot[key], key).toEqual(real[key]);
    }
  });

  it('appends to the ledger (and is refused a change to it)', () => {
    for (const [key, value] of Object.entries(LEDGER[script] ?? {})) expect(cot[key], key).toEqual(value);
  });
});

import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';

/**
 * psql 15's meta-commands against cotwire and against a real PostgreSQL
 * holding the same schema: the outputs must match once owner names are
 * normalised (cotwire's owner is the connected user; PostgreSQL's is
 * whoever ran initdb).
 */

const run = promisify(execFile);

const SCHEMA = `
CREATE TABLE agents (id integer PRIMARY KEY, name text NOT NULL, created timestamptz DEFAULT now(), score double precision);
CREATE INDEX agents_name_idx ON agents (name);
CREATE VIEW agent_names AS SELECT id, name FROM agents;
INSERT INTO agents (id, name, score) VALUES (1, 'planner', 0.5), (2, 'critic', NULL);
`;

/** cotwire's default ledger, as PostgreSQL types it. */
const STEPS_ON_POSTGRES = `CREATE TABLE _cot_steps (
  trace_id uuid NOT NULL, org_id text, agent_id text, session_id text NOT NULL, step_index integer NOT NULL,
  step_type text NOT NULL, content text, input_data json, output_data json, confidence double precision,
  duration_ms bigint, token_count integer, model text, metadata json, prev_hash text NOT NULL,
  current_hash text NOT NULL, has_embedding boolean NOT NULL, created_at timestamptz NOT NULL,
  parent_trace_id uuid, ledger_seq bigint NOT NULL, row_salt text);
CREATE INDEX _cot_steps_trace_id ON _cot_steps (trace_id);
CREATE INDEX _cot_steps_session_id ON _cot_steps (session_id)`;

const servers = useCotwireAndPostgres();
let dir: string;

interface Target {
  readonly port: number;
  readonly user: string;
}
const targets = (): { cot: Target; pg: Target } => ({
  cot: { port: servers.cotwire.port, user: 'cotwire' },
  pg: { port: servers.postgres.port, user: servers.postgres.user },
});

async function psql(t: Target, ...commands: string[]): Promise<string> {
  const args = ['-X', '-h', '127.0.0.1', '-p', String(t.port), '-U', t.user, 'cotwire'];
  for (const c of commands) args.push('-c', c);
  const { stdout, stderr } = await run('psql', args, { env: { ...process.env, PGTZ: 'UTC', PAGER: '' } });
  return stdout + stderr;
}

/** Owner names differ by design; psql pads columns to their widest value, so padding is normalised with them. */
function normalise(out: string): string {
  return out
    .replace(/\b(cotwire|postgres|pg_database_owner)\b/g, 'OWNER')
    .split('\n')
    .map((line) => line.replace(/ {2,}/g, ' ').replace(/-{2,}/g, '-').trim())
    .join('\n');
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cotwire-psql-'));
  const admin = new pg.Client({ host: '127.0.0.1', port: servers.postgres.port, user: servers.postgres.user, database: 'postgres' });
  await admin.connect();
  await admin.query('CREATE DATABASE cotwire');
  await admin.end();
  const { cot, pg: real } = targets();
  // The server's own tables, as cotwire's catalog describes them, so both sides list the same relations.
  const c = await servers.cotwire.client();
  const serverLedgers: string[] = [];
  for (const table of ['_cot_security_events', '_cot_checkpoints', '_cot_embeddings', '_cot_redactions', '_cot_retention', '_cot_log_events']) {
    const columns = await c.query('SELECT column_name, udt_name, is_nullable FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position', [
      table,
    ]);
    expect(columns.rows.length).toBeGreaterThan(0);
    serverLedgers.push(
      `CREATE TABLE ${table} (${columns.rows
        .map(
          (r: { column_name: string; udt_name: string; is_nullable: string }) => `${r.column_name} ${r.udt_name}${r.is_nullable === 'NO' ? ' NOT NULL' : ''}`,
        )
        .join(', ')})`,
    );
  }
  await psql(
    real,
    STEPS_ON_POSTGRES,
    ...serverLedgers,
    'CREATE INDEX _cot_embeddings_trace_id ON _cot_embeddings (trace_id)',
    'CREATE INDEX _cot_redactions_chain ON _cot_redactions (target_chain_key)',
    'CREATE INDEX _cot_retention_chain ON _cot_retention (chain_key)',
    SCHEMA,
  );
  await psql(cot, SCHEMA);
});

afterAll(async () => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('psql meta-commands answer as PostgreSQL does', () => {
  it.each([
    '\\dn',
    '\\dt',
    '\\dv',
    '\\di',
    '\\d',
    '\\d agents',
    '\\d+ agents',
    '\\d agent_names',
    '\\di agents_name_idx',
    '\\d _cot_steps',
    '\\df',
    '\\df version',
    '\\dT',
    '\\du',
  ])('%s', async (command) => {
    const { cot, pg: real } = targets();
    const [got, want] = await Promise.all([psql(cot, command), psql(real, command)]);
    expect(got).not.toMatch(/ERROR/);
    expect(normalise(got)).toBe(normalise(want));
  });

  it('\\l lists the database with PostgreSQL’s columns', async () => {
    const { cot, pg: real } = targets();
    const row = (out: string): string | undefined => {
      const line = out.split('\n').find((l) => /^ cotwire +\|/.test(l));
      return line === undefined ? undefined : normalise(line);
    };
    const [got, want] = await Promise.all([psql(cot, '\\l'), psql(real, '\\l')]);
    expect(normalise(got).split('\n')[2]).toBe(normalise(want).split('\n')[2]);
    expect(row(got)).toBeDefined();
    expect(row(got)).toBe(row(want));
  });

  it('\\dx lists no extensions (PostgreSQL lists plpgsql, which cotwire does not have)', async () => {
    const out = await psql(targets().cot, '\\dx');
    expect(out).toContain('List of installed extensions');
    expect(out).toContain('(0 rows)');
  });

  it('\\x, \\timing and \\conninfo', async () => {
    const { cot, pg: real } = targets();
    const query = 'SELECT id, name, score FROM agents ORDER BY id';
    const [got, want] = await Promise.all([psql(cot, '\\x on', query), psql(real, '\\x on', query)]);
    expect(got).toContain('-[ RECORD 1 ]');
    expect(got).toBe(want);
    expect(await psql(cot, '\\timing on', 'SELECT 1')).toMatch(/Time: \d+\.\d+ ms/);
    expect(await psql(cot, '\\conninfo')).toContain('You are connected to database "cotwire" as user "cotwire"');
  });

  it('\\copy ... to and \\copy ... from round-trip rows through COPY over the wire', async () => {
    const { cot } = targets();
    const file = join(dir, 'agents.csv');
    await psql(cot, `\\copy (SELECT id, name, score FROM agents ORDER BY id) to '${file}' with (format csv, header)`);
    expect(readFileSync(file, 'utf8')).toBe('id,name,score\n1,planner,0.5\n2,critic,\n');
    writeFileSync(file, 'id,name,score\n3,scout,0.25\n4,"judge, senior",\n');
    const out = await psql(cot, `\\copy agents (id, name, score) from '${file}' with (format csv, header)`);
    expect(out).toContain('COPY 2');
    expect(await psql(cot, 'SELECT name, score FROM agents WHERE id >= 3 ORDER BY id')).toMatch(/scout\s+\|\s+0\.25\n\s*judge, senior\s+\|/);
  });
});

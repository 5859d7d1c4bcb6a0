import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { ProtectedNames } from '../../../src/guard/names.js';
import { organisationPredicate, scopeLedgerReads, tenantLedgers } from '../../../src/guard/tenant-scope.js';
import { ParsedStatement } from '../../../src/sql/parsed.js';
import { checkSessionOwners, ForeignSessionError } from '../../../src/ledger/chain/append.js';
import type { LedgerTable } from '../../../src/ledger/chain/schema.js';
import { withoutEstimates } from '../../../src/engines/duckdb/handler/ledger-reads.js';

beforeAll(async () => {
  await loadModule();
});

const names = new ProtectedNames();
const steps = { schema: 'main', name: '_cot_steps', columns: [{ name: 'org_id' }, { name: 'session_id' }] };
const plain = { schema: 'main', name: '_cot_plain', columns: [{ name: 'x' }] };
const scope = organisationPredicate("o'k", tenantLedgers([steps, plain], 'main._cot_steps'));
const scoped = (sql: string): string => {
  const r = scopeLedgerReads(new ParsedStatement(sql), names, scope);
  return 'text' in r ? r.text : `refused: ${r.refusal.message}`;
};

describe('scopeLedgerReads', () => {
  it('reads each ledger reference through its organisation’s filter, keeping the name as written and its alias', () => {
    expect(scoped('SELECT * FROM _cot_steps')).toBe("SELECT * FROM (SELECT * FROM _cot_steps WHERE org_id = 'o''k') AS _cot_steps");
    expect(scoped('SELECT s.x FROM public."_cot_steps" s')).toBe(`SELECT s.x FROM (SELECT * FROM public."_cot_steps" WHERE org_id = 'o''k') s`);
    expect(scoped('SELECT * FROM ONLY _cot_steps')).toBe("SELECT * FROM (SELECT * FROM _cot_steps WHERE org_id = 'o''k') AS _cot_steps");
    expect(scoped('TABLE _cot_steps')).toBe("SELECT * FROM (SELECT * FROM _cot_steps WHERE org_id = 'o''k') AS _cot_steps");
    expect(scoped('COPY _cot_steps (session_id) TO STDOUT')).toBe("COPY (SELECT session_id FROM _cot_steps WHERE org_id = 'o''k') TO STDOUT");
  });

  it('reaches references at any depth, and leaves an INSERT’s target and statements that read no rows alone', () => {
    expect(scoped('INSERT INTO _cot_steps (session_id) SELECT session_id FROM _cot_steps')).toBe(
      "INSERT INTO _cot_steps (session_id) SELECT session_id FROM (SELECT * FROM _cot_steps WHERE org_id = 'o''k') AS _cot_steps",
    );
    expect(scoped('SELECT (SELECT count(*) FROM _cot_steps) AS n')).toContain("FROM (SELECT * FROM _cot_steps WHERE org_id = 'o''k') AS _cot_steps) AS n");
    expect(scoped('LOCK TABLE _cot_steps')).toBe('LOCK TABLE _cot_steps');
    expect(scoped("SELECT '_cot_steps' AS name")).toBe("SELECT '_cot_steps' AS name");
  });

  it('reads a ledger without org_id as empty, the log’s history whole, and the vectors of its own steps', () => {
    expect(scoped('SELECT * FROM _cot_plain')).toBe('SELECT * FROM (SELECT * FROM _cot_plain WHERE false) AS _cot_plain');
    expect(scoped('SELECT * FROM _cot_checkpoints')).toBe('SELECT * FROM _cot_checkpoints');
    expect(scoped('SELECT * FROM _cot_embeddings')).toBe(
      "SELECT * FROM (SELECT * FROM _cot_embeddings WHERE trace_id IN (SELECT trace_id FROM main._cot_steps WHERE org_id = 'o''k')) AS _cot_embeddings",
    );
  });

  it('refuses a statement PostgreSQL cannot parse that names a ledger', () => {
    expect(scoped('FROM _cot_steps')).toMatch(/^refused: cannot read ledger table "_cot_steps"/);
    expect(scoped('SUMMARIZE _cot_steps')).toMatch(/^refused/);
    expect(scoped('SELECT 1 FROM generate_series(1, 2) x')).toBe('SELECT 1 FROM generate_series(1, 2) x');
  });
});

describe('session owners', () => {
  const table = {
    catalog: 'db',
    schema: 'main',
    name: '_cot_steps',
    columns: ['org_id', 'agent_id', 'session_id', 'step_type', 'step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq'].map((name) => ({
      name,
      type: 'VARCHAR',
      defaultSql: null,
      notNull: false,
    })),
    chainKey: 'session_id',
    serverColumns: new Set(['step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq']),
    isSteps: false,
    journaled: true,
    hashVersion: 'cotwire/v1',
    redactions: null,
    retention: null,
  } as LedgerTable;
  const owners = new Map([['s', { org: 'a', agent: 'x' }]]);
  const check = (rows: string[][], by: 'org' | 'agent'): string => {
    try {
      checkSessionOwners(table, rows, (k) => owners.get(k), by);
      return 'ok';
    } catch (err) {
      return err instanceof ForeignSessionError ? `${err.code} ${err.by}` : String(err);
    }
  };

  it('lets the organisation (or, by agent, the agent) of the first step extend a session, and refuses anyone else', () => {
    expect(check([['a', 'y', 's', 'Action']], 'org')).toBe('ok');
    expect(check([['b', 'x', 's', 'Action']], 'org')).toBe('42501 org');
    expect(check([['a', 'y', 's', 'Action']], 'agent')).toBe('42501 agent');
    // A new session belongs to its first row: a second row of another organisation in the same statement is refused.
    expect(
      check(
        [
          ['b', 'x', 'new', 'Observation'],
          ['b', 'x', 'new', 'Action'],
        ],
        'org',
      ),
    ).toBe('ok');
    expect(
      check(
        [
          ['b', 'x', 'new', 'Observation'],
          ['a', 'x', 'new', 'Action'],
        ],
        'org',
      ),
    ).toBe('42501 org');
  });
});

describe('a plan without its estimates', () => {
  it('keeps DuckDB’s box the same width and the plan the same, without the count', () => {
    const box = "│        ~5,000 rows        │\n│    Filters: org_id='a'    │";
    const out = withoutEstimates(box);
    expect(out.split('\n')[0]).toHaveLength(box.split('\n')[0]?.length ?? 0);
    expect(out).not.toMatch(/\d/);
    expect(out).toContain("Filters: org_id='a'");
    expect(withoutEstimates('{"Estimated Cardinality": "5000"}')).toBe('{"Estimated Cardinality": "?"}');
  });
});

import { describe, expect, it } from 'vitest';
import { chainOf, chainProblems, countOf, sqlstate, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Ledger appends inside transactions: checked at INSERT, chained at COMMIT
 * in commit order, and gone without a trace at ROLLBACK.
 */
const s = useConformanceServer();

const stepsOf = async (session: string): Promise<number> => countOf(await s.as(), 'SELECT count(*) FROM _cot_steps WHERE session_id = $1', [session]);

describe('appends in a transaction block', () => {
  it('become visible to others at COMMIT, not before', async () => {
    const a = await s.fresh();
    await a.query('BEGIN');
    const ins = await a.query(
      "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-commit', 'Observation', 'a'), ('tx-commit', 'Decision', 'b')",
    );
    expect(ins.rowCount).toBe(2);
    expect(await stepsOf('tx-commit')).toBe(0);
    expect((await a.query('COMMIT')).command).toBe('COMMIT');
    const links = await chainOf(a, 'tx-commit');
    expect(links.map((l) => l.step_index)).toEqual([0, 1]);
    expect(chainProblems(links)).toEqual([]);
  });

  it('leave nothing at ROLLBACK, not even a gap in the session’s indices', async () => {
    const a = await s.fresh();
    await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-rollback', 'Observation')");
    await a.query('BEGIN');
    await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-rollback', 'Reasoning')");
    await a.query('ROLLBACK');
    expect(await stepsOf('tx-rollback')).toBe(1);
    await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-rollback', 'Decision')");
    const links = await chainOf(a, 'tx-rollback');
    expect(links.map((l) => l.step_index)).toEqual([0, 1]);
    expect(chainProblems(links)).toEqual([]);
  });

  it('are dropped with a failed block, whose COMMIT answers ROLLBACK', async () => {
    const a = await s.fresh();
    await a.query('BEGIN');
    await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-failed', 'Observation')");
    expect(await sqlstate(a.query('SELECT * FROM no_such_table'))).toBe('42P01');
    expect(await sqlstate(a.query('SELECT 1'))).toBe('25P02');
    expect((await a.query('COMMIT')).command).toBe('ROLLBACK');
    expect(await stepsOf('tx-failed')).toBe(0);
  });

  it('run a multi-statement string as one transaction: an error drops the appends before it', async () => {
    const a = await s.fresh();
    expect(await sqlstate(a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-string', 'Observation'); SELECT * FROM no_such_table"))).toBe(
      '42P01',
    );
    expect(await stepsOf('tx-string')).toBe(0);
    await a.query(
      "INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-string', 'Observation'); INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-string', 'Decision')",
    );
    expect((await chainOf(a, 'tx-string')).map((l) => l.step_index)).toEqual([0, 1]);
  });

  it('of two open transactions on one session are chained in commit order, neither waiting nor failing', async () => {
    const a = await s.fresh();
    const b = await s.fresh();
    await a.query('BEGIN');
    await b.query('BEGIN');
    await a.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-race', 'Action', 'a')");
    await b.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-race', 'Action', 'b')");
    await b.query('COMMIT');
    await a.query('COMMIT');
    expect((await a.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 'tx-race' ORDER BY step_index")).rows).toEqual([
      { step_index: 0, content: 'b' },
      { step_index: 1, content: 'a' },
    ]);
    expect((await a.query("SELECT valid FROM cot_verify('tx-race')")).rows).toEqual([{ valid: true }]);
  });

  it('are checked at INSERT: a step that breaks a rule is refused there', async () => {
    const a = await s.fresh();
    await a.query('BEGIN');
    try {
      expect(await sqlstate(a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-checked', 'Musing')"))).toBe('23514');
    } finally {
      await a.query('ROLLBACK');
    }
    expect(await stepsOf('tx-checked')).toBe(0);
  });

  it('fail the block when one of its statements is refused: COMMIT answers ROLLBACK and nothing is appended', async () => {
    const a = await s.fresh();
    await a.query('BEGIN');
    await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-refused', 'Observation')");
    expect(await sqlstate(a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-refused', 'Musing')"))).toBe('23514');
    const end = await a.query('COMMIT');
    expect(await stepsOf('tx-refused')).toBe(0);
    expect(end.command).toBe('ROLLBACK');
  });

  it('return a chain column inside the block and outside one alike, and give it again after ROLLBACK', async () => {
    const a = await s.fresh();
    await a.query('BEGIN');
    try {
      expect((await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-ret', 'Observation') RETURNING step_index")).rows).toEqual([
        { step_index: 0 },
      ]);
    } finally {
      await a.query('ROLLBACK');
    }
    const r = await a.query(
      "INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-ret', 'Observation') RETURNING step_index, length(current_hash)::integer AS h",
    );
    expect(r.rows).toEqual([{ step_index: 0, h: 64 }]);
  });

  it('return the columns given and trace_id from RETURNING inside the block, as known before COMMIT', async () => {
    const a = await s.fresh();
    await a.query('BEGIN');
    try {
      const r = await a.query(
        "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-ret-known', 'Observation', 'x') RETURNING session_id, content, trace_id",
      );
      expect(r.rows).toEqual([{ session_id: 'tx-ret-known', content: 'x', trace_id: expect.stringMatching(/^[0-9a-f-]{36}$/) }]);
      await a.query('COMMIT');
      const stored = await a.query("SELECT trace_id FROM _cot_steps WHERE session_id = 'tx-ret-known'");
      expect(stored.rows).toEqual([{ trace_id: r.rows[0].trace_id }]);
    } finally {
      await a.query('ROLLBACK');
    }
  });
});

describe('ledgers created in a transaction block', () => {
  it('vanish at ROLLBACK, and take appends once the block commits', async () => {
    const a = await s.fresh();
    const b = await s.fresh();
    try {
      await a.query('BEGIN');
      await a.query('CREATE TABLE _cot_tx_rolled (session_id VARCHAR, note VARCHAR)');
      // Not for appends until the block commits.
      expect(await sqlstate(a.query("INSERT INTO _cot_tx_rolled (session_id, note) VALUES ('r', 'too soon')"))).toBe('55000');
      await a.query('ROLLBACK');
      expect(await sqlstate(b.query('SELECT * FROM _cot_tx_rolled'))).toBe('42P01');
      await a.query('BEGIN');
      await a.query('CREATE TABLE _cot_tx_kept (session_id VARCHAR, note VARCHAR)');
      await a.query('COMMIT');
      await b.query("INSERT INTO _cot_tx_kept (session_id, note) VALUES ('k', 'one')");
      expect((await b.query('SELECT step_index, length(current_hash)::integer AS h FROM _cot_tx_kept')).rows).toEqual([{ step_index: 0, h: 64 }]);
      expect(await sqlstate(b.query('DELETE FROM _cot_tx_kept'))).toBe('42501');
    } finally {
      await a.query('ROLLBACK');
    }
  });

  it('are created outside a block at once, for every connection', async () => {
    const a = await s.fresh();
    const b = await s.fresh();
    await a.query('CREATE TABLE _cot_outside (session_id VARCHAR, note VARCHAR)');
    await b.query("INSERT INTO _cot_outside VALUES ('k', 'x')");
    expect((await a.query('SELECT step_index FROM _cot_outside')).rows).toEqual([{ step_index: 0 }]);
  });
});

describe('read-only transactions', () => {
  it('refuse a ledger append with 25006 (BEGIN READ ONLY and default_transaction_read_only), and write nothing', async () => {
    const a = await s.fresh();
    try {
      await a.query('BEGIN READ ONLY');
      expect(await sqlstate(a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-ro', 'Action')"))).toBe('25006');
      await a.query('ROLLBACK');
      await a.query('SET default_transaction_read_only = on');
      expect(await sqlstate(a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-ro', 'Action')"))).toBe('25006');
      // With parameters too, and with the setting made by a function or the TRANSACTION characteristics.
      expect(await sqlstate(a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ($1, 'Action')", ['tx-ro']))).toBe('25006');
      const b = await s.fresh();
      await b.query("SELECT set_config('default_transaction_read_only', 'on', false)");
      expect(await sqlstate(b.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ($1, 'Action')", ['tx-ro']))).toBe('25006');
      await b.query("SELECT set_config('default_transaction_read_only', 'off', false)");
      await b.query('SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY');
      expect(await sqlstate(b.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ($1, 'Action')", ['tx-ro']))).toBe('25006');
      await b.query('SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE');
    } finally {
      await a.query('ROLLBACK');
      await a.query('SET default_transaction_read_only = off');
    }
    expect(await stepsOf('tx-ro')).toBe(0);
  });

  it('refuse a write to an ordinary table with 25006', async () => {
    const a = await s.fresh();
    await a.query('CREATE TABLE tx_plain (x INTEGER)');
    await a.query('BEGIN READ ONLY');
    expect(await sqlstate(a.query('INSERT INTO tx_plain VALUES (1)'))).toBe('25006');
    await a.query('ROLLBACK');
    expect(await countOf(a, 'SELECT count(*) FROM tx_plain')).toBe(0);
  });
});

describe('chain columns returned inside a transaction block', () => {
  const columns = 'trace_id, session_id, step_index, prev_hash, current_hash, created_at, ledger_seq';

  it('come back at INSERT with the values COMMIT stores, behind the block s earlier appends', async () => {
    const a = await s.fresh();
    await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-held', 'Observation')");
    const [before] = await chainOf(a, 'tx-held');
    await a.query('BEGIN');
    try {
      // Appended before the first INSERT that returns chain columns, and so chained before it.
      await a.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-held', 'Reasoning', 'plain')");
      const returned = await a.query(
        `INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-held', 'Action', 'one'), ('tx-held', 'Decision', 'two') RETURNING ${columns}`,
      );
      const later = await a.query(`INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-held', 'FinalAnswer', 'three') RETURNING *`);
      expect(returned.rows.map((r) => r.step_index)).toEqual([2, 3]);
      expect(later.rows.map((r) => r.step_index)).toEqual([4]);
      expect(returned.rows[1].prev_hash).toBe(returned.rows[0].current_hash);
      expect(later.rows[0].prev_hash).toBe(returned.rows[1].current_hash);
      expect(BigInt(returned.rows[0].ledger_seq)).toBe(BigInt(before?.ledger_seq ?? 0) + 2n);
      // Nothing is visible before COMMIT.
      expect(await stepsOf('tx-held')).toBe(1);
      await a.query('COMMIT');
      const stored = await a.query(`SELECT ${columns} FROM _cot_steps WHERE session_id = 'tx-held' AND step_index >= 2 ORDER BY step_index`);
      expect(stored.rows).toEqual([...returned.rows, { ...later.rows[0] }].map((r) => Object.fromEntries(columns.split(', ').map((c) => [c, r[c]]))));
      expect(chainProblems(await chainOf(a, 'tx-held'))).toEqual([]);
      expect((await a.query("SELECT valid FROM cot_verify('tx-held')")).rows).toEqual([{ valid: true }]);
    } finally {
      await a.query('ROLLBACK');
    }
  });

  it('hold the append order until the block ends: others wait (55P03 under lock_timeout), and ROLLBACK gives its numbers again', async () => {
    const a = await s.fresh();
    const b = await s.fresh();
    const c = await s.fresh();
    await a.query('BEGIN');
    let waiting: Promise<bigint> | null = null;
    try {
      const r = await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-hold-a', 'Action') RETURNING ledger_seq");
      const held = BigInt(r.rows[0].ledger_seq);
      await b.query("SET lock_timeout = '100ms'");
      await b.query('BEGIN');
      expect(await sqlstate(b.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-hold-b', 'Action') RETURNING step_index"))).toBe('55P03');
      await b.query('ROLLBACK');
      // Waits for the holder, then takes the number its ROLLBACK gave back: no gap.
      waiting = c
        .query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-hold-c', 'Action') RETURNING ledger_seq")
        .then((x) => BigInt(x.rows[0].ledger_seq));
      await a.query('ROLLBACK');
      expect(await waiting).toBe(held);
    } finally {
      await a.query('ROLLBACK');
      await waiting?.catch(() => undefined);
    }
    expect(await stepsOf('tx-hold-a')).toBe(0);
    expect(await stepsOf('tx-hold-b')).toBe(0);
  });

  it('go with ROLLBACK TO a savepoint before them all, and refuse one that would keep some (0A000)', async () => {
    const a = await s.fresh();
    const insert = "INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-held-sp', 'Action') RETURNING step_index";
    await a.query('BEGIN');
    try {
      await a.query('SAVEPOINT before_all');
      expect((await a.query(insert)).rows).toEqual([{ step_index: 0 }]);
      await a.query('ROLLBACK TO SAVEPOINT before_all');
      expect((await a.query(insert)).rows).toEqual([{ step_index: 0 }]);
      await a.query('SAVEPOINT between');
      expect((await a.query(insert)).rows).toEqual([{ step_index: 1 }]);
      expect(await sqlstate(a.query('ROLLBACK TO SAVEPOINT between'))).toBe('0A000');
      expect((await a.query('COMMIT')).command).toBe('ROLLBACK');
    } finally {
      await a.query('ROLLBACK');
    }
    expect(await stepsOf('tx-held-sp')).toBe(0);
    await a.query('BEGIN');
    try {
      await a.query('SAVEPOINT before_all');
      await a.query(insert);
      await a.query('ROLLBACK TO SAVEPOINT before_all');
      expect((await a.query('COMMIT')).command).toBe('COMMIT');
    } finally {
      await a.query('ROLLBACK');
    }
    expect(await stepsOf('tx-held-sp')).toBe(0);
  });
});

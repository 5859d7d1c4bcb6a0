import type { WireParam } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { qualifiedName, quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';
import { checkParents, validateSteps } from '../../../ledger/chain/validate.js';
import { TypeOid } from '../../../protocol/type-oids.js';
import type { ExecuteOutcome, ResultSink } from '../../../session/handler-port.js';
import type { CopyFromStdin } from '../../../sql/copy.js';
import { hoistInsertWith, parseInsert, returnsAnyOf } from '../../../sql/insert.js';
import { lexStatement, tokenize } from '../../../sql/lexer.js';
import { ParsedStatement } from '../../../sql/parsed.js';
import { uuidv7 } from '../../../ledger/chain/append.js';
import { appendsVisible, type HandlerContext } from './context.js';
import { directRows, evaluateRows, planLedgerInsert, serverColumnsLeftToServer, type LedgerInsertPlan } from './ledger-insert.js';
import { clientError, SAME_POSITION, Statement, wireParams, type ConnectionPortal, type EngineText } from './plan.js';

/** The chain columns a ledger INSERT's RETURNING asks for (`*` included), or null when it asks only for what is known before COMMIT. */
function chainColumnsReturned(plan: LedgerInsertPlan): string | null {
  return returnsAnyOf(plan.returning ?? '', new Set([...plan.table.serverColumns].filter((c) => c !== 'trace_id')));
}

/**
 * Runs a wait under lock_timeout as well as the signal it is given: at the
 * deadline it fails with 55P03, as a lock wait does in PostgreSQL.
 */
async function underLockTimeout<T>(signal: AbortSignal, ms: number, wait: (signal: AbortSignal) => Promise<T>): Promise<T> {
  if (ms <= 0) return wait(signal);
  const either = new AbortController();
  const timer = setTimeout(() => either.abort(new PgError(SqlState.LockNotAvailable, 'canceling statement due to lock timeout')), ms);
  const passOn = (): void => either.abort(signal.reason);
  signal.addEventListener('abort', passOn, { once: true });
  try {
    return await wait(either.signal);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', passOn);
  }
}

/** How many plans a connection keeps: drivers rarely cycle through more INSERT texts than this. */
const PLAN_CACHE_SIZE = 256;

/**
 * Appends to ledgers, the only way a client's rows reach one: an INSERT or
 * a COPY becomes rows evaluated here, checked, stamped with the session's
 * identity and handed to the writer, which computes the chain. The
 * client's statement itself never runs on the engine.
 */
export class LedgerAppends {
  /**
   * Ledger INSERT plans by statement text: drivers that send the same INSERT
   * as a new unnamed statement each time would otherwise pay for preparing
   * its evaluation every time. The cache owns the plans.
   */
  private readonly plans = new Map<string, LedgerInsertPlan>();

  constructor(private readonly ctx: HandlerContext) {}

  /**
   * An INSERT whose target is a ledger becomes a plan for the writer; null
   * for any other statement. The client's statement is not prepared: DuckDB
   * would insist on values for the chain columns, which only the server gives.
   */
  async prepare(statement: EngineText, paramTypes: readonly number[]): Promise<Statement | null> {
    const { ctx } = this;
    const first = statement.tokens[0]?.text.toUpperCase();
    if (first === 'WITH') return this.prepareHoisted(statement, paramTypes);
    if (first !== 'INSERT') return null;
    const parts = parseInsert(statement.text, statement.tokens);
    if (parts === null) return null;
    const table = await ctx.services.ledgers.find(parts.target);
    if (table === null) {
      const name = parts.target[parts.target.length - 1] ?? '';
      if (ctx.tx.createdHere(name)) {
        throw new PgError(
          SqlState.ObjectNotInPrerequisiteState,
          `ledger table "${name}" was created in this transaction: it takes appends once the transaction commits`,
          {
            hint: 'COMMIT the CREATE TABLE, then append to the ledger.',
          },
        );
      }
      return null;
    }
    await ctx.access.ledgerAppend(statement.parsed, table.name);
    const key = `${paramTypes.join(',')}\u0000${statement.text}`;
    let insert = this.plans.get(key);
    if (insert === undefined || insert.table !== table) {
      insert?.evaluate.close();
      try {
        insert = await ctx.calls.run(() => planLedgerInsert(ctx.engine, table, parts, statement.tokens, statement.text, paramTypes));
      } catch (err) {
        throw clientError(err, statement.offset, statement.clientPosition);
      }
      if (this.plans.size >= PLAN_CACHE_SIZE) this.close();
      this.plans.set(key, insert);
    }
    const types = [...insert.evaluate.paramTypes];
    for (let i = types.length; i < paramTypes.length; i++) types.push(paramTypes[i] as number);
    return new Statement(
      { kind: 'ledger-insert', insert, tokens: statement.tokens, offset: statement.offset, clientPosition: statement.clientPosition ?? SAME_POSITION },
      types,
      insert.fields,
    );
  }

  /**
   * `WITH ... INSERT INTO ledger ...` (valid PostgreSQL) is the INSERT with
   * its WITH clause moved in front of its source: the same rows, appended by
   * the writer like any INSERT ... SELECT. The guard and the roles judge the
   * moved text, which is what runs; errors point into the client's text.
   */
  private async prepareHoisted(statement: EngineText, paramTypes: readonly number[]): Promise<Statement | null> {
    const hoisted = hoistInsertWith(statement.text, statement.tokens);
    if (hoisted === null) return null;
    const scanned = lexStatement(hoisted.text);
    const outer = statement.clientPosition ?? SAME_POSITION;
    const moved: EngineText = {
      text: scanned.text,
      tokens: scanned.tokens,
      offset: statement.offset,
      clientPosition: (p) => outer(hoisted.position(p)),
      parsed: new ParsedStatement(scanned.text, scanned.tokens),
    };
    return this.prepare(moved, paramTypes);
  }

  /**
   * INSERT into a ledger: evaluate the client's rows here, check them, and
   * hand them to the writer, now (autocommit: answered after the commit) or
   * at COMMIT (inside a transaction block).
   */
  async execute(portal: ConnectionPortal, plan: LedgerInsertPlan, sink: ResultSink): Promise<ExecuteOutcome> {
    const { ctx } = this;
    portal.done = true;
    ctx.tx.wrote();
    const params = wireParams(portal);
    let rows = directRows(plan, params);
    if (rows === null) {
      // The rows may be read from a ledger (INSERT ... SELECT).
      await appendsVisible(ctx);
      rows = serverColumnsLeftToServer(plan, await ctx.calls.run(() => evaluateRows(plan, params, ctx.services.maxAppendBytes)));
    }
    await this.check(plan, rows, `INSERT INTO ${plan.table.name}`);
    const job = { table: plan.table, rows };
    const tag = `INSERT 0 ${rows.length}`;
    if (!ctx.tx.autocommit) {
      if (plan.returning === null) {
        await ctx.calls.wait((signal) => ctx.tx.append(job, signal));
        return { done: true, tag };
      }
      // What is known at INSERT is returned at once (ORMs ask for the key of what they add); the chain
      // columns need the rows chained now, which holds the append order until the block ends.
      if (chainColumnsReturned(plan) !== null) {
        const result = await ctx.calls.wait((signal) => underLockTimeout(signal, ctx.settings.lockTimeoutMs, (s) => ctx.tx.appendChained(job, s)));
        await this.returnTexts(
          plan,
          plan.table.columns.map((c) => c.name),
          result.rows ?? [],
          portal,
          sink,
        );
        return { done: true, tag };
      }
      const traceIds = plan.table.serverColumns.has('trace_id') ? rows.map(() => uuidv7(Date.now())) : undefined;
      await ctx.tx.append(traceIds === undefined ? job : { ...job, traceIds });
      const columns = [...plan.clientColumns, ...(traceIds === undefined ? [] : ['trace_id'])];
      const texts = rows.map((r, i) => [...r, ...(traceIds === undefined ? [] : [traceIds[i] as string])]);
      await this.returnTexts(plan, columns, texts, portal, sink);
      return { done: true, tag };
    }
    const [result] = await ctx.calls.wait((signal) => ctx.services.writer.append([job], signal));
    if (plan.returning !== null && result?.rows !== undefined && result.count > 0) {
      // From the texts as chained and journaled: the table may not hold them yet, and on a full disk it
      // cannot until space is freed, when an answer read from it would have had no rows.
      await this.returnTexts(
        plan,
        plan.table.columns.map((c) => c.name),
        result.rows,
        portal,
        sink,
      );
    } else if (plan.returning !== null && result !== undefined && result.count > 0) {
      await appendsVisible(ctx, result.lastSeq);
      const returning = await ctx.engine.prepare(
        `SELECT ${plan.returning} FROM ${qualifiedName(plan.table)} WHERE ledger_seq BETWEEN ${result.firstSeq} AND ${result.lastSeq} ORDER BY ledger_seq`,
        [],
      );
      try {
        const cursor = await returning.execute();
        await cursor.fetch(0, portal.formats, sink, { timeZone: ctx.settings.timeZone });
        cursor.close();
      } finally {
        returning.close();
      }
    }
    return { done: true, tag };
  }

  /** RETURNING over rows' canonical texts (of `columns`), before COMMIT: the client's columns and trace_id, or whole chained rows. */
  private async returnTexts(
    plan: LedgerInsertPlan,
    columns: readonly string[],
    rows: ReadonlyArray<ReadonlyArray<string | null>>,
    portal: ConnectionPortal,
    sink: ResultSink,
  ): Promise<void> {
    const { ctx } = this;
    if (rows.length === 0) return;
    const types = new Map(plan.table.columns.map((c) => [c.name, c.type]));
    let p = 0;
    const tuple = (): string =>
      `(${columns
        .map((name) => {
          p++;
          const type = types.get(name) ?? 'VARCHAR';
          // Canonical texts: a timestamp with time zone is microseconds since the epoch.
          return type.toUpperCase() === 'TIMESTAMP WITH TIME ZONE'
            ? `CAST(system.main.make_timestamp(CAST($${p} AS BIGINT)) AS TIMESTAMPTZ)`
            : `CAST($${p} AS ${type})`;
        })
        .join(', ')})`;
    const sql = `SELECT ${plan.returning} FROM (VALUES ${rows.map(tuple).join(', ')}) AS ${quoteIdent(plan.table.name)}(${columns.map(quoteIdent).join(', ')})`;
    const values = rows.flat();
    await ctx.calls.run(async () => {
      const statement = await ctx.engine.prepare(sql, []);
      try {
        statement.bind(values.map((v) => ({ value: v === null ? null : Buffer.from(v, 'utf8'), format: 0, typeOid: TypeOid.text })));
        const cursor = await statement.execute();
        await cursor.fetch(0, portal.formats, sink, { timeZone: ctx.settings.timeZone });
        cursor.close();
      } finally {
        statement.close();
      }
    });
  }

  /** A chunk of COPY FROM STDIN's rows (text cells), evaluated into the ledger's columns and checked like an INSERT's. */
  async evaluateCopied(
    table: LedgerTable,
    command: CopyFromStdin,
    columns: readonly string[],
    chunk: readonly (string | null)[][],
  ): Promise<(string | null)[][]> {
    let p = 0;
    const source = `VALUES ${chunk.map(() => `(${columns.map(() => `$${++p}`).join(', ')})`).join(', ')}`;
    const { ctx } = this;
    const plan = await ctx.calls.run(() =>
      planLedgerInsert(
        this.ctx.engine,
        table,
        { target: command.target, columns, source, sourceStart: 0, returning: null, byName: false, unsupported: null },
        tokenize(source),
        source,
        [],
      ),
    );
    try {
      const params: WireParam[] = chunk.flat().map((v) => ({ value: v === null ? null : Buffer.from(v, 'utf8'), format: 0, typeOid: TypeOid.text }));
      const evaluated = serverColumnsLeftToServer(plan, await ctx.calls.run(() => evaluateRows(plan, params, ctx.services.maxAppendBytes)));
      await this.check(plan, evaluated, `COPY ${command.targetText} FROM STDIN`);
      return evaluated;
    } finally {
      plan.evaluate.close();
    }
  }

  close(): void {
    for (const p of this.plans.values()) p.evaluate.close();
    this.plans.clear();
  }

  /** The session's identity is stamped, the rows validated, and their parents must exist. */
  private async check(plan: LedgerInsertPlan, rows: (string | null)[][], statement: string): Promise<void> {
    this.ctx.access.stampIdentity(plan.clientColumns, rows, statement);
    validateSteps(plan.table, plan.clientColumns, rows, this.ctx.services.maxContentBytes);
    try {
      await this.ctx.services.writer.checkOwners(plan.table, rows, (keys) => this.ownersOf(plan.table, keys));
    } catch (err) {
      this.ctx.access.appendRefused(err, statement);
    }
    await this.checkParents(plan, rows);
  }

  /** Whose these sessions are: the org_id and agent_id of their first steps, as this connection reads them. */
  private async ownersOf(table: LedgerTable, keys: readonly string[]): Promise<Map<string, { org: string | null; agent: string | null }>> {
    const has = (c: string): boolean => table.columns.some((col) => col.name === c);
    if (table.chainKey === null || keys.length === 0 || (!has('org_id') && !has('agent_id'))) return new Map();
    await appendsVisible(this.ctx);
    const key = quoteIdent(table.chainKey);
    const first = (c: string): string => (has(c) ? `CAST(first(${quoteIdent(c)} ORDER BY step_index) AS VARCHAR)` : 'NULL');
    const rows = (await this.ctx.engine.query(
      `SELECT CAST(${key} AS VARCHAR), ${first('org_id')}, ${first('agent_id')} FROM ${qualifiedName(table)}
       WHERE CAST(${key} AS VARCHAR) IN (SELECT unnest(from_json($1, '["VARCHAR"]'))) GROUP BY ${key} HAVING min(step_index) = 0`,
      [JSON.stringify(keys)],
    )) as Array<[string, string | null, string | null]>;
    return new Map(rows.map(([k, org, agent]) => [k, { org, agent }]));
  }

  /** parent_trace_id must name a step that exists. */
  private async checkParents(plan: LedgerInsertPlan, rows: ReadonlyArray<ReadonlyArray<string | null>>): Promise<void> {
    await checkParents(plan.table, plan.clientColumns, rows, async (parents) => {
      await appendsVisible(this.ctx);
      const found = await this.ctx.engine.query(
        `SELECT CAST(trace_id AS VARCHAR) FROM ${qualifiedName(plan.table)} WHERE trace_id IN (SELECT CAST(unnest(string_split($1, ',')) AS UUID))`,
        [parents.join(',')],
      );
      return found.map((r) => String(r[0]));
    });
  }
}

import {
  ARRAY,
  BIGINT,
  DuckDBDataChunk,
  DuckDBInstance,
  FLOAT,
  TIMESTAMPTZ,
  type DuckDBAppender,
  DuckDBScalarFunction,
  DuckDBMaterializedResult,
  DuckDBTimestampTZValue,
  DuckDBTypeId,
  ResultReturnType,
  StatementType,
  type DuckDBConnection,
  type DuckDBPreparedStatement,
  type DuckDBResult,
  type DuckDBType,
  type DuckDBValue,
  VARCHAR,
} from '@duckdb/node-api';
import { closeSync, fsyncSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { ArrayOidOf, ElementOidOf, TypeOid } from '../../../protocol/type-oids.js';
import type { DataRowWriter } from '../../../protocol/encode.js';
import { replaceParams, type Token, tokenize } from '../../../sql/lexer.js';
import { UNCONSTRAINED_NUMERIC } from '../../../sql/numeric.js';
import { paramContext } from '../../../sql/param-context.js';
import type { ParsedStatement, SqlSource } from '../../../sql/parsed.js';
import { TimeZoneOffsets } from '../../../engine/pg-format.js';
import type {
  AppendColumn,
  AppendTarget,
  AppendValue,
  ColumnInfo,
  Engine,
  EngineConnection,
  EngineFunction,
  EngineCursor,
  EngineStatement,
  RenderSettings,
  RowSink,
  StatementKind,
  WireParam,
} from '../../../engine/port.js';
import { LimitBoundStatement, limitParams } from './limit-params.js';
import { ScaleBoundStatement } from './numeric-params.js';
import { fromDuckDBError } from './errors.js';
import { setFloatArrays } from './float-arrays.js';
import { registerCatalogFunctions } from './catalog-functions.js';

export { registerCatalogFunctions };
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { bindParams } from './params.js';
import { type StringColumn, stringColumn } from './string-vectors.js';
import { uuidColumn } from './uuid-vectors.js';
import { canonicalRenderer, type CanonicalRenderer } from './from-canonical.js';
import { codecFor, isVerbatimText, UNRESOLVED_CODEC, type PgCodec, type RenderContext } from './pg-types.js';

export interface DuckDBEngineOptions {
  /** A file path, or ':memory:'. */
  readonly path: string;
  /** Open the file read-only (offline verification), so a stopped server's file is never changed. */
  readonly readOnly?: boolean;
  /** Leave file access on: only for the administrator's offline export, never for a server. */
  readonly allowFiles?: boolean;
  /** Statements run once, before the engine is locked down (the PostgreSQL catalog's views). */
  readonly setup?: readonly string[];
  /**
   * DuckDB's memory ceiling for every connection together, and how much it may spill to its temp
   * directory beyond it, in MiB: a statement past both fails with 53200 while the others go on.
   * DuckDB's own defaults (80% of RAM, and 90% of the free disk) when absent.
   */
  readonly memoryMB?: number;
  readonly spillMB?: number;
  /**
   * How the data the engine writes is compressed. `fast-reads` (the
   * default) leaves out the two methods whose single-row fetch decodes a
   * whole run of values (FSST strings, bit-packed integers): reading one
   * session's rows through an index then costs a fifth as much, for about
   * twice the disk (docs/benchmarks.md). `small` is DuckDB's own choice.
   */
  readonly compression?: EngineCompression;
}

export type EngineCompression = 'fast-reads' | 'small';

const statementKinds = new Map<number, StatementKind>(
  Object.entries(StatementType)
    .filter((e): e is [string, number] => typeof e[1] === 'number')
    .map(([name, value]) => [value, name as StatementKind]),
);

/** The DuckDB type a client-declared parameter type is cast to when DuckDB cannot infer one. */
const castForOid = new Map<number, string>([
  [TypeOid.bool, 'BOOLEAN'],
  [TypeOid.int2, 'SMALLINT'],
  [TypeOid.int4, 'INTEGER'],
  [TypeOid.int8, 'BIGINT'],
  [TypeOid.oid, 'UINTEGER'],
  [TypeOid.float4, 'FLOAT'],
  [TypeOid.float8, 'DOUBLE'],
  [TypeOid.bytea, 'BLOB'],
  [TypeOid.date, 'DATE'],
  [TypeOid.time, 'TIME'],
  [TypeOid.timestamp, 'TIMESTAMP'],
  [TypeOid.timestamptz, 'TIMESTAMPTZ'],
  [TypeOid.interval, 'INTERVAL'],
  [TypeOid.uuid, 'UUID'],
  [TypeOid.json, 'JSON'],
  [TypeOid.jsonb, 'JSON'],
  [TypeOid.numeric, UNCONSTRAINED_NUMERIC],
  [TypeOid.text, 'VARCHAR'],
  [TypeOid.varchar, 'VARCHAR'],
]);

/** The cast for a declared parameter type, arrays included (psycopg 3 sends a list as int2[] or text[]). */
function declaredCast(oid: number): string | undefined {
  const element = ElementOidOf.get(oid);
  if (element !== undefined) {
    const inner = castForOid.get(element);
    return inner === undefined ? undefined : `${inner}[]`;
  }
  return castForOid.get(oid);
}

const FAST_READS = "SET GLOBAL disabled_compression_methods = 'fsst,bitpacking,rle,alp,alprd,chimp,patas'";

/**
 * Rewrites a closed database file into a new one holding only what is live,
 * then puts it in the old one's place. DuckDB reuses freed blocks without
 * clearing them, and a block shared by several segments keeps a replaced
 * segment's bytes while another one lives: only a copy leaves no trace of a
 * redacted value or a removed row. The original stays whole until the
 * rename, so a failure leaves it as it was.
 */
export async function rewriteDatabaseFile(
  path: string,
  compression: EngineCompression,
): Promise<{ readonly bytesBefore: number; readonly bytesAfter: number }> {
  const fresh = `${path}.rewrite`;
  for (const f of [fresh, `${fresh}.wal`]) rmSync(f, { force: true });
  const bytesBefore = statSync(path).size;
  const instance = await DuckDBInstance.create(path, { autoinstall_known_extensions: 'false', autoload_known_extensions: 'false' });
  try {
    const conn = await instance.connect();
    try {
      if (compression === 'fast-reads') await conn.run(FAST_READS);
      // Defaults may call the server's clock.
      registerCatalogFunctions(conn);
      const name = String((await conn.runAndReadAll('SELECT current_database()')).getRows()[0]?.[0]);
      await conn.run(`ATTACH '${fresh.replaceAll("'", "''")}' AS cot_rewrite`);
      await conn.run(`COPY FROM DATABASE "${name.replaceAll('"', '""')}" TO cot_rewrite`);
      await conn.run('DETACH cot_rewrite');
    } finally {
      conn.closeSync();
    }
  } catch (err) {
    rmSync(fresh, { force: true });
    throw err;
  } finally {
    instance.closeSync();
  }
  const fd = openSync(fresh, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(fresh, path);
  // Closed cleanly, the old file had no WAL; one left over would be replayed into the new file.
  rmSync(`${path}.wal`, { force: true });
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
  return { bytesBefore, bytesAfter: statSync(path).size };
}

export class DuckDBEngine implements Engine {
  private constructor(
    private readonly instance: DuckDBInstance,
    readonly version: string,
  ) {}

  /**
   * Opens the database, then locks the engine down: no file or network access
   * on a client's behalf, no extension loading, and no configuration changes
   * (DESIGN invariant 6).
   */
  static async open(opts: DuckDBEngineOptions): Promise<DuckDBEngine> {
    const instance = await DuckDBInstance.create(opts.path, {
      autoinstall_known_extensions: 'false',
      autoload_known_extensions: 'false',
      ...(opts.readOnly === true ? { access_mode: 'READ_ONLY' } : {}),
      ...(opts.memoryMB === undefined ? {} : { memory_limit: `${opts.memoryMB}MiB` }),
      ...(opts.spillMB === undefined ? {} : { max_temp_directory_size: `${opts.spillMB}MiB` }),
    });
    try {
      const conn = await instance.connect();
      try {
        const reader = await conn.runAndReadAll('SELECT version()');
        const version = `DuckDB ${String(reader.getRows()[0]?.[0] ?? 'unknown')}`;
        // Timestamps without an offset are read as UTC, whatever the host's zone.
        await conn.run("SET GLOBAL TimeZone = 'UTC'");
        // PostgreSQL's orders: NULLs sort as the largest value.
        await conn.run("SET GLOBAL default_null_order = 'nulls_last_on_asc_first_on_desc'");
        // ... and integer division truncates (5 / 2 = 2).
        await conn.run('SET GLOBAL integer_division = true');
        // Every statement runs as a prepared statement, and DuckDB bakes the table statistics of
        // the moment it prepares into the plan: a filter on a literal the table did not hold then
        // keeps returning nothing after rows arrive (duckdb/duckdb#23704). DuckDB's own fix
        // (#24696) skips statistics propagation for prepared statements; this does the same.
        await conn.run("SET GLOBAL disabled_optimizers = 'statistics_propagation'");
        // fast-reads: FSST, bit-packing and RLE decode a whole run of values for a one-row fetch, and
        // ALP and its kin, and RLE, decode every float a search compares: a scan of 100k sparse
        // vectors took 98 ms with RLE, 25 without (and the file holds 1.5 KB a vector, not 0.4).
        if ((opts.compression ?? 'fast-reads') === 'fast-reads') await conn.run(FAST_READS);
        // Before the set-up, whose macros DuckDB binds as they are created.
        registerCatalogFunctions(conn);
        for (const statement of opts.setup ?? []) await conn.run(statement);
        if (opts.allowFiles !== true) await conn.run('SET GLOBAL enable_external_access = false');
        await conn.run('SET GLOBAL allow_community_extensions = false');
        await conn.run('SET GLOBAL lock_configuration = true');
        return new DuckDBEngine(instance, version);
      } finally {
        conn.closeSync();
      }
    } catch (err) {
      instance.closeSync();
      throw err;
    }
  }

  async connect(): Promise<EngineConnection> {
    return new DuckDBSession(await this.instance.connect());
  }

  async registerFunction(fn: EngineFunction): Promise<void> {
    const conn = await this.instance.connect();
    try {
      conn.registerScalarFunction(
        DuckDBScalarFunction.create({
          name: fn.name,
          returnType: VARCHAR,
          parameterTypes: fn.parameters.map((p) => (p === 'BIGINT' ? BIGINT : VARCHAR)),
          // Nulls reach the function, which answers null: a default null-in null-out.
          specialHandling: true,
          volatile: fn.volatile === true,
          mainFunction: (_info, input, output) => {
            const vectors = fn.parameters.map((_, i) => input.getColumnVector(i));
            for (let row = 0; row < input.rowCount; row++) {
              const args = vectors.map((v) => v.getItem(row) as bigint | string | null);
              let value: string | null = null;
              if (!args.includes(null)) {
                try {
                  value = fn.call(args as Array<bigint | string>);
                } catch {
                  // A function that cannot serve its arguments answers null; its SQL wrapper explains.
                  value = null;
                }
              }
              output.setItem(row, value);
            }
            output.flush();
          },
        }),
      );
    } finally {
      conn.closeSync();
    }
  }

  builtinFunctionNames(): Promise<ReadonlySet<string>> {
    return this.names('SELECT DISTINCT lower(function_name) FROM system.main.duckdb_functions() WHERE internal');
  }

  settingNames(): Promise<ReadonlySet<string>> {
    return this.names('SELECT lower(name) FROM system.main.duckdb_settings()');
  }

  private async names(sql: string): Promise<ReadonlySet<string>> {
    const conn = await this.instance.connect();
    try {
      const reader = await conn.runAndReadAll(sql);
      return new Set(reader.getRows().map((r) => String(r[0])));
    } finally {
      conn.closeSync();
    }
  }

  /**
   * Moves the WAL into the file. DuckDB refuses while another transaction is
   * open (the applier's, the catalog snapshot's refresh, a client's), and
   * most of those end within moments: it tries again for up to `patienceMs`
   * before it gives up with DuckDB's error.
   */
  async checkpoint(patienceMs = 2000): Promise<void> {
    const conn = await this.instance.connect();
    const deadline = performance.now() + patienceMs;
    try {
      for (;;) {
        try {
          await conn.run('CHECKPOINT');
          return;
        } catch (err) {
          if (!/other (write )?transactions/i.test(String(err)) || performance.now() > deadline) throw err;
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      }
    } finally {
      conn.closeSync();
    }
  }

  async close(): Promise<void> {
    this.instance.closeSync();
  }
}

/**
 * Rows with vectors, a chunk at a time: DuckDB parses a vector's text
 * (CAST('[...]' AS FLOAT[384])) at about 300 µs a row, and a chunk takes
 * the floats as they are (float-arrays.ts). Text columns are cast by the
 * appender as in the row path. Vectors may not be NULL.
 */
function appendChunks(appender: DuckDBAppender, columns: readonly AppendColumn[], rows: ReadonlyArray<ReadonlyArray<AppendValue>>): void {
  const types = columns.map((c) => (c.floats !== undefined ? ARRAY(FLOAT, c.floats) : c.epochMicros ? TIMESTAMPTZ : VARCHAR));
  for (let at = 0; at < rows.length; at += 2048) {
    const part = rows.slice(at, at + 2048);
    const chunk = DuckDBDataChunk.create(types, part.length);
    columns.forEach((c, i) => {
      if (c.floats !== undefined) {
        setFloatArrays(
          chunk,
          i,
          part.map((row) => row[i] as Float32Array),
          c.floats,
        );
        return;
      }
      chunk.setColumnValues(
        i,
        part.map((row) => {
          const v = row[i] ?? null;
          if (v === null) return null;
          return c.epochMicros ? new DuckDBTimestampTZValue(BigInt(v as string)) : (v as string);
        }),
      );
    });
    appender.appendDataChunk(chunk);
  }
}

class DuckDBSession implements EngineConnection {
  /** A streaming result left open by a suspended portal; DuckDB allows one per connection. */
  active: DuckDBCursor | null = null;
  private closed = false;

  constructor(private readonly conn: DuckDBConnection) {}

  async prepare(sql: string, clientTypes: readonly number[], parsed?: ParsedStatement): Promise<EngineStatement> {
    const declaredTypes = castDeclarations(sql, clientTypes, parsed?.text === sql ? parsed : undefined);
    try {
      const statement = await this.prepareOne(sql, declaredTypes, parsed?.text === sql ? parsed : undefined);
      const numeric = statement instanceof DuckDBStatement && statement.kind === 'SELECT' ? ScaleBoundStatement.numericParams(statement.paramDuckTypes) : [];
      if (numeric.length === 0) return statement;
      return new ScaleBoundStatement(statement, sql, numeric, (text) => this.prepareOne(text, declaredTypes));
    } catch (err) {
      // LIMIT $1 in a correlated subquery (limit-params.ts): prepared again at each execution, with its value written in.
      const shape = err instanceof Error && /Non-constant limit not supported/i.test(err.message) ? limitParams(sql) : null;
      if (shape === null) throw err;
      const declared = shape.rest.map((n) => declaredTypes[n - 1] ?? 0);
      const probe = await this.prepareOne(shape.text(new Map(shape.limits.map((n) => [n, '1']))), declared);
      return new LimitBoundStatement(probe, shape, (text) => this.prepareOne(text, declared));
    }
  }

  /** `parsed`: the parsed form of `sql` itself, if the caller has one. */
  private async prepareOne(sql: string, declaredTypes: readonly number[], parsed?: ParsedStatement): Promise<EngineStatement> {
    await this.settleActive();
    let prepared: DuckDBPreparedStatement;
    try {
      prepared = await this.prepareRaw(sql);
    } catch (err) {
      // `amount * $1` may fail to bind outright ("Could not choose a best candidate function"):
      // typed as PostgreSQL types it, the parameter may resolve the overload.
      const retyped = await this.prepareTyped(sql, paramNumbers(sql), declaredTypes, parsed);
      if (retyped === null) throw err;
      prepared = retyped;
    }
    const unresolved = unresolvedParams(prepared);
    if (unresolved.length > 0) {
      const typed = await this.prepareTyped(sql, unresolved, declaredTypes, parsed);
      if (typed !== null && unresolvedParams(typed).length < unresolved.length) {
        prepared.destroySync();
        prepared = typed;
      } else {
        typed?.destroySync();
      }
    }
    if (prepared.parameterCount > 0 && unresolvedColumns(prepared)) {
      // A table macro's parameters: DuckDB binds its body only once it has their values, and describes one
      // column "unknown" until then, whatever it will return. Typed as the function's signature types them
      // (sql/param-context.ts), the body binds now.
      const typed = await this.prepareTyped(sql, paramNumbers(sql), declaredTypes, parsed);
      if (typed !== null && !unresolvedColumns(typed)) {
        prepared.destroySync();
        prepared = typed;
      } else {
        typed?.destroySync();
      }
    }
    const untyped = unresolvedParams(prepared);
    if (untyped.length > 0) {
      // PostgreSQL types a parameter that has no context as text; DuckDB leaves
      // it unresolved, and then cannot even say how many columns the result has.
      // Where the context types one as PostgreSQL would (a bound of generate_series), that type instead.
      const rewritten = castParams(sql, untyped, declaredTypes, await this.contextTypes(parsed ?? sql, untyped));
      if (rewritten !== null) {
        const retyped = await this.prepareRaw(rewritten).catch(() => null);
        if (retyped !== null) {
          prepared.destroySync();
          prepared = retyped;
        }
      }
      const still = unresolvedParams(prepared);
      if (still.length > 0 && unresolvedColumns(prepared)) {
        // DuckDB loses the type of a parameter it was told (`$1::integer`) in some statements (one
        // in a CASE after a correlated subquery with parameters of its own): described from a probe
        // with typed NULLs for the parameters, and bound with the values' types at execution, when
        // DuckDB binds the statement again.
        const probe = await this.typedProbe(sql, declaredTypes, parsed);
        if (probe !== null) return new DuckDBStatement(this, prepared, sql, declaredTypes, probe);
        // DuckDB would describe one column named "unknown" and then return another shape of rows:
        // a wrong answer without an error. PostgreSQL's error for a parameter it cannot type instead.
        prepared.destroySync();
        throw new PgError(SqlState.IndeterminateDatatype, `could not determine data type of parameter $${still[0] as number}`, {
          hint: `Cast the parameter where it is used (for example $${still[0] as number}::numeric), or declare its type in Parse.`,
        });
      }
    }
    if (prepared.parameterCount > 0 && unresolvedColumns(prepared)) {
      // A table function's arguments (generate_series(1, $1::int4)): DuckDB binds it only with the
      // values, and describes one column "unknown" until then. Described from the typed probe.
      const probe = await this.typedProbe(sql, declaredTypes, parsed);
      if (probe !== null) return new DuckDBStatement(this, prepared, sql, declaredTypes, probe);
    }
    return new DuckDBStatement(this, prepared, sql, declaredTypes);
  }

  /**
   * The statement with a NULL of each parameter's type in the parameter's
   * place, when every parameter has a type of its own (declared, or a cast
   * in the text) and that resolves every result column: DuckDB describes
   * nothing of some statements while they have parameters at all (one in a
   * correlated subquery of the select list, another in a CASE after it).
   */
  private async typedProbe(sql: string, declared: readonly number[], parsed?: ParsedStatement): Promise<DuckDBPreparedStatement | null> {
    const tokens = tokenize(sql);
    const params = [...new Set(tokens.filter((t) => t.kind === 'param').map((t) => Number(t.text.slice(1))))];
    // A parameter typed by its context as PostgreSQL types it (generate_series(1, $1) is of int4): a NULL of that type.
    const cast = castInText(tokens);
    const untyped = params.filter((n) => (declared[n - 1] ?? 0) === 0 && !cast.has(n));
    const context = untyped.length === 0 ? new Map<number, string>() : await this.contextTypes(parsed ?? sql, untyped);
    if (!untyped.every((n) => context.has(n))) return null;
    const text = replaceParams(
      sql,
      (n) => {
        const type = declaredCast(declared[n - 1] ?? 0) ?? context.get(n);
        return type === undefined ? 'NULL' : `CAST(NULL AS ${type})`;
      },
      tokens,
    );
    const probe = text === null ? null : await this.prepareRaw(text).catch(() => null);
    if (probe !== null && unresolvedColumns(probe)) {
      probe.destroySync();
      return null;
    }
    return probe;
  }

  /**
   * The statement prepared again with each of `params` cast to the type its
   * declaration or its context gives it (see sql/param-context.ts); null when
   * no parameter has one, or when the typed statement does not prepare.
   */
  private async prepareTyped(
    sql: string,
    params: readonly number[],
    declared: readonly number[],
    parsed: ParsedStatement | undefined,
  ): Promise<DuckDBPreparedStatement | null> {
    if (params.length === 0) return null;
    const types = await this.contextTypes(parsed ?? sql, params);
    for (const n of params) {
      const cast = declaredCast(declared[n - 1] ?? 0);
      if (cast !== undefined) types.set(n, cast);
    }
    if (types.size === 0) return null;
    const rewritten = castParams(sql, [...types.keys()], declared, types);
    return rewritten === null ? null : this.prepareRaw(rewritten).catch(() => null);
  }

  /** The DuckDB type PostgreSQL's rules give each of `params`, where their context says. */
  private async contextTypes(sql: SqlSource, params: readonly number[]): Promise<Map<number, string>> {
    const out = new Map<number, string>();
    const context = paramContext(sql);
    const columns: Array<[number, { qualifier: string | null; column: string; array: boolean }]> = [];
    for (const n of params) {
      const hint = context.hints.get(n);
      if (hint?.kind === 'type') out.set(n, hint.type);
      else if (hint?.kind === 'column') columns.push([n, hint]);
    }
    if (columns.length === 0 || context.relations.length === 0) return out;
    const names = [...new Set(context.relations.map((r) => r.name.toLowerCase()))];
    const rows = await this.query(
      `SELECT lower(schema_name), lower(table_name), lower(column_name), data_type FROM duckdb_columns()
       WHERE lower(table_name) IN (${names.map((_, i) => `$${i + 1}`).join(', ')}) AND NOT internal`,
      names,
    ).catch(() => [] as unknown[][]);
    for (const [n, hint] of columns) {
      const candidates = context.relations.filter((r) => hint.qualifier === null || (r.alias ?? r.name).toLowerCase() === hint.qualifier.toLowerCase());
      const types = new Set<string>();
      for (const r of candidates) {
        const schema = r.schema === null || r.schema === 'public' ? 'main' : r.schema.toLowerCase();
        for (const [s, t, c, type] of rows) {
          if (t === r.name.toLowerCase() && c === hint.column.toLowerCase() && (s === schema || r.schema === null)) types.add(paramTypeOf(String(type)) ?? '');
        }
      }
      const [type] = types;
      if (types.size === 1 && type !== undefined && type !== '') out.set(n, hint.array ? `${type}[]` : type);
    }
    return out;
  }

  private async prepareRaw(sql: string): Promise<DuckDBPreparedStatement> {
    try {
      return await this.conn.prepare(sql);
    } catch (err) {
      throw fromDuckDBError(err, sql);
    }
  }

  async run(sql: string): Promise<void> {
    await this.settleActive();
    try {
      await this.conn.run(sql);
    } catch (err) {
      throw fromDuckDBError(err, sql);
    }
  }

  async append(table: AppendTarget, columns: readonly AppendColumn[], rows: ReadonlyArray<ReadonlyArray<AppendValue>>): Promise<void> {
    await this.settleActive();
    try {
      const appender = await this.conn.createAppender(table.name, table.schema, table.catalog);
      try {
        if (columns.some((c) => c.floats !== undefined)) appendChunks(appender, columns, rows);
        else
          for (const row of rows) {
            for (let i = 0; i < columns.length; i++) {
              const v = row[i] ?? null;
              if (v === null) appender.appendNull();
              else if ((columns[i] as AppendColumn).epochMicros) appender.appendTimestampTZ(new DuckDBTimestampTZValue(BigInt(v as string)));
              // The appender casts text to the column's type, as CAST does.
              else appender.appendVarchar(v as string);
            }
            appender.endRow();
          }
        appender.flushSync();
      } catch (err) {
        // The rows that failed stay buffered in the appender, and closing it, or DuckDB's finalizer
        // at some later garbage collection, would flush them into whatever transaction the
        // connection then runs, aborting it ("Current transaction is aborted"). Drop them first.
        try {
          appender.clear();
          appender.closeSync();
        } catch {
          // the first error is the one to report
        }
        throw err;
      }
      appender.closeSync();
    } catch (err) {
      // The appender reports "Failed to append: <cause>" without the error's class: restore it for the SQLSTATE.
      const cause = String((err as Error).message ?? err).replace(/^Failed to append: /, '');
      const typed = /constraint failed|duplicate key/i.test(cause)
        ? `Constraint Error: ${cause}`
        : /convert|cast/i.test(cause)
          ? `Conversion Error: ${cause}`
          : cause;
      throw fromDuckDBError(new Error(typed));
    }
  }

  async query(sql: string, params: readonly (string | null)[] = []): Promise<unknown[][]> {
    await this.settleActive();
    try {
      const prepared = await this.conn.prepare(sql);
      try {
        params.forEach((p, i) => {
          if (p === null) prepared.bindNull(i + 1);
          else prepared.bindVarchar(i + 1, p);
        });
        const reader = await prepared.runAndReadAll();
        return reader.getRowsJS() as unknown[][];
      } finally {
        prepared.destroySync();
      }
    } catch (err) {
      throw fromDuckDBError(err, sql);
    }
  }

  /** Reads the rest of an open streaming result into memory before the connection runs something else. */
  async settleActive(): Promise<void> {
    const active = this.active;
    this.active = null;
    if (active !== null) await active.materialize();
  }

  interrupt(): void {
    if (!this.closed) this.conn.interrupt();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.active = null;
    this.conn.closeSync();
  }
}

/** Whether some result column's type depends on a parameter DuckDB could not type. */
function unresolvedColumns(p: DuckDBPreparedStatement): boolean {
  for (let i = 0; i < p.columnCount; i++) if (p.columnTypeId(i) === DuckDBTypeId.INVALID) return true;
  return false;
}

function unresolvedParams(p: DuckDBPreparedStatement): number[] {
  const out: number[] = [];
  for (let i = 1; i <= p.parameterCount; i++) {
    if (p.parameterTypeId(i) === DuckDBTypeId.INVALID) out.push(i);
  }
  return out;
}

/**
 * A parameter compared with a column of this type takes the type without its
 * modifiers, as in PostgreSQL. Only a built-in type's plain name is written
 * into the statement: a user-defined type's name (which a client chose, and
 * which could hold any text) leaves the parameter to the other rules.
 */
function paramTypeOf(columnType: string): string | null {
  if (columnType.startsWith('DECIMAL(')) return UNCONSTRAINED_NUMERIC;
  return /^[A-Z][A-Z0-9_ ]*(\[\])?$/.test(columnType) ? columnType : null;
}

/** The $n numbers the statement's text holds. */
function paramNumbers(sql: string): number[] {
  return [...new Set(tokenize(sql).flatMap((t) => (t.kind === 'param' ? [Number(t.text.slice(1))] : [])))];
}

/** Wraps each unresolved $n in CAST($n AS <type>), VARCHAR unless told; returns null when the text has no $n tokens to wrap. */
function castParams(sql: string, unresolved: readonly number[], declared: readonly number[] = [], types?: ReadonlyMap<number, string>): string | null {
  const wanted = new Set(unresolved);
  return replaceParams(sql, (n, t) => (wanted.has(n) ? `CAST(${t.text} AS ${declaredCast(declared[n - 1] ?? 0) ?? types?.get(n) ?? 'VARCHAR'})` : null));
}

/** The OID a parameter cast to this engine type is declared with, as PostgreSQL types `$1::int4`. */
const oidForCast = new Map<string, number>([
  ['SMALLINT', TypeOid.int2],
  ['INTEGER', TypeOid.int4],
  ['BIGINT', TypeOid.int8],
  ['FLOAT', TypeOid.float4],
  ['DOUBLE', TypeOid.float8],
  ['BOOLEAN', TypeOid.bool],
  ['BLOB', TypeOid.bytea],
  ['DATE', TypeOid.date],
  ['TIME', TypeOid.time],
  ['TIMESTAMP', TypeOid.timestamp],
  ['TIMESTAMPTZ', TypeOid.timestamptz],
  ['INTERVAL', TypeOid.interval],
  ['UUID', TypeOid.uuid],
  ['JSON', TypeOid.jsonb],
  [UNCONSTRAINED_NUMERIC, TypeOid.numeric],
  ['VARCHAR', TypeOid.text],
]);

/**
 * The parameters' declared types, with those the client left unspecified
 * and the text casts at every use (`$1::int4`, `CAST($1 AS text)`) taking
 * the cast's type: PostgreSQL infers them so, and describes them so in
 * ParameterDescription, where DuckDB may lose a parameter's type under a
 * cast (`$1::int4 + $2::int8`) or type it only once the values are bound
 * (a table function's arguments).
 */
function castDeclarations(sql: string, declared: readonly number[], parsed: ParsedStatement | undefined): readonly number[] {
  const tokens = parsed?.tokens ?? tokenize(sql);
  const numbers = [...new Set(tokens.filter((t) => t.kind === 'param').map((t) => Number(t.text.slice(1))))];
  const cast = castInText(tokens);
  const open = numbers.filter((n) => (declared[n - 1] ?? 0) === 0 && cast.has(n));
  if (open.length === 0) return declared;
  const hints = paramContext(parsed ?? sql).hints;
  const out = [...declared];
  for (const n of open) {
    const hint = hints.get(n);
    if (hint?.kind !== 'type') continue;
    const array = hint.type.endsWith('[]');
    const base = oidForCast.get(array ? hint.type.slice(0, -2) : hint.type);
    const oid = base === undefined ? undefined : array ? ArrayOidOf.get(base) : base;
    if (oid === undefined) continue;
    while (out.length < n - 1) out.push(0);
    out[n - 1] = oid;
  }
  return out;
}

/**
 * The parameters the text casts wherever it uses them (`$n::type`, `CAST($n AS type)`), found in one
 * pass: a batch INSERT has a thousand parameters, and a scan of its tokens per parameter cost it 1 ms.
 */
function castInText(tokens: readonly Token[]): ReadonlySet<number> {
  const cast = new Set<number>();
  const bare = new Set<number>();
  tokens.forEach((t, i) => {
    if (t.kind !== 'param') return;
    const n = Number(t.text.slice(1));
    const isCast =
      tokens[i + 1]?.text === '::' || (tokens[i - 1]?.text === '(' && /^cast$/i.test(tokens[i - 2]?.text ?? '') && /^as$/i.test(tokens[i + 1]?.text ?? ''));
    (isCast ? cast : bare).add(n);
  });
  for (const n of bare) cast.delete(n);
  return cast;
}

/** Whether a statement of this kind returns a result set rather than a count. */
function returnsRows(kind: StatementKind, sql: string, p: DuckDBPreparedStatement): boolean {
  switch (kind) {
    case 'SELECT':
    case 'EXPLAIN':
    case 'PRAGMA':
    case 'RELATION':
      return true;
    case 'INSERT':
    case 'UPDATE':
    case 'DELETE':
    case 'MERGE_INTO':
      return tokenize(sql).some((t) => t.kind === 'word' && t.text.toUpperCase() === 'RETURNING');
    case 'CALL':
    case 'EXECUTE':
      return p.columnCount > 0 && !(p.columnCount === 1 && p.columnName(0) === 'Count');
    default:
      return false;
  }
}

class DuckDBStatement implements EngineStatement {
  readonly kind: StatementKind;
  readonly paramTypes: readonly number[];
  readonly columns: readonly ColumnInfo[] | null;
  /** The parameters' DuckDB types, null where DuckDB could not infer one. */
  readonly paramDuckTypes: readonly (DuckDBType | null)[];
  private readonly codecs: readonly PgCodec[];
  private readonly resultTypes: readonly (DuckDBType | null)[];
  /** renderCanonical's work per result column, decided at its first call. */
  private canonicalRenderers: ReadonlyArray<CanonicalRenderer | null> | null = null;

  constructor(
    private readonly session: DuckDBSession,
    private readonly prepared: DuckDBPreparedStatement,
    sql: string,
    declaredTypes: readonly number[],
    /** A probe that describes the result where the statement itself cannot (its parameters' types lost); destroyed here. */
    describedBy?: DuckDBPreparedStatement,
  ) {
    this.kind = statementKinds.get(prepared.statementType) ?? 'INVALID';
    const duckTypes: (DuckDBType | null)[] = [];
    const oids: number[] = [];
    for (let i = 1; i <= prepared.parameterCount; i++) {
      const type = prepared.parameterTypeId(i) === DuckDBTypeId.INVALID ? null : prepared.parameterType(i);
      duckTypes.push(type);
      const declared = declaredTypes[i - 1] ?? 0;
      oids.push(declared !== 0 ? declared : type === null ? TypeOid.text : codecFor(type).oid);
    }
    this.paramDuckTypes = duckTypes;
    this.paramTypes = oids;
    if (returnsRows(this.kind, sql, prepared)) {
      const codecs: PgCodec[] = [];
      const columns: ColumnInfo[] = [];
      const types: (DuckDBType | null)[] = [];
      const d = describedBy ?? prepared;
      for (let i = 0; i < d.columnCount; i++) {
        const type = d.columnTypeId(i) === DuckDBTypeId.INVALID ? null : d.columnType(i);
        const codec = type === null ? UNRESOLVED_CODEC : codecFor(type);
        types.push(type);
        codecs.push(codec);
        columns.push({ name: d.columnName(i), typeOid: codec.oid, typeSize: codec.size, typeModifier: codec.typmod });
      }
      this.codecs = codecs;
      this.columns = columns;
      this.resultTypes = types;
    } else {
      this.codecs = [];
      this.columns = null;
      this.resultTypes = [];
    }
    describedBy?.destroySync();
  }

  bind(params: readonly WireParam[]): void {
    bindParams(this.prepared, this.paramDuckTypes, params.slice(0, this.prepared.parameterCount));
  }

  renderCanonical(rows: ReadonlyArray<ReadonlyArray<string | null>>, settings: RenderSettings): Array<Array<string | null>> | null {
    this.canonicalRenderers ??= this.resultTypes.map((t) => (t === null ? null : canonicalRenderer(t)));
    const renderers = this.canonicalRenderers;
    if (renderers.length === 0 || renderers.includes(null)) return null;
    const ctx: RenderContext = { zone: zoneFor(settings.timeZone) };
    return rows.map((row) =>
      renderers.map((render, c) => {
        const text = row[c] ?? null;
        if (text === null || render === 'same') return text;
        return (this.codecs[c] as PgCodec).text((render as (t: string) => DuckDBValue)(text), ctx);
      }),
    );
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    await this.session.settleActive();
    // A statement without result rows, or a small result, is read in one call: streaming costs
    // a round trip to the engine's threads per chunk, plus one to find the end.
    const materialize = options?.materialize === true || this.columns === null;
    let result: DuckDBResult;
    try {
      result = materialize ? await this.prepared.run() : await this.prepared.stream();
    } catch (err) {
      throw fromDuckDBError(err);
    }
    const cursor = new DuckDBCursor(result, this.columns !== null, this.codecs, () => {
      if (this.session.active === cursor) this.session.active = null;
    });
    if (result instanceof DuckDBMaterializedResult) cursor.holdAll(result);
    else if (this.columns !== null) this.session.active = cursor;
    if (this.columns === null) await cursor.readCount();
    return cursor;
  }

  close(): void {
    this.prepared.destroySync();
  }
}

type DuckDBVector = ReturnType<DuckDBDataChunk['getColumnVector']>;

/** Writes one column's cell of a row into `out`: a string's bytes from the engine's copy, anything else through its codec. */
function cellWriter(
  vector: DuckDBVector,
  text: StringColumn | null,
  uuid: ((row: number) => string | null) | null,
  codec: PgCodec,
  binary: boolean,
  ctx: RenderContext,
  out: DataRowWriter,
): (row: number) => void {
  if (text !== null) return (r) => text.write(r, out);
  if (uuid !== null)
    return (r) => {
      const t = uuid(r);
      if (t === null) out.nullCell();
      else out.textCell(t);
    };
  if (binary)
    return (r) => {
      const v: DuckDBValue = vector.getItem(r);
      if (v === null) out.nullCell();
      else {
        const bytes = codec.binary(v, ctx);
        out.bytesCell(bytes, 0, bytes.length);
      }
    };
  return (r) => {
    const v: DuckDBValue = vector.getItem(r);
    if (v === null) out.nullCell();
    else out.textCell(codec.text(v, ctx));
  };
}

/** A codec that renders whatever the engine produced as text, for columns described as text. */
function asText(actual: PgCodec): PgCodec {
  return {
    ...UNRESOLVED_CODEC,
    text: actual.text,
    binary: (v, ctx) => Buffer.from(actual.text(v, ctx), 'utf8'),
  };
}

const zones = new Map<string, TimeZoneOffsets>();
function zoneFor(name: string): TimeZoneOffsets {
  let z = zones.get(name);
  if (z === undefined) {
    z = new TimeZoneOffsets(name);
    zones.set(name, z);
  }
  return z;
}

class DuckDBCursor implements EngineCursor {
  rowsChanged = 0;
  private chunk: DuckDBDataChunk | null = null;
  private chunkRow = 0;
  private exhausted = false;
  private buffered: DuckDBDataChunk[] | null = null;
  private readonly codecs: readonly PgCodec[];

  constructor(
    private readonly result: DuckDBResult,
    readonly returnsRows: boolean,
    described: readonly PgCodec[],
    private readonly onClose: () => void,
  ) {
    const codecs: PgCodec[] = [];
    for (let i = 0; i < described.length && i < result.columnCount; i++) {
      const actual = codecFor(result.columnType(i));
      const d = described[i] as PgCodec;
      codecs.push(actual.oid === d.oid ? actual : asText(actual));
    }
    this.codecs = codecs;
  }

  /** A materialized result: its chunks are read from memory, without calls to the engine. */
  holdAll(result: DuckDBMaterializedResult): void {
    this.buffered = Array.from({ length: result.chunkCount }, (_, i) => result.getChunk(i));
  }

  /** For statements that report a count: DuckDB returns it as a one-row "Count" result. */
  async readCount(): Promise<void> {
    this.rowsChanged = this.result.rowsChanged;
    if (this.result.returnType !== ResultReturnType.QUERY_RESULT && this.result.columnCount === 1) {
      const chunk = await this.nextChunk();
      const v = chunk?.rowCount ? chunk.getColumnVector(0).getItem(0) : null;
      if (typeof v === 'bigint' || typeof v === 'number') this.rowsChanged = Number(v);
    }
    this.exhausted = true;
  }

  private async nextChunk(): Promise<DuckDBDataChunk | null> {
    if (this.buffered !== null) return this.buffered.shift() ?? null;
    try {
      const chunk = await this.result.fetchChunk();
      return chunk === null || chunk.rowCount === 0 ? null : chunk;
    } catch (err) {
      throw fromDuckDBError(err);
    }
  }

  async fetch(maxRows: number, formats: readonly (0 | 1)[], sink: RowSink, settings: RenderSettings): Promise<{ rows: number; done: boolean }> {
    const ctx: RenderContext = { zone: zoneFor(settings.timeZone) };
    const ncols = this.codecs.length;
    const binary = this.codecs.map((_, i) => formats[i] === 1);
    let sent = 0;
    while (!this.exhausted && (maxRows === 0 || sent < maxRows)) {
      if (this.chunk === null || this.chunkRow >= this.chunk.rowCount) {
        this.chunk = await this.nextChunk();
        this.chunkRow = 0;
        if (this.chunk === null) {
          this.exhausted = true;
          break;
        }
      }
      const chunk = this.chunk;
      const vectors = Array.from({ length: ncols }, (_, c) => chunk.getColumnVector(c));
      // Text and JSON columns, in either format: their bytes go to the DataRow as DuckDB holds them; UUIDs in text, read from their bytes.
      const strings = vectors.map((v, c) => (isVerbatimText(this.codecs[c] as PgCodec) ? stringColumn(v, chunk.rowCount) : null));
      const uuids = vectors.map((v, c) => (strings[c] === null && !binary[c] ? uuidColumn(v, chunk.rowCount) : null));
      const end = maxRows === 0 ? chunk.rowCount : Math.min(chunk.rowCount, this.chunkRow + (maxRows - sent));
      const out = sink.dataRows;
      if (out !== undefined) {
        const cells = vectors.map((vector, c) =>
          cellWriter(vector, strings[c] ?? null, uuids[c] ?? null, this.codecs[c] as PgCodec, binary[c] === true, ctx, out),
        );
        try {
          for (let r = this.chunkRow; r < end; r++) {
            out.beginDataRow(ncols);
            for (let c = 0; c < ncols; c++) (cells[c] as (row: number) => void)(r);
            out.endDataRow();
          }
        } catch (err) {
          // A value its codec refuses: the rows before it stand, the half-written one must not reach the client.
          out.abandonDataRow();
          throw err;
        }
      } else {
        for (let r = this.chunkRow; r < end; r++) {
          const cells: (string | Uint8Array | null)[] = new Array(ncols);
          for (let c = 0; c < ncols; c++) {
            const text = strings[c];
            if (text !== null && text !== undefined) {
              cells[c] = text.bytes(r);
              continue;
            }
            const uuid = uuids[c];
            if (uuid !== null && uuid !== undefined) {
              cells[c] = uuid(r);
              continue;
            }
            const v: DuckDBValue = (vectors[c] as DuckDBVector).getItem(r);
            if (v === null) cells[c] = null;
            else {
              const codec = this.codecs[c] as PgCodec;
              cells[c] = binary[c] ? codec.binary(v, ctx) : codec.text(v, ctx);
            }
          }
          sink.row(cells);
        }
      }
      sent += end - this.chunkRow;
      this.chunkRow = end;
      await sink.flushIfFull();
    }
    if (this.exhausted) this.onClose();
    return { rows: sent, done: this.exhausted };
  }

  /** Pulls the remaining chunks into memory, so the connection can run another statement. */
  async materialize(): Promise<void> {
    if (this.exhausted || this.buffered !== null) return;
    const rest: DuckDBDataChunk[] = [];
    for (;;) {
      const chunk = await this.nextChunk();
      if (chunk === null) break;
      rest.push(chunk);
    }
    this.buffered = rest;
  }

  close(): void {
    this.exhausted = true;
    this.chunk = null;
    this.buffered = null;
    this.onClose();
  }
}

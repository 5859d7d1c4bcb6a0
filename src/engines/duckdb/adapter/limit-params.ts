import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { TypeOid } from '../../../protocol/type-oids.js';
import { replaceParams, tokenize } from '../../../sql/lexer.js';
import type { EngineCursor, EngineStatement, WireParam } from '../../../engine/port.js';

/**
 * `LIMIT $1` inside a correlated subquery, which DuckDB cannot prepare
 * ("Non-constant limit not supported in correlated subquery") and ORMs
 * write for every relation they load (Drizzle's relational queries put one
 * in a lateral join). Such a statement is described from a probe with those
 * parameters as constants, and at each execution it is prepared with the
 * values bound to them written in as integer literals (one prepared
 * statement per distinct set of values); the other parameters keep their
 * order. Only the text of LIMIT and OFFSET values changes, which decides
 * how many rows a query reads, never what a statement writes.
 */

/** The statement's LIMIT and OFFSET parameters, and its text with the given literals for them and the rest renumbered. */
export interface LimitParams {
  /** Numbers of the parameters that are LIMIT or OFFSET values. */
  readonly limits: readonly number[];
  /** The other parameters' numbers, in order: they are $1, $2 ... of the text. */
  readonly rest: readonly number[];
  text(literals: ReadonlyMap<number, string>): string;
}

export function limitParams(sql: string): LimitParams | null {
  const tokens = tokenize(sql);
  const limits = new Set<number>();
  tokens.forEach((t, i) => {
    const next = tokens[i + 1];
    if (t.kind === 'word' && /^(limit|offset)$/i.test(t.text) && next?.kind === 'param') limits.add(Number(next.text.slice(1)));
  });
  if (limits.size === 0) return null;
  const all = new Set(tokens.filter((t) => t.kind === 'param').map((t) => Number(t.text.slice(1))));
  const rest = [...all].filter((n) => !limits.has(n)).sort((a, b) => a - b);
  const renumbered = new Map(rest.map((n, i) => [n, i + 1]));
  return {
    limits: [...limits],
    rest,
    text(literals) {
      return replaceParams(sql, (n) => literals.get(n) ?? `$${renumbered.get(n) ?? n}`, tokens) ?? sql;
    },
  };
}

/** A LIMIT or OFFSET parameter's value as an integer literal (NULL: no limit, as in PostgreSQL). */
function integerLiteral(p: WireParam | undefined, n: number): string {
  if (p === undefined || p.value === null) return 'NULL';
  if (p.format === 1) {
    const v = p.value;
    if (p.typeOid === TypeOid.int8 && v.length === 8) return v.readBigInt64BE(0).toString();
    if (p.typeOid === TypeOid.int4 && v.length === 4) return String(v.readInt32BE(0));
    if (p.typeOid === TypeOid.int2 && v.length === 2) return String(v.readInt16BE(0));
  } else {
    const text = p.value.toString('utf8').trim();
    if (/^[+-]?\d+$/.test(text)) return BigInt(text).toString();
  }
  throw new PgError(SqlState.InvalidTextRepresentation, `invalid input syntax for type bigint: parameter $${n} of LIMIT or OFFSET`);
}

export class LimitBoundStatement implements EngineStatement {
  readonly kind: EngineStatement['kind'];
  readonly paramTypes: readonly number[];
  readonly columns: EngineStatement['columns'];
  private params: readonly WireParam[] = [];
  private readonly prepared = new Map<string, EngineStatement>();

  constructor(
    private readonly probe: EngineStatement,
    private readonly shape: LimitParams,
    /** Prepares the statement with its LIMIT values written in. */
    private readonly prepare: (sql: string) => Promise<EngineStatement>,
  ) {
    this.kind = probe.kind;
    this.columns = probe.columns;
    const count = Math.max(0, ...shape.limits, ...shape.rest);
    this.paramTypes = Array.from({ length: count }, (_, i) => {
      const n = i + 1;
      const at = shape.rest.indexOf(n);
      return at >= 0 ? (probe.paramTypes[at] ?? TypeOid.text) : TypeOid.int8;
    });
  }

  bind(params: readonly WireParam[]): void {
    this.params = params;
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    const literals = new Map(this.shape.limits.map((n) => [n, integerLiteral(this.params[n - 1], n)]));
    const key = this.shape.limits.map((n) => literals.get(n)).join(',');
    let statement = this.prepared.get(key);
    if (statement === undefined) {
      statement = await this.prepare(this.shape.text(literals));
      if (this.prepared.size >= 16) {
        for (const s of this.prepared.values()) s.close();
        this.prepared.clear();
      }
      this.prepared.set(key, statement);
    }
    statement.bind(this.shape.rest.map((n) => this.params[n - 1] ?? { value: null, format: 0, typeOid: TypeOid.text }));
    return statement.execute(options);
  }

  close(): void {
    this.probe.close();
    for (const s of this.prepared.values()) s.close();
    this.prepared.clear();
  }
}

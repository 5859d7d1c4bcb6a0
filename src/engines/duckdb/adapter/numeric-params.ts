import { DuckDBTypeId, type DuckDBDecimalType, type DuckDBType } from '@duckdb/node-api';
import type { EngineCursor, EngineStatement, WireParam } from '../../../engine/port.js';
import * as bin from '../../../engine/pg-binary.js';
import { TypeOid } from '../../../protocol/type-oids.js';
import { type Token, tokenize } from '../../../sql/lexer.js';
import { isUnconstrainedDecimal, numericDigits, UNCONSTRAINED_NUMERIC } from '../../../sql/numeric.js';

/**
 * A query whose parameters are numeric without precision. PostgreSQL gives
 * each numeric value its own display scale, so `amount * $1` with '1' is
 * 241.00 and with '1.0' is 241.000; a DuckDB parameter has one DECIMAL type,
 * fixed when the statement is prepared. Such a query is prepared again at
 * each execution with each of those parameters cast to DECIMAL(38, its
 * value's scale) (one prepared statement per distinct set of scales, sixteen
 * at most), and described as the first preparation describes it; where
 * DuckDB cannot prepare that, the first preparation serves. Only queries:
 * what a statement writes does not depend on a value's scale.
 */
export class ScaleBoundStatement implements EngineStatement {
  readonly kind: EngineStatement['kind'];
  readonly paramTypes: readonly number[];
  readonly columns: EngineStatement['columns'];
  private params: readonly WireParam[] = [];
  private readonly prepared = new Map<string, EngineStatement>();
  private readonly tokens: readonly Token[];

  constructor(
    private readonly base: EngineStatement,
    private readonly sql: string,
    /** Numbers of the parameters typed numeric without precision. */
    private readonly numeric: readonly number[],
    private readonly prepare: (sql: string) => Promise<EngineStatement>,
  ) {
    this.kind = base.kind;
    this.paramTypes = base.paramTypes;
    this.columns = base.columns;
    this.tokens = tokenize(sql);
  }

  /** The parameters of numeric without precision among a statement's DuckDB parameter types (1-based). */
  static numericParams(types: readonly (DuckDBType | null)[]): number[] {
    const out: number[] = [];
    types.forEach((t, i) => {
      if (t?.typeId === DuckDBTypeId.DECIMAL && isUnconstrainedDecimal((t as DuckDBDecimalType).width, (t as DuckDBDecimalType).scale)) out.push(i + 1);
    });
    return out;
  }

  bind(params: readonly WireParam[]): void {
    this.params = params;
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    const types = new Map<number, string>();
    for (const n of this.numeric) {
      const type = valueType(this.params[n - 1]);
      if (type !== null) types.set(n, type);
    }
    if (types.size === 0) {
      this.base.bind(this.params);
      return this.base.execute(options);
    }
    const key = this.numeric.map((n) => types.get(n) ?? '').join(';');
    let statement = this.prepared.get(key);
    if (statement === undefined) {
      // DuckDB cannot always type a parameter under a cast beside another DECIMAL ("Failed to get param
      // logical type"): then the first preparation serves, with the value's digits and the padded scale.
      statement = (await this.prepare(this.typedText(types)).catch(() => null)) ?? this.base;
      if (this.prepared.size >= 16) {
        for (const s of this.prepared.values()) if (s !== this.base) s.close();
        this.prepared.clear();
      }
      this.prepared.set(key, statement);
    }
    statement.bind(this.params);
    return statement.execute(options);
  }

  /**
   * The text with each such parameter cast to its value's DECIMAL; a cast to
   * numeric written after it (`$1::numeric`, DECIMAL(38,9) once rewritten)
   * goes, as it would give the value that one type again.
   */
  private typedText(types: ReadonlyMap<number, string>): string {
    const t = this.tokens;
    let out = '';
    let last = 0;
    for (let j = 0; j < t.length; j++) {
      const token = t[j] as Token;
      const type = token.kind === 'param' ? types.get(Number(token.text.slice(1))) : undefined;
      if (type === undefined) continue;
      out += `${this.sql.slice(last, token.start)}CAST(${token.text} AS ${type})`;
      last = token.end;
      const cast = t.slice(j + 1, j + 8).map((x) => x.text.toUpperCase());
      if (cast.join('') === `::${UNCONSTRAINED_NUMERIC}`) {
        last = (t[j + 7] as Token).end;
        j += 7;
      }
    }
    return out + this.sql.slice(last);
  }

  close(): void {
    this.base.close();
    for (const s of this.prepared.values()) if (s !== this.base) s.close();
    this.prepared.clear();
  }
}

/**
 * DECIMAL(38, the scale of a numeric parameter's value); null for NULL, and for what is not a finite
 * number (the cast refuses it). Of width 38: DuckDB loses a parameter's type under a narrower cast.
 */
function valueType(p: WireParam | undefined): string | null {
  if (p === undefined || p.value === null) return null;
  const text = p.format === 1 ? (p.typeOid === TypeOid.numeric ? bin.readNumeric(p.value) : null) : p.value.toString('utf8');
  const digits = text === null ? null : numericDigits(text);
  return digits === null ? null : `DECIMAL(38,${Math.min(digits.scale, 38)})`;
}

import type { Token } from '../../../sql/lexer.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { quoteLiteral } from '../../../sql/identifiers.js';

/**
 * `serial` and `GENERATED ... AS IDENTITY` columns, which DuckDB has neither
 * of, as PostgreSQL builds them: a sequence named <table>_<column>_seq and a
 * NOT NULL column whose default draws from it. DuckDB binds a default's
 * sequence when the CREATE TABLE is prepared, so the translation is two
 * texts: `probe`, the table without the defaults, which is prepared and
 * checked at Parse, and `create`, which runs after the sequences exist.
 */

type Node = Record<string, unknown>;

export interface OwnedSequence {
  /** The sequence's name as SQL, schema-qualified when the table is. */
  readonly name: string;
  readonly column: string;
  readonly start: number | null;
  readonly increment: number | null;
}

export interface SerialTable {
  readonly schema: string | null;
  readonly table: string;
  readonly temporary: boolean;
  readonly ifNotExists: boolean;
  readonly probe: string;
  readonly create: string;
  readonly sequences: readonly OwnedSequence[];
}

/** The serial pseudo-types and the integer type each column really has. */
const SERIAL_TYPES: Readonly<Record<string, string>> = {
  smallserial: 'SMALLINT',
  serial2: 'SMALLINT',
  serial: 'INTEGER',
  serial4: 'INTEGER',
  bigserial: 'BIGINT',
  serial8: 'BIGINT',
};

/** A cheap look at the tokens: most CREATE TABLE statements have neither. */
export function mayHaveSerial(tokens: readonly Token[]): boolean {
  if (tokens[0]?.text.toLowerCase() !== 'create') return false;
  return tokens.some((t) => t.kind === 'word' && (t.text.toLowerCase() in SERIAL_TYPES || t.text.toLowerCase() === 'identity'));
}

/** An identifier as PostgreSQL prints it: quoted only when it must be. */
const quoteIdent = (s: string): string => (/^[a-z_][a-z0-9_$]*$/.test(s) ? s : `"${s.replaceAll('"', '""')}"`);

interface Edit {
  readonly start: number;
  readonly end: number;
  readonly probe: string;
  readonly create: string;
}

/** The translation of a CREATE TABLE with serial or identity columns; null for any other statement. */
export function translateSerial(statement: ParsedStatement): SerialTable | null {
  const { text, tokens } = statement;
  if (!mayHaveSerial(tokens)) return null;
  const stmt = statement.tree?.CreateStmt as Node | undefined;
  const relation = stmt?.relation as Node | undefined;
  if (stmt === undefined || relation === undefined || typeof relation.relname !== 'string') return null;
  const schema = typeof relation.schemaname === 'string' ? relation.schemaname : null;
  const table = relation.relname;
  // libpg-query's locations count bytes; the tokens count UTF-16 units.
  const bytes = Buffer.from(text, 'utf8');
  const charAt = (location: unknown): number | null =>
    typeof location === 'number' && location >= 0 ? bytes.subarray(0, location).toString('utf8').length : null;
  const tokenAt = (location: unknown): number => {
    const at = charAt(location);
    return at === null ? -1 : tokens.findIndex((t) => t.start === at);
  };
  const edits: Edit[] = [];
  const sequences: OwnedSequence[] = [];
  for (const element of (stmt.tableElts as Node[] | undefined) ?? []) {
    const column = element.ColumnDef as Node | undefined;
    if (column === undefined || typeof column.colname !== 'string') continue;
    const sequence = `${schema === null ? '' : `${quoteIdent(schema)}.`}${quoteIdent(`${table}_${column.colname}_seq`.slice(0, 63))}`;
    const names = ((column.typeName as Node | undefined)?.names as Array<{ String?: { sval?: string } }> | undefined) ?? [];
    const serial = names.length === 1 ? SERIAL_TYPES[names[0]?.String?.sval ?? ''] : undefined;
    const draw = `NOT NULL DEFAULT nextval(${quoteLiteral(sequence)})`;
    if (serial !== undefined) {
      const i = tokenAt((column.typeName as Node).location);
      const t = tokens[i];
      if (t === undefined) return null;
      edits.push({ start: t.start, end: t.end, probe: serial, create: `${serial} ${draw}` });
      sequences.push({ name: sequence, column: column.colname, start: null, increment: null });
      continue;
    }
    for (const c of (column.constraints as Node[] | undefined) ?? []) {
      const constraint = c.Constraint as Node | undefined;
      if (constraint?.contype !== 'CONSTR_IDENTITY') continue;
      const i = tokenAt(constraint.location);
      let j = tokens.findIndex((t, k) => k > i && t.text.toLowerCase() === 'identity');
      if (i < 0 || j < 0) return null;
      if (tokens[j + 1]?.text === '(') {
        let depth = 0;
        for (j = j + 1; j < tokens.length; j++) {
          if (tokens[j]?.text === '(') depth++;
          else if (tokens[j]?.text === ')' && --depth === 0) break;
        }
      }
      const first = tokens[i];
      const last = tokens[j];
      if (first === undefined || last === undefined) return null;
      edits.push({ start: first.start, end: last.end, probe: 'NOT NULL', create: draw });
      const option = (name: string): number | null => {
        for (const o of (constraint.options as Node[] | undefined) ?? []) {
          const def = o.DefElem as Node | undefined;
          if (def?.defname !== name) continue;
          const arg = def.arg as Node | undefined;
          const v = (arg?.Integer as { ival?: number } | undefined)?.ival ?? Number((arg?.Float as { fval?: string } | undefined)?.fval);
          return Number.isFinite(v) ? v : arg?.Integer !== undefined ? 0 : null;
        }
        return null;
      };
      sequences.push({ name: sequence, column: column.colname, start: option('start'), increment: option('increment') });
    }
  }
  if (sequences.length === 0) return null;
  const apply = (pick: (e: Edit) => string): string => {
    let out = '';
    let at = 0;
    for (const e of [...edits].sort((a, b) => a.start - b.start)) {
      out += text.slice(at, e.start) + pick(e);
      at = e.end;
    }
    return out + text.slice(at);
  };
  return {
    schema,
    table,
    temporary: relation.relpersistence === 't',
    ifNotExists: stmt.if_not_exists === true,
    probe: apply((e) => e.probe),
    create: apply((e) => e.create),
    sequences,
  };
}

/** The statements that create a table's owned sequences, before its CREATE TABLE. */
export function createSequences(t: SerialTable): string[] {
  return t.sequences.map(
    (s) =>
      `CREATE ${t.temporary ? 'TEMPORARY ' : ''}SEQUENCE ${s.name}${s.start === null ? '' : ` START WITH ${s.start}`}${s.increment === null ? '' : ` INCREMENT BY ${s.increment}`}`,
  );
}

/** What marks a sequence as a column's own (PostgreSQL's OWNED BY), in its comment: it is dropped with its table. */
export const OWNED_BY = 'owned by ';

export function ownershipComments(t: SerialTable): string[] {
  const owner = `${t.schema === null ? '' : `${t.schema}.`}${t.table}`;
  return t.temporary ? [] : t.sequences.map((s) => `COMMENT ON SEQUENCE ${s.name} IS ${quoteLiteral(`${OWNED_BY}${owner}.${s.column}`)}`);
}

/**
 * After a DROP: the owned sequences whose table is gone, which PostgreSQL
 * would have dropped with it (so that the table can be created again).
 */
export const ORPHANED_SEQUENCES = `SELECT s.database_name, s.schema_name, s.sequence_name FROM duckdb_sequences() s
  WHERE s.comment LIKE '${OWNED_BY}%' AND NOT EXISTS (
    SELECT 1 FROM duckdb_columns() c
    WHERE c.database_name = s.database_name AND strpos(c.column_default, 'nextval(') = 1 AND strpos(c.column_default, s.sequence_name) > 0)`;

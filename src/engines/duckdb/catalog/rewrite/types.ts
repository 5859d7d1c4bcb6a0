import { strings } from '../../../../sql/pg-tree.js';
import { UNCONSTRAINED_NUMERIC } from '../../../../sql/numeric.js';
import type { Node, Walker } from './walker.js';

/** Type names, as they appear in casts and column definitions. */

/** Names of reg* types: a cast to one becomes a catalog lookup. */
export const REG_TYPES = new Set(['regclass', 'regtype', 'regproc', 'regprocedure', 'regnamespace', 'regrole']);

/** Time types whose fractional-second precision DuckDB does not take. */
const PRECISION_TYPES = new Set(['timestamp', 'timestamptz', 'time', 'timetz', 'interval']);

/** PostgreSQL type names DuckDB does not know, and the DuckDB type that holds their values. */
export const TYPE_NAMES: Readonly<Record<string, string>> = {
  jsonb: 'JSON',
  name: 'VARCHAR',
  char: 'VARCHAR',
  oid: 'UINTEGER',
  int2vector: 'SMALLINT[]',
  oidvector: 'UINTEGER[]',
  pg_node_tree: 'VARCHAR',
  xid: 'UINTEGER',
  cid: 'UINTEGER',
  regoper: 'UINTEGER',
  regoperator: 'UINTEGER',
  regconfig: 'UINTEGER',
  regdictionary: 'UINTEGER',
  aclitem: 'VARCHAR',
};

/**
 * A type name as DuckDB spells it: PostgreSQL's names DuckDB does not know
 * (TYPE_NAMES), `pg_catalog.` before a type, unconstrained numeric, and a
 * fractional-second precision DuckDB does not take.
 */
export function typeName(w: Walker, node: Node): void {
  const names = strings(node.names);
  const type = names[names.length - 1];
  const i = w.index(node.location);
  if (type === undefined || i === null || REG_TYPES.has(type)) return;
  const name = w.dotted(i);
  if (name === null) return;
  if (PRECISION_TYPES.has(type) && names[0] === 'pg_catalog' && node.typmods !== undefined && w.tokens[i + 1]?.text === '(') {
    // timestamp(3) with time zone: DuckDB keeps microseconds and takes no precision (docs/compatibility.md).
    const close = w.closing(i + 1);
    if (close !== null) w.replaceTokens(i + 1, close + 1, '');
    return;
  }
  if (type === 'numeric' && (names.length === 1 || names[0] === 'pg_catalog') && node.typmods === undefined) {
    // numeric, decimal, dec: the spellings of one type, which DuckDB would make DECIMAL(18,3).
    const spelled = name.parts[name.parts.length - 1] ?? '';
    if (['numeric', 'decimal', 'dec'].includes(spelled) && name.parts.length <= 2) w.replaceTokens(i, name.next, UNCONSTRAINED_NUMERIC);
    return;
  }
  // SQL-standard spellings (integer, double precision) parse to pg_catalog names that are not in the text.
  if (name.parts.join('.') !== names.join('.')) return;
  const mapped = TYPE_NAMES[type];
  if (mapped !== undefined && (names.length === 1 || names[0] === 'pg_catalog')) {
    w.replaceTokens(i, name.next, mapped);
  } else if (names.length === 2 && names[0] === 'pg_catalog') {
    w.replaceTokens(i, name.next, type);
  }
}

/**
 * `pg_typeof('abc')`: a quoted literal with no type around it is of type
 * unknown in PostgreSQL; DuckDB's is VARCHAR. It is given as NULL, whose
 * type the catalog's pg_typeof names unknown too.
 */
export function untypedLiteralType(w: Walker, node: Node): void {
  const fn = strings(node.funcname);
  const args = node.args as Node[] | undefined;
  const constant = args?.length === 1 ? (args[0]?.A_Const as Node | undefined) : undefined;
  if (fn.at(-1) !== 'pg_typeof' || (fn.length === 2 && fn[0] !== 'pg_catalog') || constant?.sval === undefined) return;
  const at = w.index(constant.location);
  if (at !== null && w.tokens[at]?.kind === 'string') w.replaceTokens(at, at + 1, 'NULL');
}

import type { Token } from '../../../../sql/lexer.js';
import { quoteIdentifier } from '../../../../sql/identifiers.js';
import { strings } from '../../../../sql/pg-tree.js';
import { lengthCheck } from '../alter-table.js';
import { type Node, type Walker, wordOf } from './walker.js';

/**
 * DDL that DuckDB takes in another form: varchar(n)'s length, index
 * methods, foreign-key actions, and UNIQUE constraints added to a table.
 */

/** Index methods DuckDB's ordered index (ART) stands for. */
const ORDERED_INDEX_METHODS = new Set(['btree', 'hash']);

/**
 * `varchar(n)` in CREATE TABLE: DuckDB keeps no length, so the column gets
 * CHECK (length(col) <= n), whose violation reads as PostgreSQL's 22001
 * (engines/duckdb/adapter/errors.ts) and which the catalog does not list (the
 * column shows as varchar(n), engines/duckdb/catalog/declared.ts). Not for ledgers, whose
 * rows the writer appends, nor for ALTER TABLE ADD COLUMN, which DuckDB
 * does not take with a constraint.
 */
export function varcharLengths(w: Walker, create: Node): void {
  const relname = (create.relation as Node | undefined)?.relname;
  if (typeof relname !== 'string' || /^_cot/i.test(relname)) return;
  for (const e of (create.tableElts as Node[] | undefined) ?? []) {
    const def = e.ColumnDef as Node | undefined;
    const typeName = def?.typeName as Node | undefined;
    const names = strings(typeName?.names);
    const n = (((typeName?.typmods as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.ival as { ival?: number } | undefined)?.ival;
    const type = names[names.length - 1];
    if (typeof def?.colname !== 'string' || (type !== 'varchar' && type !== 'bpchar') || n === undefined || Array.isArray(typeName?.arrayBounds)) continue;
    let j = w.index(typeName?.location);
    if (j === null) continue;
    while (['character', 'char', 'varying', 'varchar', 'national', 'pg_catalog', '.'].includes(wordOf(w.tokens[j]) ?? w.tokens[j]?.text ?? '')) j++;
    const close = w.tokens[j]?.text === '(' ? w.closing(j) : null;
    if (close === null) continue;
    w.insertAfter(close, ` ${lengthCheck(def.colname, n, type === 'bpchar')}`);
  }
}

/** `CREATE INDEX ... USING btree`: DuckDB's one index (ART) is ordered, as btree is; it takes no method name. */
export function indexMethod(w: Walker, node: Node): void {
  const method = typeof node.accessMethod === 'string' ? node.accessMethod.toLowerCase() : null;
  if (method === null || !ORDERED_INDEX_METHODS.has(method)) return;
  const from = w.index((node.relation as Node | undefined)?.location) ?? 0;
  for (let i = from; i < w.tokens.length - 1; i++) {
    if (wordOf(w.tokens[i]) === 'using' && wordOf(w.tokens[i + 1]) === method) {
      w.replaceTokens(i, i + 2, '');
      return;
    }
  }
}

/**
 * A foreign key's ON DELETE / ON UPDATE action and MATCH, which DuckDB does
 * not take, on a table whose keys DuckDB keeps (a temporary table, a
 * ledger): the key restricts.
 */
function foreignKeyActions(w: Walker, node: Node): void {
  if (node.contype !== 'CONSTR_FOREIGN') return;
  const start = w.index(node.location);
  if (start === null) return;
  let depth = 0;
  for (let i = start; i < w.tokens.length; i++) {
    const t = w.tokens[i] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')') {
      if (depth === 0) return;
      depth--;
    } else if (depth === 0 && (t.text === ',' || t.kind === 'semicolon')) return;
    else if (depth === 0 && wordOf(t) === 'on' && ['delete', 'update'].includes(wordOf(w.tokens[i + 1]) ?? '')) {
      const action = wordOf(w.tokens[i + 2]);
      let end = i + 3;
      if (action === 'no' || action === 'set') end = i + 4;
      else if (action !== 'cascade' && action !== 'restrict') return;
      if (w.tokens[end]?.text === '(') end = (w.closing(end) ?? end) + 1;
      w.replaceTokens(i, end, '');
      i = end - 1;
    } else if (depth === 0 && wordOf(t) === 'match' && ['simple', 'full'].includes(wordOf(w.tokens[i + 1]) ?? '')) {
      w.replaceTokens(i, i + 2, '');
    }
  }
}

/**
 * `ALTER TABLE t ADD [CONSTRAINT name] UNIQUE (a, b)` → `CREATE UNIQUE INDEX
 * name ON t (a, b)`: DuckDB adds no constraint to an existing table, and a
 * unique index enforces the same rule (Knex's .unique(), TypeORM's UQ_).
 */
export function addUniqueConstraint(w: Walker, node: Node): void {
  const cmds = node.cmds as Node[] | undefined;
  const cmd = cmds?.length === 1 ? (cmds[0]?.AlterTableCmd as Node | undefined) : undefined;
  const constraint = (cmd?.def as Node | undefined)?.Constraint as Node | undefined;
  const relation = node.relation as Node | undefined;
  if (cmd?.subtype !== 'AT_AddConstraint' || constraint?.contype !== 'CONSTR_UNIQUE' || typeof relation?.relname !== 'string') return;
  const keys = strings(constraint.keys);
  const i = w.index(relation.location);
  const name = i === null ? null : w.dotted(i);
  if (keys.length === 0 || i === null || name === null || constraint.options !== undefined || constraint.indexname !== undefined) return;
  const table = w.text.slice((w.tokens[i] as Token).start, (w.tokens[name.next - 1] as Token).end);
  const index = typeof constraint.conname === 'string' ? constraint.conname : `${relation.relname}_${keys.join('_')}_key`;
  w.replaceTokens(0, w.tokens.length, `CREATE UNIQUE INDEX ${quoteIdentifier(index)} ON ${table} (${keys.map(quoteIdentifier).join(', ')})`);
}

/** A table whose foreign keys the server keeps (catalog/foreign-keys.ts): permanent, and not a ledger. */
const keptKeys = (relation: Node | undefined): boolean =>
  relation?.relpersistence !== 't' && typeof relation?.relname === 'string' && !/^_cot/i.test(relation.relname);

/**
 * Removes a FOREIGN KEY or REFERENCES constraint from the statement: the
 * server keeps it (engines/duckdb/handler/foreign-keys.ts). `next`: where
 * the column's next constraint starts, for a column constraint.
 */
function removeKey(w: Walker, c: Node, column: boolean, next: number | null): void {
  const start = w.index(c.location);
  if (start === null) return;
  let end = start;
  let depth = 0;
  for (; end < w.tokens.length; end++) {
    const t = w.tokens[end] as Token;
    if (next !== null && end >= next) break;
    if (t.text === '(') depth++;
    else if (t.text === ')') {
      if (depth === 0) break;
      depth--;
    } else if (depth === 0 && (t.text === ',' || t.kind === 'semicolon')) break;
  }
  if (column) {
    w.replaceTokens(start, end, '');
    return;
  }
  // A table constraint goes with the comma that separates it from its neighbour.
  if (w.tokens[start - 1]?.text === ',') w.replaceTokens(start - 1, end, '');
  else if (w.tokens[end]?.text === ',') w.replaceTokens(start, end + 1, '');
  else w.replaceTokens(start, end, '');
}

/** The column's constraints: each FOREIGN KEY one removed (`keep`: false) or its actions taken out. */
function columnKeys(w: Walker, def: Node | undefined, keep: boolean): void {
  const constraints = ((def?.constraints as Node[] | undefined) ?? []).map((k) => k.Constraint as Node);
  constraints.forEach((c, i) => {
    if (c.contype !== 'CONSTR_FOREIGN') return;
    const following = constraints[i + 1];
    if (keep) foreignKeyActions(w, c);
    else removeKey(w, c, true, following === undefined ? null : w.index(following.location));
  });
}

/** CREATE TABLE's foreign keys: the server keeps a permanent table's; DuckDB a temporary table's or a ledger's, without actions. */
export function createTableKeys(w: Walker, create: Node): void {
  const keep = !keptKeys(create.relation as Node | undefined);
  for (const e of (create.tableElts as Node[] | undefined) ?? []) {
    columnKeys(w, e.ColumnDef as Node | undefined, keep);
    const c = e.Constraint as Node | undefined;
    if (c?.contype !== 'CONSTR_FOREIGN') continue;
    if (keep) foreignKeyActions(w, c);
    else removeKey(w, c, false, null);
  }
}

/** ALTER TABLE ... ADD COLUMN ... REFERENCES, and ADD FOREIGN KEY on a table whose keys DuckDB keeps. */
export function alterTableKeys(w: Walker, alter: Node): void {
  const keep = !keptKeys(alter.relation as Node | undefined);
  for (const x of (alter.cmds as Node[] | undefined) ?? []) {
    const cmd = x.AlterTableCmd as Node | undefined;
    const def = cmd?.def as Node | undefined;
    if (cmd?.subtype === 'AT_AddColumn') columnKeys(w, def?.ColumnDef as Node | undefined, keep);
    const c = def?.Constraint as Node | undefined;
    if (cmd?.subtype === 'AT_AddConstraint' && c?.contype === 'CONSTR_FOREIGN' && keep) foreignKeyActions(w, c);
  }
}

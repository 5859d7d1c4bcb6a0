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
 * A foreign key's ON DELETE / ON UPDATE action (Sequelize writes ON DELETE
 * CASCADE ON UPDATE CASCADE by default), which DuckDB does not take: the
 * key is kept as NO ACTION, so a delete that would cascade is refused
 * (23503) rather than done (docs/compatibility.md).
 */
export function foreignKeyActions(w: Walker, node: Node): void {
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

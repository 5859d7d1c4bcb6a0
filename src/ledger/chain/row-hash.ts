import { rowHash, rowHashV2 } from './canonical.js';
import { rowHashV3, SaltKeys } from './commitments.js';
import { HASH_VERSION, HASH_VERSION_V2, isCommitted, SALT_COLUMN, type HashVersion } from './schema.js';

/**
 * A row's hash under its ledger's version, from its columns' names and
 * canonical texts in table order. `digests` stand for redacted values: v2's
 * value digests, v3's commitments. Null for a v3 row whose salt column
 * gives no key for a committed column that has no recorded commitment:
 * such a row cannot verify.
 */
export function rowHashFor(
  version: HashVersion,
  table: string,
  columns: readonly string[],
  texts: readonly (string | null)[],
  digests?: ReadonlyArray<Buffer | null | undefined>,
): string | null {
  if (version === HASH_VERSION) return rowHash(table, columns, texts);
  if (version === HASH_VERSION_V2) return rowHashV2(table, columns, texts, digests);
  const keys = SaltKeys.parse(texts[columns.indexOf(SALT_COLUMN)] ?? null);
  return rowHashV3(table, columns, texts, committedOf(columns), keys, digests);
}

const committedLists = new WeakMap<readonly string[], readonly boolean[]>();

/** Which of a column list enter a v3 pre-image as commitments; computed once per list. */
export function committedOf(columns: readonly string[]): readonly boolean[] {
  let committed = committedLists.get(columns);
  if (committed === undefined) {
    committed = columns.map(isCommitted);
    committedLists.set(columns, committed);
  }
  return committed;
}

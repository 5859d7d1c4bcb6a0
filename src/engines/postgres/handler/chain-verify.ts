import type { BindValue, RelayBackend } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { chainVerdict, checkChain, storedLinks, CHAIN_START } from '../../../ledger/chain/chain-check.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import { verifyMacroName } from '../../../ledger/chain/verdict-sql.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import { scalarCell } from '../../../protocol/scalar-cells.js';
import { TypeOid } from '../../../protocol/type-oids.js';
import type { ResultSink } from '../../../session/handler-port.js';
import { tokenize } from '../../../sql/lexer.js';
import { type ChainVerifyRead, recognizeChainVerify, type VERIFY_COLUMNS } from '../../../sql/verify-call.js';
import { redactableColumns } from '../../../ledger/erasure/redactions.js';
import { decodeSeqs } from '../../../ledger/erasure/retention-sql.js';
import { pgChainRowsSql } from '../dialect/verify-sql.js';

/**
 * `SELECT * FROM cot_verify($1)` (or some of its columns) answered by the
 * server, as on DuckDB: the chain's rows are read by the client's own
 * backend, in its transaction, as the texts their hashes cover, and the
 * hashes are recomputed here. PostgreSQL's SQL function builds and hashes
 * forty length-prefixed fields per row and costs five times a trigger's
 * check of the same chain; the answer is the same (the conformance suite
 * holds both engines to it, broken chains included).
 */

/** What cot_verify() answers, as PostgreSQL describes its result. */
const TYPES: Readonly<Record<(typeof VERIFY_COLUMNS)[number], { readonly oid: number; readonly size: number }>> = {
  chain_key: { oid: TypeOid.text, size: -1 },
  valid: { oid: TypeOid.bool, size: 1 },
  step_count: { oid: TypeOid.int8, size: 8 },
  first_broken_index: { oid: TypeOid.int4, size: 4 },
  break_kind: { oid: TypeOid.text, size: -1 },
  expected_hash: { oid: TypeOid.text, size: -1 },
  actual_hash: { oid: TypeOid.text, size: -1 },
};

/** The shape of a statement the server may answer, from its text alone: null for any other. */
export function verifyCallOf(text: string): ChainVerifyRead | null {
  return /cot_verify/i.test(text) ? recognizeChainVerify(tokenize(text)) : null;
}

/** The result columns PostgreSQL gives for the call, as the client asked for them. */
function expectedFields(read: ChainVerifyRead): Array<{ readonly name: string; readonly oid: number }> {
  return read.columns.map((name) => ({ name, oid: TYPES[name as keyof typeof TYPES].oid }));
}

export interface ServedVerify {
  readonly table: LedgerTable;
  readonly read: ChainVerifyRead;
  /** The chain asked for; null for SQL NULL, which no chain has. */
  readonly key: string | null;
}

/**
 * The verification the server answers for a statement PostgreSQL described
 * as cot_verify's result (`fields`), or null when PostgreSQL answers it: a
 * ledger without chains, an argument given in binary as another type, a
 * function of the client's that resolved instead with other columns.
 */
export async function servedVerify(
  read: ChainVerifyRead,
  fields: readonly FieldDescription[] | null,
  ledgers: LedgerCatalog,
  values: readonly BindValue[],
  paramTypes: readonly number[],
): Promise<ServedVerify | null> {
  const expected = expectedFields(read);
  if (fields === null || fields.length !== expected.length || fields.some((f, i) => f.name !== expected[i]?.name || f.typeOid !== expected[i]?.oid))
    return null;
  let key: string | null;
  if ('literal' in read.arg) key = read.arg.literal;
  else {
    const v = values[read.arg.param - 1];
    const type = paramTypes[read.arg.param - 1] ?? TypeOid.unspecified;
    if (v === undefined || (typeof v !== 'string' && v !== null && type !== TypeOid.text && type !== TypeOid.varchar)) return null;
    key = v === null ? null : typeof v === 'string' ? v : Buffer.from(v).toString('utf8');
  }
  const table = (await ledgers.all()).find((l) => verifyMacroName(l) === read.macro && l.chainKey !== null);
  return table === undefined ? null : { table, read, key };
}

const PORTAL = 'cotwire_verify';

/**
 * The verdict's one row (none for a chain that never was) into `sink`;
 * answers the command tag. The read of a ledger's chain is parsed once per
 * backend (`kept`, by its text): PostgreSQL plans the same statement for
 * every chain, and its Execute goes with its Bind, one round trip.
 */
export async function runVerify(
  backend: RelayBackend,
  kept: Map<string, string>,
  served: ServedVerify,
  resultFormats: readonly number[],
  sink: ResultSink,
): Promise<string> {
  if (served.key === null) return 'SELECT 0';
  const sql = pgChainRowsSql(served.table);
  let statement = kept.get(sql);
  if (statement === undefined) {
    statement = (await backend.describe(sql, [TypeOid.text], true)).statement;
    kept.set(sql, statement);
  }
  const rows: Array<ReadonlyArray<string | null>> = [];
  await backend.openPortal(PORTAL, sql, [TypeOid.text], [served.key], [], { executeAll: { sync: false }, statement });
  try {
    await backend.fetch(PORTAL, 0, (cells) => {
      rows.push(cells.map((c) => (c === null || typeof c === 'string' ? c : Buffer.from(c).toString('utf8'))));
    });
  } finally {
    await backend.closePortal(PORTAL);
  }
  const redactable = redactableColumns(served.table);
  // Where retention left the chain's start follows each row's texts and digests.
  const width = served.table.columns.length + redactable.length;
  const first = rows[0];
  const start = first?.[width] == null ? CHAIN_START : { index: Number(first[width]), hash: String(first[width + 1] ?? '') };
  // And the ledger_seq ranges recorded lost after them.
  const lost = decodeSeqs(first?.[width + 2] ?? '');
  const verdict = chainVerdict(served.key, checkChain(storedLinks(served.table, rows, redactable), start, lost));
  if (verdict === null) return 'SELECT 0';
  const formatOf = (i: number): boolean => (resultFormats.length === 1 ? resultFormats[0] : resultFormats[i]) === 1;
  sink.row(served.read.columns.map((c, i) => scalarCell(verdict[c as keyof typeof verdict], TYPES[c as keyof typeof TYPES].oid, formatOf(i))));
  return 'SELECT 1';
}

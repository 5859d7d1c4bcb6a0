import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { HASH_VERSION, quoteIdent, quoteLiteral, type LedgerTable } from '../../../ledger/chain/schema.js';
import { holdsMarkerSql, RECEIPT_FORMAT } from '../../../ledger/receipt-shape.js';
import { functionGrantees, type PgRoles } from '../ledger/names.js';
import { canonicalPgTextSql } from './verify-sql.js';

/**
 * cot_receipts(session) and cot_receipt(trace_id) in PostgreSQL: the receipts `cotwire prove` writes, built from
 * the rows' canonical texts (the verification's), the recorded digests of redacted values and the inclusion
 * proofs of proof-sql.ts, every one of a statement against the same latest checkpoint. Run as the caller, so
 * row-level security gives a user with an org_id its organisation's steps only.
 */
export function pgReceiptFunctions(steps: LedgerTable, roles: PgRoles): string[] {
  const relation = steps.relation ?? `public.${quoteIdent(steps.name)}`;
  const out: string[] = [];
  for (const [name, arg, where] of [
    ['cot_receipts', 'session text', 's.session_id = $1'],
    ['cot_receipt', 'trace text', 's.trace_id = $1::uuid'],
  ] as const) {
    const signature = `public.${name}(text)`;
    out.push(
      `CREATE OR REPLACE FUNCTION public.${name}(${arg}) RETURNS TABLE (step_index integer, trace_id uuid, receipt text)
       LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $cotwire$${receiptsSql(steps, relation, where)}$cotwire$`,
      `REVOKE ALL ON FUNCTION ${signature} FROM PUBLIC`,
      `GRANT EXECUTE ON FUNCTION ${signature} TO ${functionGrantees(roles)}`,
    );
  }
  return out;
}

function receiptsSql(steps: LedgerTable, relation: string, where: string): string {
  const text = (column: string): string => {
    const c = steps.columns.find((x) => x.name === column);
    return c === undefined ? 'NULL' : canonicalPgTextSql(c.name, c.type, 's.');
  };
  const holdsMarker = holdsMarkerSql(steps, text);
  // Every ledger but a cotwire/v1 one can be redacted; on PostgreSQL its records are in public._cot_redactions.
  const redacted =
    steps.hashVersion === HASH_VERSION
      ? `'{}'::json`
      : `coalesce((SELECT pg_catalog.json_object_agg(x.column_name, x.d) FROM (
           SELECT r.column_name, min(r.value_digest) AS d FROM public._cot_redactions r
           WHERE r.ledger = ${quoteLiteral(`${steps.schema}.${steps.name}`)} AND r.target_seq = s.ledger_seq GROUP BY r.column_name) AS x
         WHERE ${holdsMarker}), '{}'::json)`;
  const proof = `public.cot_inclusion_proof(s.ledger_seq - 1, c.tree_size)`;
  return `SELECT s.step_index, s.trace_id,
      CASE WHEN c.tree_size IS NULL OR s.ledger_seq > c.tree_size THEN NULL ELSE pg_catalog.json_build_object(
        'format', ${quoteLiteral(RECEIPT_FORMAT)}, 'schema', ${quoteLiteral(steps.schema)}, 'table', ${quoteLiteral(steps.name)},
        'chain_key_column', ${steps.chainKey === null ? 'NULL' : quoteLiteral(steps.chainKey)},
        'hash_version', ${quoteLiteral(steps.hashVersion)},
        'redacted', ${redacted},
        'columns', pg_catalog.json_build_array(${steps.columns.map((col) => `pg_catalog.json_build_array(${quoteLiteral(col.name)}, ${text(col.name)})`).join(', ')}),
        'leaf_index', s.ledger_seq - 1, 'tree_size', c.tree_size,
        'inclusion_proof', pg_catalog.to_json(CASE WHEN ${proof} = '' THEN '{}'::text[] ELSE pg_catalog.string_to_array(${proof}, ' ') END),
        'checkpoint', c.checkpoint)::text END
    FROM ${relation} s
    LEFT JOIN (SELECT tree_size, checkpoint FROM public.${quoteIdent(CHECKPOINTS_TABLE)} ORDER BY ledger_seq DESC LIMIT 1) c ON true
    WHERE ${where} ORDER BY s.step_index`;
}

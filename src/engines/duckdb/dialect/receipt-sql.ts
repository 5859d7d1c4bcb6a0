import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { canonicalTextSql, quoteLiteral, STEPS_TABLE, type LedgerTable } from '../../../ledger/chain/schema.js';
import { holdsMarkerSql, RECEIPT_FORMAT } from '../../../ledger/receipt-shape.js';

/**
 * cot_receipts(session) and cot_receipt(trace_id): the receipts `cotwire prove` writes, over SQL, every one of a
 * statement against the same latest checkpoint (one snapshot). A step newer than that checkpoint has no receipt
 * yet (NULL). The steps ledger is named `main._cot_steps` so that a user with an org_id's macros read it through
 * the organisation's predicate (handler/ledger-macros.ts).
 */
export function receiptMacros(steps: LedgerTable): string[] {
  return [
    `CREATE OR REPLACE TEMP MACRO cot_receipts(session) AS TABLE ${receiptsSql(steps, 'session_id = CAST(session AS VARCHAR)')}`,
    `CREATE OR REPLACE TEMP MACRO cot_receipt(trace) AS TABLE ${receiptsSql(steps, 'trace_id = CAST(trace AS UUID)')}`,
  ];
}

function receiptsSql(steps: LedgerTable, where: string): string {
  const texts = steps.columns.map((c, i) => `${canonicalTextSql(c.name, c.type)} AS r_c${i}`);
  const at = (column: string): string => `t.r_c${steps.columns.findIndex((c) => c.name === column)}`;
  const holdsMarker = holdsMarkerSql(steps, at);
  const redacted =
    steps.redactions === null
      ? `json('{}')`
      : `coalesce((SELECT json_group_object(x.column_name, x.d) FROM (
           SELECT column_name, min(value_digest) AS d FROM ${steps.redactions}
           WHERE ledger = ${quoteLiteral(`${steps.schema}.${steps.name}`)} AND target_seq = t.r_seq GROUP BY column_name) AS x
         WHERE ${holdsMarker}), json('{}'))`;
  const proof = `CASE WHEN system.main.cot_inclusion_proof(t.r_seq - 1, c.cp_size) = '' THEN CAST([] AS VARCHAR[])
    ELSE system.main.string_split(system.main.cot_inclusion_proof(t.r_seq - 1, c.cp_size), ' ') END`;
  return `WITH c AS (SELECT tree_size AS cp_size, checkpoint AS cp_text FROM main.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1),
    t AS (SELECT step_index AS r_index, trace_id AS r_trace, ledger_seq AS r_seq, ${texts.join(', ')} FROM main.${STEPS_TABLE} WHERE ${where})
    SELECT t.r_index AS step_index, t.r_trace AS trace_id,
      CASE WHEN c.cp_size IS NULL OR t.r_seq > c.cp_size THEN NULL ELSE json_object(
        'format', ${quoteLiteral(RECEIPT_FORMAT)}, 'schema', ${quoteLiteral(steps.schema)}, 'table', ${quoteLiteral(steps.name)},
        'chain_key_column', ${steps.chainKey === null ? 'NULL' : quoteLiteral(steps.chainKey)},
        'hash_version', ${quoteLiteral(steps.hashVersion)},
        'redacted', ${redacted},
        'columns', json_array(${steps.columns.map((col, i) => `json_array(${quoteLiteral(col.name)}, t.r_c${i})`).join(', ')}),
        'leaf_index', t.r_seq - 1, 'tree_size', c.cp_size, 'inclusion_proof', to_json(${proof}), 'checkpoint', c.cp_text) END AS receipt
    FROM t LEFT JOIN c ON true ORDER BY t.r_index`;
}

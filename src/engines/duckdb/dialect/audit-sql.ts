import type { EngineFunction } from '../../../engine/port.js';
import type { AuditReport } from '../log/auditor.js';
import { quoteLiteral, type LedgerTable } from '../../../ledger/chain/schema.js';

/**
 * The audit over SQL. The findings live in the server, so one scalar
 * function (system.main.cot_audit_report) hands the latest audit's findings
 * to SQL as JSON, and the macros unpack it: cot_audit() lists them, and each
 * ledger's cot_verify macros count a chain the audit found damaged as
 * invalid, so that a deleted session or a re-chained edit never reads as
 * healthy there either.
 */

/** The kinds found by holding rows against the global log, which the chain SQL alone cannot see. */
export const LOG_KINDS: readonly string[] = ['missing', 'altered', 'unlogged'];

const REPORT_TYPE = `'[{"kind":"VARCHAR","ledger":"VARCHAR","chain_key":"VARCHAR","first_seq":"BIGINT","last_seq":"BIGINT","row_count":"BIGINT","detail":"VARCHAR","audited_at":"VARCHAR"}]'`;
const FINDINGS = `(SELECT unnest(system.main.from_json(system.main.cot_audit_report(), ${REPORT_TYPE})) AS f)`;

export function auditFunctions(latest: () => AuditReport | null): EngineFunction[] {
  return [
    {
      name: 'cot_audit_report',
      parameters: [],
      volatile: true,
      call: () => {
        const report = latest();
        if (report === null) {
          return JSON.stringify([{ kind: 'pending', detail: 'no audit has completed since the server started; the first one runs at start-up' }]);
        }
        const at = report.finishedAt.toISOString();
        return JSON.stringify(
          report.findings.map((f) => ({
            kind: f.kind,
            ledger: f.ledger,
            chain_key: f.chainKey,
            first_seq: f.firstSeq,
            last_seq: f.lastSeq,
            row_count: f.rows,
            detail: f.detail,
            audited_at: at,
          })),
        );
      },
    },
  ];
}

/** cot_audit(): the latest audit's findings, one row each (none when it found nothing). */
export const AUDIT_MACROS: readonly string[] = [
  `CREATE OR REPLACE TEMP MACRO cot_audit() AS TABLE
     SELECT f.kind, f.ledger, f.chain_key, f.first_seq, f.last_seq, f.row_count, f.detail, CAST(f.audited_at AS TIMESTAMPTZ) AS audited_at
     FROM ${FINDINGS}`,
];

/**
 * A chain verification (`verify`, the columns of verifySql) joined with the
 * audit's findings for the same ledger: a chain with a finding is invalid,
 * and a chain whose rows are all gone still has its row. `chain` is the
 * macro parameter's SQL, or null for every chain.
 */
export function withAuditFindings(table: LedgerTable, verify: string, chain: string | null): string {
  const ledger = quoteLiteral(`${table.schema}.${table.name}`);
  const keyed = table.chainKey !== null;
  return `
WITH v AS (${verify}),
a AS (
  SELECT coalesce(f.chain_key, '') AS chain_key, arg_min(f.kind, coalesce(f.first_seq, 0)) AS kind
  FROM ${FINDINGS}
  WHERE f.ledger = ${ledger} AND f.kind IN (${LOG_KINDS.map((k) => `'${k}'`).join(', ')})
    ${keyed ? 'AND f.chain_key IS NOT NULL' : ''} ${chain === null ? '' : `AND coalesce(f.chain_key, '') = CAST(${chain} AS VARCHAR)`}
  GROUP BY 1
)
SELECT coalesce(CAST(v.chain_key AS VARCHAR), a.chain_key) AS chain_key,
  coalesce(v.valid, true) AND a.chain_key IS NULL AS valid,
  coalesce(v.step_count, 0) AS step_count,
  v.first_broken_index,
  CASE WHEN coalesce(v.break_kind, 'gap') = 'gap' THEN coalesce(a.kind, v.break_kind) ELSE v.break_kind END AS break_kind,
  v.expected_hash,
  v.actual_hash
FROM v FULL JOIN a ON CAST(v.chain_key AS VARCHAR) = a.chain_key
ORDER BY 1`;
}

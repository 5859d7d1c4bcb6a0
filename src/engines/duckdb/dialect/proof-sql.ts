import type { EngineFunction } from '../../../engine/port.js';
import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import type { MerkleLog } from '../../../ledger/log/merkle-log.js';
import { STEPS_TABLE } from '../../../ledger/chain/schema.js';

/**
 * Proofs over SQL. The tree lives in the server, so three scalar functions
 * read it (system.main.cot_log_root, cot_inclusion_proof,
 * cot_consistency_proof: base64 hashes, space-separated, null when the
 * arguments do not name a proof the log holds); the table macros clients
 * call wrap them with the latest signed checkpoint and explain bad input.
 */
export function proofFunctions(log: MerkleLog): EngineFunction[] {
  const size = (v: bigint | string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0 || n > log.size) throw new RangeError(`no tree of ${String(v)} leaves`);
    return n;
  };
  const join = (hashes: readonly Buffer[]): string => hashes.map((h) => h.toString('base64')).join(' ');
  return [
    { name: 'cot_log_root', parameters: ['BIGINT'], call: ([n]) => log.root(size(n as bigint)).toString('base64') },
    {
      name: 'cot_inclusion_proof',
      parameters: ['BIGINT', 'BIGINT'],
      call: ([index, n]) => join(log.inclusion(Number(index), size(n as bigint))),
    },
    {
      name: 'cot_consistency_proof',
      parameters: ['BIGINT', 'BIGINT'],
      call: ([older, newer]) => join(log.consistency(Number(older), size(newer as bigint))),
    },
  ];
}

const fn = (name: string): string => `system.main.${name}`;
const hashes = (expr: string): string => `CASE WHEN (${expr}) = '' THEN CAST([] AS VARCHAR[]) ELSE ${fn('string_split')}(${expr}, ' ') END`;
const LATEST = `SELECT origin, tree_size, root_hash, checkpoint, created_at FROM main.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`;

/** The per-connection macros: cot_checkpoint(), cot_prove(trace_id), cot_consistency(old_size, new_size). */
export const PROOF_MACROS: readonly string[] = [
  `CREATE OR REPLACE TEMP MACRO cot_checkpoint() AS TABLE
     SELECT checkpoint, origin, tree_size, root_hash, created_at AS issued_at FROM (${LATEST})`,
  // A step newer than the latest checkpoint has no proof yet: the next checkpoint covers it.
  `CREATE OR REPLACE TEMP MACRO cot_prove(trace) AS TABLE
     SELECT s.trace_id, s.session_id, s.step_index, s.ledger_seq, s.ledger_seq - 1 AS leaf_index, c.tree_size,
       CASE WHEN s.ledger_seq <= c.tree_size THEN ${hashes(`${fn('cot_inclusion_proof')}(s.ledger_seq - 1, c.tree_size)`)} END AS inclusion_proof,
       c.root_hash, c.checkpoint
     FROM main.${STEPS_TABLE} s LEFT JOIN (${LATEST}) c ON true
     WHERE s.trace_id = CAST(trace AS UUID)`,
  `CREATE OR REPLACE TEMP MACRO cot_consistency(old_size, new_size) AS TABLE
     SELECT CAST(old_size AS BIGINT) AS old_size, CAST(new_size AS BIGINT) AS new_size,
       ${fn('cot_log_root')}(old_size) AS old_root, ${fn('cot_log_root')}(new_size) AS new_root,
       ${hashes(`coalesce(${fn('cot_consistency_proof')}(old_size, new_size),
         ${fn('error')}('no consistency proof from ' || old_size || ' to ' || new_size || ' leaves: sizes must satisfy 0 <= old_size <= new_size <= the log''s size'))`)} AS consistency_proof`,
];

import { CHAIN_COLUMNS } from '../chain/schema.js';

/** The ledger of every checkpoint the server signed: a chain of its own, and leaves of the log it describes. */
export const CHECKPOINTS_TABLE = '_cot_checkpoints';

export const CHECKPOINTS_DDL = `CREATE TABLE IF NOT EXISTS main.${CHECKPOINTS_TABLE} (
  origin VARCHAR NOT NULL,
  tree_size BIGINT NOT NULL,
  root_hash VARCHAR NOT NULL,
  checkpoint VARCHAR NOT NULL,
  ${CHAIN_COLUMNS.map((c) => `${c.name} ${c.type} NOT NULL`).join(',\n  ')}
)`;

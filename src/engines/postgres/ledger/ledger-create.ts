import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { NEW_LEDGER_HASH_VERSION } from '../../../ledger/chain/hash-version.js';
import { PG_LEDGER_SCHEMA, type PgRoles } from './names.js';
import { ledgerWallSql } from './install.js';
import { CHAIN_COLUMNS, HASH_VERSION_V3, type HashVersion, quoteIdent, quoteLiteral, SALT_COLUMN } from '../../../ledger/chain/schema.js';

/**
 * CREATE TABLE of a ledger on a PostgreSQL engine. The server writes the
 * DDL itself from the statement's parse tree: the client's columns, of the
 * types both engines hash the same way, with NOT NULL where asked, then the
 * chain columns, the hash version and the append-only wall. Nothing else of
 * the statement runs as the ledgers' owner: a default, a CHECK or a
 * reference would be code that runs when the writer inserts, so a ledger
 * has none.
 */

type Node = Record<string, unknown>;

/** PostgreSQL's internal type names a ledger column may have, and how the DDL spells them. */
const TYPES: Readonly<Record<string, string>> = {
  text: 'text',
  varchar: 'varchar',
  json: 'json',
  uuid: 'uuid',
  int2: 'smallint',
  int4: 'integer',
  int8: 'bigint',
  float8: 'double precision',
  bool: 'boolean',
  timestamptz: 'timestamp with time zone',
};

const SUPPORTED = 'text, varchar, json, uuid, smallint, integer, bigint, double precision, boolean and timestamp with time zone';

function unsupported(message: string): PgError {
  return new PgError(SqlState.FeatureNotSupported, message, {
    hint: `A ledger on PostgreSQL takes columns of type ${SUPPORTED}, each NOT NULL or not, and nothing else: the server adds the chain columns.`,
  });
}

export interface PgLedgerDdl {
  readonly name: string;
  /** IF NOT EXISTS was given. */
  readonly ifNotExists: boolean;
  readonly chainKey: string | null;
  readonly statements: readonly string[];
}

export function pgLedgerDdl(create: Node, roles: PgRoles, hashVersion: HashVersion = NEW_LEDGER_HASH_VERSION): PgLedgerDdl {
  const relation = create.relation as { relname: string; schemaname?: string; relpersistence?: string };
  const name = relation.relname;
  if (relation.schemaname !== undefined && relation.schemaname !== PG_LEDGER_SCHEMA) {
    throw unsupported(`ledger "${name}" must be created in schema ${PG_LEDGER_SCHEMA} on a PostgreSQL engine, not ${relation.schemaname}`);
  }
  if (relation.relpersistence !== undefined && relation.relpersistence !== 'p') throw unsupported(`a ledger cannot be a temporary or unlogged table`);
  for (const key of ['inhRelations', 'partspec', 'partbound', 'ofTypename', 'options', 'tablespacename', 'accessMethod']) {
    if (create[key] !== undefined) throw unsupported(`CREATE TABLE of ledger "${name}" cannot use ${key.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`)}`);
  }
  const columns: string[] = [];
  const names = new Set<string>();
  for (const element of (create.tableElts as Node[] | undefined) ?? []) {
    const def = element.ColumnDef as
      | { colname: string; typeName: { names: Array<{ String: { sval: string } }>; typmods?: unknown; arrayBounds?: unknown }; constraints?: Node[] }
      | undefined;
    if (def === undefined) throw unsupported(`ledger "${name}" can have columns only, not table constraints or LIKE`);
    if (CHAIN_COLUMNS.some((c) => c.name === def.colname)) {
      throw new PgError(SqlState.DuplicateColumn, `column "${def.colname}" of ledger "${name}" is a chain column, which the server adds`, {
        hint: 'Leave out step_index, prev_hash, current_hash, created_at and ledger_seq.',
      });
    }
    if (names.has(def.colname)) throw new PgError(SqlState.DuplicateColumn, `column "${def.colname}" specified more than once`);
    names.add(def.colname);
    const typeName = def.typeName.names.at(-1)?.String.sval ?? '';
    const type = TYPES[typeName];
    if (type === undefined || def.typeName.arrayBounds !== undefined || def.typeName.typmods !== undefined) {
      throw unsupported(`column "${def.colname}" of ledger "${name}" cannot be of type ${typeName}${def.typeName.arrayBounds === undefined ? '' : '[]'}`);
    }
    let notNull = false;
    for (const c of def.constraints ?? []) {
      const contype = (c.Constraint as { contype?: string } | undefined)?.contype;
      if (contype === 'CONSTR_NOTNULL') notNull = true;
      else if (contype !== 'CONSTR_NULL')
        throw unsupported(`column "${def.colname}" of ledger "${name}" cannot have a ${String(contype).replace('CONSTR_', '').toLowerCase()} constraint`);
    }
    columns.push(`${quoteIdent(def.colname)} ${type}${notNull ? ' NOT NULL' : ''}`);
  }
  const chainKey = names.has('session_id') ? 'session_id' : null;
  const table = `${PG_LEDGER_SCHEMA}.${quoteIdent(name)}`;
  const chain = CHAIN_COLUMNS.map((c) => `${c.name} ${c.type === 'VARCHAR' ? 'text' : c.type} NOT NULL`);
  if (hashVersion === HASH_VERSION_V3) chain.push(`${SALT_COLUMN} text NOT NULL`);
  return {
    name,
    ifNotExists: create.if_not_exists === true,
    chainKey,
    statements: [
      `CREATE TABLE ${table} (${[...columns, ...chain].join(', ')})`,
      `COMMENT ON TABLE ${table} IS ${quoteLiteral(hashVersion)}`,
      ...ledgerWallSql(name, chainKey, roles, names.has('org_id')),
    ],
  };
}

import { existsSync } from 'node:fs';
import type { Config } from '../../../config/schema.js';
import { generateKey, parseSigner, type NoteSigner } from '../../../ledger/log/note.js';
import { readKeyFile, writeKeyFile } from '../../../ledger/log/signing-key.js';
import type { Logger } from '../../../log/logger.js';

/**
 * The checkpoint signing key: the configured key file; without one, a key
 * file beside the database, created on the first start (an in-memory
 * database signs with a key of its own lifetime).
 */
export function loadSigner(config: Config, log: Logger): NoteSigner {
  if (config.checkpoint.keyFile !== null) return readKeyFile(config.checkpoint.keyFile);
  const name = `cotwire.local/${config.database.name}`;
  if (config.database.path === ':memory:') return parseSigner(generateKey(name).signerKey);
  const path = `${config.database.path}.key`;
  if (existsSync(path)) return readKeyFile(path);
  const verifierKey = writeKeyFile(path, name);
  log.warn(
    { keyFile: path, verifierKey },
    'created a checkpoint signing key beside the database; anyone who can rewrite the database can also sign with it. Generate one with `cotwire keygen`, keep it elsewhere, and set checkpoint.keyFile',
  );
  return readKeyFile(path);
}

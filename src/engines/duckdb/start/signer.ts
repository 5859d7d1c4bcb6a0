import { existsSync } from 'node:fs';
import type { Config } from '../../../config/schema.js';
import { keyBreak, keyBreakMessage, keyIdText, noteSigners } from '../../../ledger/log/key-continuity.js';
import { generateKey, parseSigner, type NoteSigner } from '../../../ledger/log/note.js';
import { readKeyFile, writeKeyFile } from '../../../ledger/log/signing-key.js';
import type { Logger } from '../../../log/logger.js';
import { StartupError } from '../../../server/startup.js';

/** The command that rotates a DuckDB file's key, as a refusal names it. */
export function rotateCommand(config: Config): string {
  return `\`cotwire keygen --rotate --db ${config.database.path} --out <new key file> --old-key <the old key file>\` (or, when the old key is lost, \`--reason "..."\` instead of --old-key), then set checkpoint.keyFile to the new file`;
}

/**
 * The checkpoint signing key: the configured key file; without one, a key
 * file beside the database, created on the first start (an in-memory
 * database signs with a key of its own lifetime). `lastCheckpoint` is the
 * signed note of the log's last checkpoint: the key must be the one that
 * signed it, and a key file beside the database is never made anew once
 * checkpoints exist.
 */
export function loadSigner(config: Config, log: Logger, lastCheckpoint: string | null): NoteSigner {
  const name = `cotwire.local/${config.database.name}`;
  if (config.database.path === ':memory:') return parseSigner(generateKey(name).signerKey);
  let signer: NoteSigner;
  let source: string;
  if (config.checkpoint.keyFile !== null) {
    signer = keyFrom(config.checkpoint.keyFile);
    source = `checkpoint.keyFile (${config.checkpoint.keyFile})`;
  } else {
    const path = `${config.database.path}.key`;
    source = `the key file beside the database (${path})`;
    if (!existsSync(path)) {
      const signedBy = lastCheckpoint === null ? null : (noteSigners(lastCheckpoint)[0] ?? { name: '(unsigned)', keyHash: 0 });
      if (signedBy !== null) {
        throw new StartupError(
          `the checkpoint signing key ${path} is missing, and the log's last checkpoint was signed by the key ${keyIdText(signedBy)}: a server never signs on with a new key in silence. Put the key file back, or rotate to a new key explicitly, which records the rotation in the log: ${rotateCommand(config)}`,
        );
      }
      const verifierKey = writeKeyFile(path, name);
      log.warn(
        { keyFile: path, verifierKey },
        'created a checkpoint signing key beside the database; anyone who can rewrite the database can also sign with it. Generate one with `cotwire keygen`, keep it elsewhere, and set checkpoint.keyFile',
      );
    }
    signer = keyFrom(path);
  }
  const signedBy = keyBreak(lastCheckpoint, signer);
  if (signedBy !== null) throw new StartupError(keyBreakMessage(signedBy, signer, source, rotateCommand(config)));
  return signer;
}

function keyFrom(path: string): NoteSigner {
  try {
    return readKeyFile(path);
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
}

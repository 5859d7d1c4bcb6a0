import { readFileSync, writeFileSync } from 'node:fs';
import { generateKey, parseSigner, type NoteSigner } from './note.js';

/** The signer key in a key file written by `cotwire keygen`. */
export function readKeyFile(path: string): NoteSigner {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the checkpoint key file ${path}: ${(err as Error).message}`);
  }
  try {
    return parseSigner(text);
  } catch (err) {
    throw new Error(`the checkpoint key file ${path} does not hold a signer key from \`cotwire keygen\`: ${(err as Error).message}`);
  }
}

/** Creates a key file (readable by its owner only; never over an existing file); returns the verifier key. */
export function writeKeyFile(path: string, name: string): string {
  const { signerKey, verifierKey } = generateKey(name);
  writeFileSync(path, `${signerKey}\n`, { mode: 0o600, flag: 'wx' });
  return verifierKey;
}

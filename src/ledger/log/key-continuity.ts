import { verifierKeyOf, type NoteSigner } from './note.js';

/** A key as a signature line names it: the key name and the first four bytes of its hash. */
export interface KeyId {
  readonly name: string;
  readonly keyHash: number;
}

export function keyIdText(k: KeyId): string {
  return `${k.name}+${k.keyHash.toString(16).padStart(8, '0')}`;
}

/** The keys whose signature lines a signed note carries (unchecked: this only names them). */
export function noteSigners(note: string): KeyId[] {
  const split = note.lastIndexOf('\n\n');
  if (split < 0) return [];
  const out: KeyId[] = [];
  for (const line of note.slice(split + 2).split('\n')) {
    if (!line.startsWith('\u2014 ')) continue;
    const [name, blob] = line.slice(2).split(' ');
    const sig = Buffer.from(blob ?? '', 'base64');
    if (name !== undefined && sig.length >= 4) out.push({ name, keyHash: sig.readUInt32BE(0) });
  }
  return out;
}

/**
 * Null when `signer` may sign the log's next checkpoint; otherwise the key that signed the last one. A log's
 * checkpoints are signed by one key until a rotation, recorded in the log, says otherwise: a key replaced in
 * silence would leave every verifier that holds the old one failing, with no word of why.
 */
export function keyBreak(lastCheckpoint: string | null, signer: NoteSigner): KeyId | null {
  if (lastCheckpoint === null) return null;
  const signers = noteSigners(lastCheckpoint);
  if (signers.some((k) => k.name === signer.name && k.keyHash === signer.keyHash)) return null;
  return signers[0] ?? { name: '(unsigned)', keyHash: 0 };
}

/** What a refusal to sign with another key says, with where the key came from and what to run. */
export function keyBreakMessage(signedBy: KeyId, signer: NoteSigner, keySource: string, rotate: string): string {
  return (
    `the last checkpoint in the log was signed by the key ${keyIdText(signedBy)}, but ${keySource} holds the key ${verifierKeyOf(signer).split('+').slice(0, 2).join('+')}: ` +
    'a server never signs on with another key in silence, since every verifier that holds the old one would fail. ' +
    `Put the key that signed the last checkpoint back, or rotate to the new one explicitly, which records the rotation in the log: ${rotate}`
  );
}

import { createHash, createPrivateKey, createPublicKey, randomBytes, sign, verify, type KeyObject } from 'node:crypto';

/**
 * C2SP signed notes (c2sp.org/signed-note) with Ed25519 keys, and the
 * tlog checkpoints (c2sp.org/tlog-checkpoint) they carry: the formats Go's
 * checksum database, Sigstore and Certificate Transparency's witnesses
 * share, so that any of their verifiers can check cotwire's checkpoints.
 */

const ED25519 = 0x01;
const SIGNATURE_PREFIX = '\u2014 ';
// DER wrappers of a raw Ed25519 key (RFC 8410), so that node:crypto takes the key material as it is.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

export class NoteError extends Error {}

export interface NoteSigner {
  readonly name: string;
  readonly keyHash: number;
  readonly privateKey: KeyObject;
}

export interface NoteVerifier {
  readonly name: string;
  readonly keyHash: number;
  readonly publicKey: KeyObject;
}

/** The key hash: the first four bytes of SHA-256(name || "\n" || type || public key), big endian. */
function keyHashOf(name: string, publicKey: Buffer): number {
  return createHash('sha256')
    .update(`${name}\n`)
    .update(Buffer.from([ED25519]))
    .update(publicKey)
    .digest()
    .readUInt32BE(0);
}

function checkName(name: string): void {
  if (name === '' || /[\s+]/u.test(name)) throw new NoteError(`invalid key name "${name}": it must be non-empty, without spaces or "+"`);
}

function rawPublicKey(privateKey: KeyObject): Buffer {
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
  return Buffer.from(jwk.x as string, 'base64url');
}

/** A new key pair: the signer key (keep it secret, outside the database) and the verifier key (publish it). */
export function generateKey(name: string): { signerKey: string; verifierKey: string } {
  checkName(name);
  const seed = randomBytes(32);
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const publicKey = rawPublicKey(privateKey);
  const hash = keyHashOf(name, publicKey).toString(16).padStart(8, '0');
  return {
    signerKey: `PRIVATE+KEY+${name}+${hash}+${Buffer.concat([Buffer.from([ED25519]), seed]).toString('base64')}`,
    verifierKey: `${name}+${hash}+${Buffer.concat([Buffer.from([ED25519]), publicKey]).toString('base64')}`,
  };
}

/** Splits "name+hash+base64", where only the key material may contain "+" (base64). */
function keyParts(text: string): { name: string; hash: number; material: Buffer } {
  const first = text.indexOf('+');
  const second = text.indexOf('+', first + 1);
  if (first <= 0 || second < 0) throw new NoteError('malformed key: expected name+hash+key');
  const name = text.slice(0, first);
  const hashText = text.slice(first + 1, second);
  const material = Buffer.from(text.slice(second + 1), 'base64');
  if (!/^[0-9a-f]{8}$/.test(hashText)) throw new NoteError(`malformed key hash "${hashText}"`);
  if (material.length !== 33 || material[0] !== ED25519) throw new NoteError('unsupported key: only Ed25519 keys (type 1) are supported');
  checkName(name);
  return { name, hash: Number.parseInt(hashText, 16), material: material.subarray(1) };
}

export function parseSigner(text: string): NoteSigner {
  const trimmed = text.trim();
  if (!trimmed.startsWith('PRIVATE+KEY+')) throw new NoteError('not a signer key: it starts with PRIVATE+KEY+');
  const { name, hash, material } = keyParts(trimmed.slice('PRIVATE+KEY+'.length));
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, material]), format: 'der', type: 'pkcs8' });
  if (keyHashOf(name, rawPublicKey(privateKey)) !== hash) throw new NoteError('the signer key does not match its key hash');
  return { name, keyHash: hash, privateKey };
}

export function parseVerifier(text: string): NoteVerifier {
  const { name, hash, material } = keyParts(text.trim());
  if (keyHashOf(name, material) !== hash) throw new NoteError('the verifier key does not match its key hash');
  return { name, keyHash: hash, publicKey: createPublicKey({ key: Buffer.concat([SPKI_PREFIX, material]), format: 'der', type: 'spki' }) };
}

/** The verifier key that belongs to a signer. */
export function verifierKeyOf(signer: NoteSigner): string {
  const publicKey = rawPublicKey(signer.privateKey);
  return `${signer.name}+${signer.keyHash.toString(16).padStart(8, '0')}+${Buffer.concat([Buffer.from([ED25519]), publicKey]).toString('base64')}`;
}

function checkText(text: string): void {
  if (!text.endsWith('\n')) throw new NoteError('a note text must end with a newline');
  if (text.includes('\n\n')) throw new NoteError('a note text must not contain a blank line');
}

/** The signed note: the text, a blank line, and one signature line. */
export function signNote(text: string, signer: NoteSigner): string {
  checkText(text);
  const signature = sign(null, Buffer.from(text, 'utf8'), signer.privateKey);
  const hash = Buffer.alloc(4);
  hash.writeUInt32BE(signer.keyHash);
  return `${text}\n${SIGNATURE_PREFIX}${signer.name} ${Buffer.concat([hash, signature]).toString('base64')}\n`;
}

/**
 * The text of a signed note, once a signature by one of `verifiers` checks;
 * signatures by other keys are ignored, as the format says.
 */
export function openNote(note: string, verifiers: readonly NoteVerifier[]): { text: string; signedBy: string[] } {
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw new NoteError('malformed note: no blank line before the signatures');
  const text = note.slice(0, split + 1);
  checkText(text);
  const lines = note.slice(split + 2);
  if (!lines.endsWith('\n') || lines === '\n') throw new NoteError('malformed note: no signature lines');
  const signedBy: string[] = [];
  for (const line of lines.slice(0, -1).split('\n')) {
    if (!line.startsWith(SIGNATURE_PREFIX)) throw new NoteError('malformed signature line');
    const [name, blob, extra] = line.slice(SIGNATURE_PREFIX.length).split(' ');
    const sig = Buffer.from(blob ?? '', 'base64');
    if (name === undefined || extra !== undefined || sig.length < 5) throw new NoteError('malformed signature line');
    const hash = sig.readUInt32BE(0);
    const verifier = verifiers.find((v) => v.name === name && v.keyHash === hash);
    if (verifier === undefined) continue;
    if (!verify(null, Buffer.from(text, 'utf8'), verifier.publicKey, sig.subarray(4))) {
      throw new NoteError(`the signature of "${name}" does not verify`);
    }
    signedBy.push(name);
  }
  if (signedBy.length === 0) throw new NoteError('the note has no signature by a known key');
  return { text, signedBy };
}

export interface Checkpoint {
  readonly origin: string;
  readonly size: number;
  readonly root: Buffer;
}

/** The body of a tlog checkpoint: origin, tree size and base64 root hash, one per line. */
export function checkpointText(c: Checkpoint): string {
  return `${c.origin}\n${c.size}\n${c.root.toString('base64')}\n`;
}

export function parseCheckpoint(text: string): Checkpoint {
  const lines = text.split('\n');
  const [origin, size, root] = lines;
  if (lines.length < 4 || origin === undefined || origin === '' || size === undefined || root === undefined) {
    throw new NoteError('malformed checkpoint: expected origin, size and root hash lines');
  }
  if (!/^(0|[1-9]\d*)$/.test(size)) throw new NoteError(`malformed checkpoint tree size "${size}"`);
  const hash = Buffer.from(root, 'base64');
  if (hash.length !== 32 || hash.toString('base64') !== root) throw new NoteError('malformed checkpoint root hash');
  return { origin, size: Number(size), root: hash };
}

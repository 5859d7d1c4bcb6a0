import { describe, expect, it } from 'vitest';
import { checkpointText, generateKey, openNote, parseCheckpoint, parseSigner, parseVerifier, signNote, verifierKeyOf } from '../../../src/ledger/log/note.js';

/** The example keys and note of Go's golang.org/x/mod/sumdb/note, and of the C2SP signed-note spec. */
const GO_SIGNER = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
const GO_VERIFIER = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const GO_NOTE = `${GO_TEXT}\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`;
const ENOCH_VERIFIER = 'EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop';
const ENOCH_LINE = '\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n';
const SPEC_VERIFIER = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';
const SPEC_NOTE =
  'This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';

describe('signed notes (c2sp.org/signed-note, Ed25519)', () => {
  it("signs Go's example exactly as Go does (Ed25519 is deterministic)", () => {
    const signer = parseSigner(GO_SIGNER);
    expect(verifierKeyOf(signer)).toBe(GO_VERIFIER);
    expect(signNote(GO_TEXT, signer)).toBe(GO_NOTE);
  });

  it("opens Go's and the spec's notes, and a note with two signatures, by either key", () => {
    expect(openNote(GO_NOTE, [parseVerifier(GO_VERIFIER)])).toEqual({ text: GO_TEXT, signedBy: ['PeterNeumann'] });
    expect(openNote(SPEC_NOTE, [parseVerifier(SPEC_VERIFIER)]).text).toBe('This is an example message.\n');
    const both = GO_NOTE + ENOCH_LINE;
    expect(openNote(both, [parseVerifier(ENOCH_VERIFIER)]).signedBy).toEqual(['EnochRoot']);
    expect(openNote(both, [parseVerifier(GO_VERIFIER), parseVerifier(ENOCH_VERIFIER)]).signedBy).toEqual(['PeterNeumann', 'EnochRoot']);
  });

  it('refuses an edited text, an unknown key and malformed keys', () => {
    const verifier = parseVerifier(GO_VERIFIER);
    expect(() => openNote(GO_NOTE.replace('cryptography', 'cryptographY'), [verifier])).toThrow(/does not verify/);
    expect(() => openNote(GO_NOTE, [parseVerifier(ENOCH_VERIFIER)])).toThrow(/no signature by a known key/);
    expect(() => parseVerifier(GO_VERIFIER.replace('c74f20a3', 'c74f20a4'))).toThrow(/key hash/);
    expect(() => parseSigner(GO_VERIFIER)).toThrow(/PRIVATE\+KEY/);
    expect(() => parseVerifier('PeterNeumann+c74f20a3+AQ==')).toThrow(/Ed25519/);
  });

  it('generates keys that sign and verify each other, and only each other', () => {
    const a = generateKey('cotwire.example/log');
    const b = generateKey('cotwire.example/log');
    const signer = parseSigner(a.signerKey);
    expect(verifierKeyOf(signer)).toBe(a.verifierKey);
    const note = signNote('cotwire.example/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n', signer);
    expect(openNote(note, [parseVerifier(a.verifierKey)]).signedBy).toEqual(['cotwire.example/log']);
    expect(() => openNote(note, [parseVerifier(b.verifierKey)])).toThrow();
    expect(() => generateKey('has space')).toThrow(/key name/);
  });
});

describe('checkpoints (c2sp.org/tlog-checkpoint)', () => {
  it('write and read origin, tree size and root hash', () => {
    const root = Buffer.from('5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328', 'hex');
    const text = checkpointText({ origin: 'cotwire.example/log', size: 8, root });
    expect(text).toBe('cotwire.example/log\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n');
    expect(parseCheckpoint(text)).toEqual({ origin: 'cotwire.example/log', size: 8, root });
    // Extension lines after the root are allowed by the format.
    expect(parseCheckpoint(`${text}extension line\n`).size).toBe(8);
    expect(() => parseCheckpoint('cotwire.example/log\n08\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n')).toThrow(/tree size/);
    expect(() => parseCheckpoint('cotwire.example/log\n8\nnot-base64\n')).toThrow(/root hash/);
  });
});

import { describe, expect, it } from 'vitest';
import { checkPassword, makeScramVerifier, parseScramVerifier, ScramError, ScramExchange } from '../../../src/session/scram.js';

describe('SCRAM-SHA-256', () => {
  // RFC 7677, section 3: user "user", password "pencil".
  const salt = Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64');
  const parsed = parseScramVerifier(makeScramVerifier('pencil', 4096, salt));
  if (parsed === null) throw new Error('the RFC 7677 verifier does not parse');
  const verifier = parsed;

  it('reproduces the RFC 7677 exchange', () => {
    expect(verifier).not.toBeNull();
    const exchange = new ScramExchange(verifier, '%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0');
    expect(exchange.serverFirst('n,,n=user,r=rOprNGfwEbeRWgbNEkqO')).toBe(
      'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096',
    );
    expect(exchange.serverFinal('c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=')).toBe(
      'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=',
    );
  });

  it('returns null for a wrong proof', () => {
    const exchange = new ScramExchange(verifier, 'abc');
    exchange.serverFirst('n,,n=user,r=xyz');
    expect(exchange.serverFinal('c=biws,r=xyzabc,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=')).toBeNull();
  });

  it('refuses channel binding, a changed nonce and malformed messages', () => {
    expect(() => new ScramExchange(verifier).serverFirst('p=tls-server-end-point,,n=,r=x')).toThrow(ScramError);
    const exchange = new ScramExchange(verifier, 'abc');
    exchange.serverFirst('n,,n=,r=xyz');
    expect(() => exchange.serverFinal('c=biws,r=other,p=AAAA')).toThrow(/nonce/);
    expect(() => new ScramExchange(verifier).serverFirst('garbage')).toThrow(ScramError);
  });

  it('checks cleartext passwords against a verifier', () => {
    expect(checkPassword(verifier, 'pencil')).toBe(true);
    expect(checkPassword(verifier, 'pen')).toBe(false);
  });

  it('parses only well-formed verifiers', () => {
    expect(parseScramVerifier('md5abc')).toBeNull();
    expect(parseScramVerifier('SCRAM-SHA-256$4096:c2FsdA==$AAAA:BBBB')).toBeNull();
  });
});

import { DEFAULTS } from '../../src/config/schema.js';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { serialize } from 'pg-protocol';
import { makeScramVerifier } from '../../src/session/scram.js';
import { StartupError } from '../../src/server/startup.js';
import { startTestServer } from '../fixtures/server.js';
import { errorFields, WireClient } from '../fixtures/wire.js';

const users = [
  { name: 'alice', password: makeScramVerifier('correct horse') },
  { name: 'bob', password: makeScramVerifier('battery staple') },
];

async function connectError(options: pg.ClientConfig): Promise<pg.DatabaseError | null> {
  const c = new pg.Client(options);
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.end();
    return null;
  } catch (err) {
    return err as pg.DatabaseError;
  }
}

function selfSignedCert(dir: string): { key: string; cert: string } {
  const key = join(dir, 'server.key');
  const cert = join(dir, 'server.crt');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost'], {
    stdio: 'ignore',
  });
  return { key, cert };
}

describe('SCRAM-SHA-256', () => {
  it('authenticates configured users and refuses wrong passwords and unknown users alike', async () => {
    await using server = await startTestServer({ users });
    const c = await server.client({ user: 'alice', password: 'correct horse' });
    expect((await c.query('SELECT current_user IS NOT NULL AS ok')).rows).toEqual([{ ok: true }]);
    const wrong = await connectError(server.connectionOptions({ user: 'alice', password: 'nope' }));
    expect(wrong?.code).toBe('28P01');
    expect(wrong?.message).toBe('password authentication failed for user "alice"');
    const unknown = await connectError(server.connectionOptions({ user: 'mallory', password: 'nope' }));
    expect(unknown?.code).toBe('28P01');
    expect(unknown?.message).toBe('password authentication failed for user "mallory"');
  });

  it('offers only SCRAM-SHA-256 when users are configured', async () => {
    await using server = await startTestServer({ users });
    const c = await WireClient.connect(server.port);
    c.write(serialize.startup({ user: 'alice', database: 'cotwire' }));
    const [auth] = await c.until('R');
    expect(auth?.body.readInt32BE(0)).toBe(10);
    expect(auth?.body.subarray(4).toString()).toBe('SCRAM-SHA-256\0\0');
    c.end();
  });

  it('ignores the user name inside SCRAM messages in favour of the startup user', async () => {
    await using server = await startTestServer({ users });
    // node-postgres sends "n=*" in client-first-message; a different name there must not matter.
    const c = await server.client({ user: 'bob', password: 'battery staple' });
    expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});

describe('TLS', () => {
  it('upgrades the connection when TLS is configured, and accepts cleartext passwords only over it', async () => {
    await using server = await startTestServer();
    const tls = selfSignedCert(server.dir);
    await using tlsServer = await startTestServer({ users, tls, auth: { method: 'password' } });
    const c = await tlsServer.client({ user: 'alice', password: 'correct horse', ssl: { rejectUnauthorized: false } });
    const socket = (c as unknown as { connection: { stream: { encrypted?: boolean } } }).connection.stream;
    expect(socket.encrypted).toBe(true);
    expect((await c.query('SELECT 42 AS n')).rows).toEqual([{ n: 42 }]);
    // Without TLS the same user is asked for SCRAM, not for a cleartext password.
    const plain = await WireClient.connect(tlsServer.port);
    plain.write(serialize.startup({ user: 'alice', database: 'cotwire' }));
    const [auth] = await plain.until('R');
    expect(auth?.body.readInt32BE(0)).toBe(10);
    plain.end();
  });
});

describe('who may connect', () => {
  it('refuses to listen on a non-loopback address without users', async () => {
    const err = await startTestServer({ listen: { host: '0.0.0.0', port: 0 } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StartupError);
    expect((err as Error).message).toMatch(/refusing to listen on 0\.0\.0\.0 without authentication/);
  });

  it('serves HTTP beyond loopback only with users and TLS, and then over TLS with the wire certificate', async () => {
    const noUsers = await startTestServer({ http: { host: '0.0.0.0', port: 0 } }).catch((e: unknown) => e);
    expect(noUsers).toBeInstanceOf(StartupError);
    expect((noUsers as Error).message).toMatch(/refusing to serve HTTP on 0\.0\.0\.0 without authentication/);
    const noTls = await startTestServer({ users, http: { host: '0.0.0.0', port: 0 } }).catch((e: unknown) => e);
    expect(noTls).toBeInstanceOf(StartupError);
    expect((noTls as Error).message).toMatch(/refusing to serve HTTP on 0\.0\.0\.0 without TLS/);

    await using plain = await startTestServer();
    const tls = selfSignedCert(plain.dir);
    const bearer = 'cwt_test-token-of-alice';
    const withToken = [{ ...users[0], token: `sha256:${createHash('sha256').update(bearer).digest('hex')}` }, users[1]];
    await using server = await startTestServer({ users: withToken, tls, http: { host: '0.0.0.0', port: 0 } });
    const port = server.running.httpAddress?.port as number;
    const get = (path: string, headers: Record<string, string> = {}): Promise<{ status: number; encrypted: boolean }> =>
      new Promise((resolve, reject) => {
        const req = httpsRequest({ host: '127.0.0.1', port, path, headers, ca: readFileSync(tls.cert), servername: 'localhost' }, (res) => {
          res.resume();
          resolve({ status: res.statusCode ?? 0, encrypted: (res.socket as TLSSocket).encrypted === true });
        });
        req.on('error', reject);
        req.end();
      });
    expect(await get('/healthz')).toEqual({ status: 200, encrypted: true });
    expect((await get('/metrics')).status).toBe(401);
    expect((await get('/metrics', { authorization: `Bearer ${bearer}` })).status).toBe(200);
    // Plain HTTP on the same port gets no answer it could take for one.
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });

  it('refuses connections beyond maxConnections with 53300', async () => {
    await using server = await startTestServer({ limits: { ...DEFAULTS.limits, maxMessageSize: 1 << 20, maxConnections: 2, shutdownGraceMs: 1000 } });
    await server.client();
    await server.client();
    const c = await WireClient.connect(server.port);
    c.write(serialize.startup({ user: 'cotwire', database: 'cotwire' }));
    const msgs = await c.until('E');
    expect(errorFields(msgs[0]?.body as Buffer).C).toBe('53300');
    c.end();
  });
});

describe('logs', () => {
  it('log connection start and end and failed statements, and never a password', async () => {
    const { PassThrough } = await import('node:stream');
    const sink = new PassThrough();
    let text = '';
    sink.on('data', (b: Buffer) => (text += b.toString()));
    {
      await using server = await startTestServer({ users, log: { level: 'debug', slowStatementMs: 1 } }, sink);
      const c = await server.client({ user: 'alice', password: 'correct horse', application_name: 'log-test' });
      await c.query('SELECT * FROM nope').catch(() => undefined);
      await c.query('SELECT count(*) FROM range(3000000)');
      await c.end();
      await connectError(server.connectionOptions({ user: 'alice', password: 'wrong secret' }));
      await new Promise((r) => setTimeout(r, 50));
    }
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const authorized = lines.find((l) => l.msg === 'connection authorized');
    expect(authorized).toMatchObject({ user: 'alice', application_name: 'log-test', remote: '127.0.0.1' });
    expect(typeof authorized?.conn).toBe('number');
    expect(lines.some((l) => l.msg === 'connection closed' && l.conn === authorized?.conn)).toBe(true);
    expect(lines.find((l) => l.msg === 'statement failed')).toMatchObject({ code: '42P01', level: 40 });
    expect(lines.find((l) => l.msg === 'slow statement')).toMatchObject({ statement: 'SELECT count(*) FROM range(3000000)', level: 40 });
    expect(text).not.toContain('correct horse');
    expect(text).not.toContain('wrong secret');
  });
});

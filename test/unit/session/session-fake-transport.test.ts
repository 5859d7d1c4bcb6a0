import { serialize } from 'pg-protocol';
import type { BackendKeyDataMessage, ParameterStatusMessage, RowDescriptionMessage } from 'pg-protocol/dist/messages.js';
import { afterEach, describe, expect, it } from 'vitest';
import { PgError } from '../../../src/errors/pg-error.js';
import { SqlState } from '../../../src/errors/sqlstate.js';
import { AuthPolicy } from '../../../src/session/auth.js';
import { makeScramVerifier, parseScramVerifier } from '../../../src/session/scram.js';
import {
  errorsOf,
  FakeTransport,
  type Harness,
  type HarnessOptions,
  harness as makeHarness,
  names,
  PROCESS_ID,
  pbe,
  ready as makeReady,
  rowsOf,
  SECRET_KEY,
  statusOf,
} from './fake-session.js';

const open: Harness[] = [];

function harness(opts?: HarnessOptions): Harness {
  const h = makeHarness(opts);
  open.push(h);
  return h;
}

async function ready(opts?: HarnessOptions): Promise<Harness> {
  const h = await makeReady(opts);
  open.push(h);
  return h;
}

afterEach(async () => {
  // Every session is closed, so a test that leaves one mid-exchange cannot leak its handler or timers.
  for (const h of open.splice(0)) {
    h.session.disconnected();
    await h.session.closed;
  }
});

const divisionByZero = (): PgError => new PgError(SqlState.DivisionByZero, 'division by zero');

const verifier = parseScramVerifier(makeScramVerifier('pencil', 16, Buffer.alloc(16, 7)));
if (verifier === null) throw new Error('the test verifier does not parse');
const passwordAuth = (): AuthPolicy => new AuthPolicy([{ name: 'alice', verifier, role: 'writer', identity: { agent_id: 'a1' } }], 'password');

describe('Session startup on a fake transport', () => {
  it('completes trust authentication from loopback and reports the handler parameters and the key', async () => {
    const h = harness();
    h.send(serialize.startup({ user: 'alice', database: 'ledger', application_name: 'unit' }));
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['authenticationOk', 'parameterStatus', 'parameterStatus', 'backendKeyData', 'readyForQuery']);
    const params = got.filter((m): m is ParameterStatusMessage => m.name === 'parameterStatus').map((m) => [m.parameterName, m.parameterValue]);
    expect(params).toEqual(h.handler.reportedParameters);
    const key = got.find((m): m is BackendKeyDataMessage => m.name === 'backendKeyData');
    expect([key?.processID, key?.secretKey]).toEqual([PROCESS_ID, SECRET_KEY]);
    expect(statusOf(got)).toBe('I');
    expect(h.opened).toHaveLength(1);
    const info = h.opened[0];
    expect(info?.user).toBe('alice');
    expect(info?.database).toBe('ledger');
    expect(info?.role).toBe('admin');
    // user and database are the session's; the rest go to the handler (pg-protocol adds client_encoding).
    expect([...(info?.startupParameters.keys() ?? [])].sort()).toEqual(['application_name', 'client_encoding']);
  });

  it('defaults the database to the user name', async () => {
    const h = harness();
    h.send(serialize.startup({ user: 'bob' }));
    await h.transport.until('readyForQuery');
    expect(h.opened[0]?.database).toBe('bob');
  });

  it('refuses a non-loopback client when no users are configured, without opening a handler', async () => {
    const h = harness({ transport: new FakeTransport('203.0.113.9') });
    h.send(serialize.startup({ user: 'alice' }));
    const [err] = errorsOf(await h.transport.until('error'));
    expect(err?.code).toBe('28000');
    expect(err?.severity).toBe('FATAL');
    await h.session.closed;
    expect(h.transport.ended).toBe(true);
    expect(h.opened).toHaveLength(0);
    expect(h.onCloseCalls()).toBe(1);
  });

  it('refuses a startup packet without a user name', async () => {
    const h = harness();
    h.send(serialize.startup({ database: 'ledger' }));
    const [err] = errorsOf(await h.transport.until('error'));
    expect(err?.code).toBe('28000');
    await h.session.closed;
    expect(h.opened).toHaveLength(0);
  });

  describe('cleartext password over TLS', () => {
    it('asks for the password and reaches the ready state with the right one', async () => {
      const h = harness({ auth: passwordAuth(), transport: new FakeTransport('198.51.100.1', true) });
      h.send(serialize.startup({ user: 'alice' }));
      expect(names(await h.transport.until('authenticationCleartextPassword'))).toEqual(['authenticationCleartextPassword']);
      expect(h.opened).toHaveLength(0);
      h.send(serialize.password('pencil'));
      const got = await h.transport.until('readyForQuery');
      expect(names(got)[0]).toBe('authenticationOk');
      expect(statusOf(got)).toBe('I');
      expect(h.opened[0]?.role).toBe('writer');
      expect(h.opened[0]?.identity).toEqual({ agent_id: 'a1' });
    });

    it('closes the connection on a wrong password', async () => {
      const h = harness({ auth: passwordAuth(), transport: new FakeTransport('198.51.100.1', true) });
      h.send(serialize.startup({ user: 'alice' }));
      await h.transport.until('authenticationCleartextPassword');
      h.send(serialize.password('pen'));
      const [err] = errorsOf(await h.transport.until('error'));
      expect(err?.code).toBe('28P01');
      await h.session.closed;
      expect(h.opened).toHaveLength(0);
      expect(h.transport.received.some((m) => m.name === 'authenticationOk')).toBe(false);
    });
  });

  it('rejects a query message sent before the password', async () => {
    const h = harness({
      auth: passwordAuth(),
      transport: new FakeTransport('198.51.100.1', true),
    });
    h.send(serialize.startup({ user: 'alice' }), serialize.query('SELECT 1'));
    const [err] = errorsOf(await h.transport.until('error'));
    expect(err?.code).toBe('08P01');
    await h.session.closed;
    expect(h.opened).toHaveLength(0);
  });
});

describe('Session end', () => {
  it('closes the transport and the handler on Terminate, and calls onClose once', async () => {
    const h = await ready();
    h.send(serialize.end(), serialize.query('SELECT 1'));
    await h.session.closed;
    expect(h.transport.ended).toBe(true);
    expect(h.handler.closed).toBe(true);
    expect(h.onCloseCalls()).toBe(1);
    // Nothing after Terminate is run.
    expect(h.handler.calls).toEqual([]);
    expect(h.transport.pending()).toEqual([]);
  });
});

describe('Session error recovery up to Sync', () => {
  it('discards everything after an extended-query error until Sync, then sends one ReadyForQuery', async () => {
    const h = await ready();
    h.send(
      serialize.bind({ statement: 'missing' }),
      serialize.describe({ type: 'P' }),
      serialize.execute({}),
      // A simple Query is discarded too: PostgreSQL reads and discards every message up to Sync.
      serialize.query('SELECT 1'),
      ...pbe('SELECT 2'),
      serialize.sync(),
    );
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['error', 'readyForQuery']);
    expect(errorsOf(got)[0]?.code).toBe('26000');
    expect(statusOf(got)).toBe('I');
    expect(h.handler.of('prepare')).toEqual([]);
    expect(h.handler.of('execute')).toEqual([]);
    expect(h.handler.of('beginQueryString')).toEqual([]);
    expect(h.handler.calls).toContain('failTransaction');
    expect(h.transport.pending()).toEqual([]);

    // The next exchange runs normally.
    h.handler.script('SELECT 3', { columns: ['n'], rows: [['3']] });
    h.send(...pbe('SELECT 3'), serialize.sync());
    const next = await h.transport.until('readyForQuery');
    expect(names(next)).toEqual(['parseComplete', 'bindComplete', 'dataRow', 'commandComplete', 'readyForQuery']);
    expect(rowsOf(next)).toEqual([['3']]);
    expect(statusOf(next)).toBe('I');
  });

  it('ignores CopyData, CopyDone and CopyFail outside COPY, as the protocol specifies', async () => {
    const h = await ready();
    h.send(serialize.copyData(Buffer.from('late row\n')), serialize.copyDone(), serialize.copyFail('late'), serialize.sync());
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['readyForQuery']);
    expect(h.handler.calls).toEqual(['sync']);
  });

  it('reports E at Sync after an error inside a transaction block, and I after ROLLBACK', async () => {
    const h = await ready();
    h.handler.script('SELECT 1/0', { failIn: 'execute', error: divisionByZero() });
    h.send(serialize.query('BEGIN'));
    expect(statusOf(await h.transport.until('readyForQuery'))).toBe('T');

    h.send(...pbe('SELECT 1/0'), serialize.execute({}), serialize.sync());
    const failed = await h.transport.until('readyForQuery');
    expect(names(failed)).toEqual(['parseComplete', 'bindComplete', 'error', 'readyForQuery']);
    expect(errorsOf(failed)[0]?.code).toBe('22012');
    expect(statusOf(failed)).toBe('E');
    // The second Execute was discarded, not run and refused.
    expect(h.handler.of('execute')).toHaveLength(2);

    h.send(serialize.query('ROLLBACK'));
    const rolledBack = await h.transport.until('readyForQuery');
    expect(names(rolledBack)).toEqual(['commandComplete', 'readyForQuery']);
    expect(statusOf(rolledBack)).toBe('I');
  });

  it('sends the error at once when a Flush follows, and ReadyForQuery only at Sync', async () => {
    const h = await ready();
    h.handler.script('bad', { failIn: 'prepare', error: new PgError(SqlState.SyntaxError, 'syntax error at or near "bad"') });
    h.send(serialize.parse({ text: 'bad' }), serialize.flush());
    const got = await h.transport.until('error');
    expect(names(got)).toEqual(['error']);
    expect(errorsOf(got)[0]?.code).toBe('42601');
    expect(h.transport.pending()).toEqual([]);

    // Still discarding: this Parse must not reach the handler.
    h.send(serialize.parse({ text: 'SELECT 1' }), serialize.sync());
    const rest = await h.transport.until('readyForQuery');
    expect(names(rest)).toEqual(['readyForQuery']);
    expect(h.handler.of('prepare')).toEqual(['prepare:s1:bad']);
  });

  it('reports an error thrown by the handler at Sync before ReadyForQuery', async () => {
    const h = await ready();
    h.handler.syncError = new PgError(SqlState.SerializationFailure, 'could not serialize access');
    h.send(...pbe('SELECT 1'), serialize.sync());
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['parseComplete', 'bindComplete', 'commandComplete', 'error', 'readyForQuery']);
    expect(errorsOf(got)[0]?.code).toBe('40001');
    h.send(...pbe('SELECT 2'), serialize.sync());
    expect(names(await h.transport.until('readyForQuery'))).toEqual(['parseComplete', 'bindComplete', 'commandComplete', 'readyForQuery']);
  });

  it('replaces an internal error by XX000 without leaking its message, and keeps the connection', async () => {
    const h = await ready();
    h.handler.script('SELECT boom', { failIn: 'execute', error: new Error('secret internal detail') });
    h.send(...pbe('SELECT boom'), serialize.sync());
    const got = await h.transport.until('readyForQuery');
    const [err] = errorsOf(got);
    expect(err?.code).toBe('XX000');
    expect(err?.severity).toBe('ERROR');
    expect(err?.message).not.toContain('secret');
    expect(h.session.isClosed).toBe(false);
  });
});

describe('Session errors in a pipeline', () => {
  it('skips the rest of a pipeline after its second Execute fails: one ErrorResponse, one ReadyForQuery', async () => {
    const h = await ready();
    h.handler.script('INSERT 1', { tag: 'INSERT 0 1' });
    h.handler.script('INSERT 2', { failIn: 'execute', error: divisionByZero() });
    h.handler.script('INSERT 3', { tag: 'INSERT 0 1' });
    h.send(...pbe('INSERT 1'), ...pbe('INSERT 2'), ...pbe('INSERT 3'), serialize.sync());
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['parseComplete', 'bindComplete', 'commandComplete', 'parseComplete', 'bindComplete', 'error', 'readyForQuery']);
    expect(errorsOf(got)).toHaveLength(1);
    expect(h.handler.of('prepare').map((c) => c.split(':')[2])).toEqual(['INSERT 1', 'INSERT 2']);
    expect(h.handler.of('execute')).toHaveLength(2);
    expect(h.handler.of('failTransaction')).toHaveLength(1);
    expect(statusOf(got)).toBe('I');
    expect(h.transport.pending()).toEqual([]);
  });

  it('confines the error to its own Sync when each statement has one', async () => {
    const h = await ready();
    h.handler.script('INSERT 2', { failIn: 'execute', error: divisionByZero() });
    h.send(...pbe('INSERT 1'), serialize.sync(), ...pbe('INSERT 2'), serialize.sync(), ...pbe('INSERT 3'), serialize.sync());
    const first = await h.transport.until('readyForQuery');
    const second = await h.transport.until('readyForQuery');
    const third = await h.transport.until('readyForQuery');
    expect(names(first)).toEqual(['parseComplete', 'bindComplete', 'commandComplete', 'readyForQuery']);
    expect(names(second)).toEqual(['parseComplete', 'bindComplete', 'error', 'readyForQuery']);
    expect(names(third)).toEqual(['parseComplete', 'bindComplete', 'commandComplete', 'readyForQuery']);
    expect(h.handler.of('execute')).toHaveLength(3);
  });
});

describe('Session portal lifetimes', () => {
  it('replaces the unnamed portal at the next Bind, closing the old one first', async () => {
    const h = await ready();
    h.send(
      serialize.parse({ text: 'SELECT $1' }),
      serialize.bind({ values: ['first'] }),
      serialize.bind({ values: [Buffer.from('second')] }),
      serialize.execute({}),
    );
    h.send(serialize.sync());
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['parseComplete', 'bindComplete', 'bindComplete', 'dataRow', 'commandComplete', 'readyForQuery']);
    expect(rowsOf(got)).toEqual([['second']]);
    expect(h.handler.portals.map((p) => p.paramFormats)).toEqual([[0], [1]]);
    const calls = h.handler.calls.filter((c) => /^(bind|closePortal|execute):/.test(c));
    // p1 is closed before p2 exists, and Execute runs p2; p2 itself goes at Sync (no transaction block).
    expect(calls).toEqual(['bind:p1:s1', 'closePortal:p1', 'bind:p2:s1', 'execute:p2:0', 'closePortal:p2']);
  });

  it('keeps a named portal across Sync inside a transaction block, and drops it when the transaction ends', async () => {
    const h = await ready();
    h.handler.script('SELECT x', { columns: ['x'], rows: [['a'], ['b']] });
    h.send(serialize.query('BEGIN'));
    await h.transport.until('readyForQuery');
    h.send(serialize.parse({ name: 'st', text: 'SELECT x' }), serialize.bind({ portal: 'cur', statement: 'st' }), serialize.sync());
    expect(statusOf(await h.transport.until('readyForQuery'))).toBe('T');
    const cur = h.handler.lastPortalId();

    h.send(serialize.describe({ type: 'P', name: 'cur' }), serialize.execute({ portal: 'cur', rows: 1 }), serialize.sync());
    const first = await h.transport.until('readyForQuery');
    expect(names(first)).toEqual(['rowDescription', 'dataRow', 'portalSuspended', 'readyForQuery']);
    expect((first[0] as RowDescriptionMessage).fields.map((f) => f.name)).toEqual(['x']);

    h.send(serialize.execute({ portal: 'cur' }), serialize.sync());
    const second = await h.transport.until('readyForQuery');
    expect(rowsOf(second)).toEqual([['b']]);
    expect(h.handler.of('execute').filter((c) => c.startsWith(`execute:${cur}:`))).toEqual([`execute:${cur}:1`, `execute:${cur}:0`]);
    expect(h.handler.of('closePortal')).not.toContain(`closePortal:${cur}`);

    h.send(serialize.query('COMMIT'));
    expect(statusOf(await h.transport.until('readyForQuery'))).toBe('I');
    expect(h.handler.of('closePortal').filter((c) => c === `closePortal:${cur}`)).toHaveLength(1);

    h.send(serialize.execute({ portal: 'cur' }), serialize.sync());
    const gone = await h.transport.until('readyForQuery');
    expect(names(gone)).toEqual(['error', 'readyForQuery']);
    expect(errorsOf(gone)[0]?.code).toBe('34000');
    // The prepared statement outlives the transaction; only portals end with it.
    h.send(serialize.bind({ portal: 'cur', statement: 'st' }), serialize.sync());
    expect(names(await h.transport.until('readyForQuery'))).toEqual(['bindComplete', 'readyForQuery']);
  });

  it('ends a named portal at Close: Describe then fails with 34000 and Execute is discarded', async () => {
    const h = await ready();
    h.send(serialize.query('BEGIN'));
    await h.transport.until('readyForQuery');
    h.send(
      serialize.parse({ name: 'st', text: 'SELECT 1' }),
      serialize.bind({ portal: 'cur', statement: 'st' }),
      serialize.describe({ type: 'P', name: 'cur' }),
    );
    h.send(serialize.close({ type: 'P', name: 'cur' }), serialize.describe({ type: 'P', name: 'cur' }), serialize.execute({ portal: 'cur' }), serialize.sync());
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['parseComplete', 'bindComplete', 'noData', 'closeComplete', 'error', 'readyForQuery']);
    const [err] = errorsOf(got);
    expect(err?.code).toBe('34000');
    expect(err?.message).toBe('portal "cur" does not exist');
    const cur = h.handler.lastPortalId();
    expect(h.handler.of('closePortal').filter((c) => c === `closePortal:${cur}`)).toHaveLength(1);
    expect(h.handler.of('execute').filter((c) => c.startsWith(`execute:${cur}:`))).toEqual([]);
    expect(statusOf(got)).toBe('E');
  });

  it('ends a named portal at Sync outside a transaction block', async () => {
    const h = await ready();
    h.send(serialize.parse({ name: 'st', text: 'SELECT 1' }), serialize.bind({ portal: 'cur', statement: 'st' }), serialize.sync());
    expect(names(await h.transport.until('readyForQuery'))).toEqual(['parseComplete', 'bindComplete', 'readyForQuery']);
    expect(h.handler.of('closePortal')).toEqual(['closePortal:p1']);
    h.send(serialize.describe({ type: 'P', name: 'cur' }), serialize.sync());
    const got = await h.transport.until('readyForQuery');
    expect(errorsOf(got)[0]?.code).toBe('34000');
  });

  it('accepts Close of a portal that does not exist, as PostgreSQL does', async () => {
    const h = await ready();
    h.send(serialize.close({ type: 'P', name: 'never' }), serialize.close({ type: 'S', name: 'never' }), serialize.sync());
    expect(names(await h.transport.until('readyForQuery'))).toEqual(['closeComplete', 'closeComplete', 'readyForQuery']);
  });

  it('refuses a second named portal of the same name with 42P03, leaving the first usable', async () => {
    const h = await ready();
    h.send(serialize.query('BEGIN'));
    await h.transport.until('readyForQuery');
    h.send(serialize.parse({ name: 'st', text: 'SELECT $1' }), serialize.bind({ portal: 'cur', statement: 'st', values: ['one'] }));
    h.send(serialize.bind({ portal: 'cur', statement: 'st', values: ['two'] }), serialize.sync());
    const got = await h.transport.until('readyForQuery');
    expect(errorsOf(got)[0]?.code).toBe('42P03');
    // The second Bind never reached the handler, and the first portal was not closed.
    const cur = h.handler.lastPortalId();
    expect(h.handler.portals.filter((p) => p.statement.sql === 'SELECT $1').map((p) => p.id)).toEqual([cur]);
    expect(h.handler.of('closePortal')).not.toContain(`closePortal:${cur}`);
    h.send(serialize.describe({ type: 'P', name: 'cur' }), serialize.sync());
    expect(names(await h.transport.until('readyForQuery'))).toEqual(['noData', 'readyForQuery']);
  });

  it('counts named portals against maxPortals until they are closed, the unnamed one aside', async () => {
    const h = await ready({ options: { maxPortals: 1 } });
    h.send(serialize.query('BEGIN'));
    await h.transport.until('readyForQuery');
    h.send(
      serialize.parse({ name: 'st', text: 'SELECT 1' }),
      serialize.bind({ portal: 'a', statement: 'st' }),
      serialize.bind({ statement: 'st' }),
      serialize.sync(),
    );
    expect(names(await h.transport.until('readyForQuery'))).toEqual(['parseComplete', 'bindComplete', 'bindComplete', 'readyForQuery']);
    h.send(serialize.bind({ portal: 'b', statement: 'st' }), serialize.sync());
    const refused = await h.transport.until('readyForQuery');
    expect(errorsOf(refused)[0]?.code).toBe('53400');
    h.send(serialize.query('ROLLBACK'), serialize.query('BEGIN'));
    await h.transport.until('readyForQuery');
    await h.transport.until('readyForQuery');
    // The transaction's end freed the slot; so does Close.
    h.send(
      serialize.bind({ portal: 'b', statement: 'st' }),
      serialize.close({ type: 'P', name: 'b' }),
      serialize.bind({ portal: 'c', statement: 'st' }),
      serialize.sync(),
    );
    const got = await h.transport.until('readyForQuery');
    expect(names(got)).toEqual(['bindComplete', 'closeComplete', 'bindComplete', 'readyForQuery']);
  });

  describe('Execute with a row limit', () => {
    const five = { columns: ['n'], rows: [['1'], ['2'], ['3'], ['4'], ['5']] };

    it('suspends the portal at the limit and resumes it where it stopped', async () => {
      const h = await ready();
      h.handler.script('SELECT n', five);
      h.send(serialize.parse({ text: 'SELECT n' }), serialize.bind({}));
      h.send(serialize.execute({ rows: 2 }), serialize.execute({ rows: 2 }), serialize.execute({ rows: 2 }), serialize.sync());
      const got = await h.transport.until('readyForQuery');
      expect(names(got)).toEqual([
        'parseComplete',
        'bindComplete',
        'dataRow',
        'dataRow',
        'portalSuspended',
        'dataRow',
        'dataRow',
        'portalSuspended',
        'dataRow',
        'commandComplete',
        'readyForQuery',
      ]);
      expect(rowsOf(got)).toEqual([['1'], ['2'], ['3'], ['4'], ['5']]);
      expect(h.handler.of('execute')).toEqual(['execute:p1:2', 'execute:p1:2', 'execute:p1:2']);
    });

    it('delivers each step once the client asks with Flush, before any Sync', async () => {
      const h = await ready();
      h.handler.script('SELECT n', five);
      h.send(serialize.parse({ text: 'SELECT n' }), serialize.bind({}), serialize.execute({ rows: 3 }), serialize.flush());
      const first = await h.transport.until('portalSuspended');
      expect(rowsOf(first)).toEqual([['1'], ['2'], ['3']]);
      h.send(serialize.execute({ rows: 3 }), serialize.flush());
      const second = await h.transport.until('commandComplete');
      expect(rowsOf(second)).toEqual([['4'], ['5']]);
      expect(h.transport.pending()).toEqual([]);
      h.send(serialize.sync());
      expect(names(await h.transport.until('readyForQuery'))).toEqual(['readyForQuery']);
    });

    it('loses a suspended unnamed portal at Sync outside a transaction block', async () => {
      const h = await ready();
      h.handler.script('SELECT n', five);
      h.send(serialize.parse({ text: 'SELECT n' }), serialize.bind({}), serialize.execute({ rows: 2 }), serialize.sync());
      expect(names(await h.transport.until('readyForQuery')).at(-2)).toBe('portalSuspended');
      h.send(serialize.execute({ rows: 2 }), serialize.sync());
      const got = await h.transport.until('readyForQuery');
      expect(names(got)).toEqual(['error', 'readyForQuery']);
      expect(errorsOf(got)[0]?.code).toBe('34000');
    });
  });
});

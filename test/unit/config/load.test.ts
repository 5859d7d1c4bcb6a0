import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config/load.js';
import { DEFAULTS } from '../../../src/config/schema.js';
import { makeScramVerifier } from '../../../src/session/scram.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

describe('loadConfig', () => {
  it('uses the documented defaults', () => {
    expect(loadConfig({ argv: {}, env: {} })).toEqual(DEFAULTS);
  });

  it('sends checkpoints to a directory beside the database unless sinks are configured', () => {
    expect(loadConfig({ argv: { db: '/var/lib/cot/x.duckdb' }, env: {} }).checkpoint.sinks).toEqual(['/var/lib/cot/x.duckdb.checkpoints/']);
    expect(loadConfig({ argv: { db: ':memory:' }, env: {} }).checkpoint.sinks).toEqual([]);
    expect(loadConfig({ argv: { config: file('nosinks.yaml', 'checkpoint:\n  sinks: []\n') }, env: {} }).checkpoint.sinks).toEqual([]);
    expect(loadConfig({ argv: { config: file('onesink.yaml', 'checkpoint:\n  sinks: [/mnt/worm/]\n') }, env: {} }).checkpoint.sinks).toEqual(['/mnt/worm/']);
  });

  it('lets flags override the environment, which overrides the file', () => {
    const config = file('layered.yaml', 'listen:\n  host: 127.0.0.2\n  port: 6000\ndatabase:\n  path: /tmp/file.duckdb\n');
    const fromFile = loadConfig({ argv: { config }, env: {} });
    expect(fromFile.listen).toEqual({ host: '127.0.0.2', port: 6000 });
    const fromEnv = loadConfig({ argv: { config }, env: { COTWIRE_PORT: '6001', COTWIRE_DB: ':memory:' } });
    expect(fromEnv.listen.port).toBe(6001);
    expect(fromEnv.database.path).toBe(':memory:');
    const fromFlag = loadConfig({ argv: { config, port: '6002' }, env: { COTWIRE_PORT: '6001' } });
    expect(fromFlag.listen.port).toBe(6002);
  });

  it('reads the config file named by COTWIRE_CONFIG, in JSON too', () => {
    const config = file('c.json', JSON.stringify({ log: { level: 'debug' } }));
    expect(loadConfig({ argv: {}, env: { COTWIRE_CONFIG: config } }).log.level).toBe('debug');
  });

  it('freezes the result', () => {
    const c = loadConfig({ argv: {}, env: {} });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.listen)).toBe(true);
  });

  it.each([
    ['listen:\n  port: -1\n', 'invalid configuration: listen.port = -1; expected an integer from 0 to 65535'],
    ['listen:\n  hots: x\n', 'invalid configuration: listen.hots = "x"; unknown key; known keys are host, port'],
    ['log:\n  level: loud\n', 'invalid configuration: log.level = "loud"; expected one of trace, debug, info, warn, error, fatal, silent'],
    [
      'users:\n  - name: a\n    password: plain\n',
      'invalid configuration: users[0].password = "plain"; expected a SCRAM-SHA-256 verifier from `cotwire passwd`, never a plain password',
    ],
    ['tls:\n  key: /k.pem\n', 'invalid configuration: tls = {"key":"/k.pem","cert":null}; set both tls.key and tls.cert, or neither'],
    ['ledger:\n  embeddingSampleRate: 2\n', 'invalid configuration: ledger.embeddingSampleRate = 2; expected a number from 0 to 1'],
    [
      'ledger:\n  embeddingAlwaysTypes: Decision\n',
      'invalid configuration: ledger.embeddingAlwaysTypes = "Decision"; expected a list of step types such as [Decision, Error]',
    ],
    ['ledger:\n  enabled: false\n', 'invalid configuration: ledger.enabled = false; cotwire does not yet run without ledgers; leave it true'],
    [
      'ledger:\n  retentionDays: 30\n',
      "invalid configuration: ledger.retentionDays = 30; shorter than ledger.retentionFloorDays = 183 (the EU AI Act, Articles 19(1) and 26(6), keeps a high-risk AI system's logs at least six months): raise retentionDays to 183 or more (0 keeps everything), or set ledger.retentionFloorDays: 0 if the system is not a high-risk AI system under the Act",
    ],
    ['ledger:\n  retentionFloorDays: -1\n', 'invalid configuration: ledger.retentionFloorDays = -1; expected an integer from 0 to 100000'],
    ['limits:\n  statementTimeoutMs: -5\n', 'invalid configuration: limits.statementTimeoutMs = -5; expected an integer from 0 to 2147483647'],
    ['listen: 5\n', 'invalid configuration: listen = 5; expected a mapping'],
    ['database:\n  path: ""\n', 'invalid configuration: database.path = ""; expected a non-empty string'],
    ['database:\n  compression: zstd\n', 'invalid configuration: database.compression = "zstd"; expected one of fast-reads, small'],
    ['auth:\n  method: md5\n', 'invalid configuration: auth.method = "md5"; expected one of scram-sha-256, password'],
    [
      'guard:\n  protectedPrefixes: [1]\n',
      'invalid configuration: guard.protectedPrefixes = [1]; expected a list of table-name prefixes such as ["_cot", "audit_"]',
    ],
    ['metrics:\n  port: web\n', 'invalid configuration: metrics.port = "web"; expected an integer from 0 to 65535'],
    ['limits:\n  maxConnections: 0\n', 'invalid configuration: limits.maxConnections = 0; expected an integer from 1 to 10000'],
    ['log:\n  slowStatementMs: fast\n', 'invalid configuration: log.slowStatementMs = "fast"; expected an integer from 0 to 86400000'],
    ['users: {}\n', 'invalid configuration: users = {}; expected a list of { name, password, role }'],
    [
      'users:\n  - name: a\n    password: x\n    colour: red\n',
      'invalid configuration: users[0].colour = "red"; unknown key; known keys are name, password, role, agent_id, org_id, token',
    ],
    ['checkpoint:\n  sinks: ["ftp://x/y"]\n', 'invalid configuration: checkpoint.sinks = "ftp://x/y"; a URL sink must be http:// or https://'],
    [
      'checkpoint:\n  sinks: "/tmp/x"\n',
      'invalid configuration: checkpoint.sinks = "/tmp/x"; expected a list of file paths, directories (ending in "/") or http(s) URLs',
    ],
    ['checkpoint:\n  intervalSeconds: 0\n', 'invalid configuration: checkpoint.intervalSeconds = 0; expected an integer from 1 to 86400'],
    ['- just\n- a list\n', 'invalid configuration: (root) = ["just","a list"]; expected a mapping'],
    [
      'nope: 1\n',
      'invalid configuration: nope = 1; unknown key; known keys are listen, database, engine, tls, auth, users, limits, log, http, metrics, otlp, ledger, checkpoint, guard, embedding',
    ],
    [
      'embedding:\n  provider: openai\n',
      'invalid configuration: embedding = {"provider":"openai"}; the openai provider needs embedding.url (the full endpoint, such as http://localhost:11434/v1/embeddings) and embedding.model',
    ],
    ['embedding:\n  provider: bert\n', 'invalid configuration: embedding.provider = "bert"; expected one of builtin, openai'],
    ['embedding:\n  model: bge-small\n', 'invalid configuration: embedding.model = "bge-small"; the builtin provider\'s model is cotwire-hashed-v1'],
    [
      'embedding:\n  provider: openai\n  model: m\n  url: ftp://x/v1/embeddings\n',
      'invalid configuration: embedding.url = "ftp://x/v1/embeddings"; expected an http:// or https:// URL',
    ],
    [
      'embedding:\n  provider: openai\n  model: m\n  url: https://me:sk-123@x/v1/embeddings\n',
      'invalid configuration: embedding.url = "(a URL with credentials)"; give the API key in COTWIRE_EMBEDDING_API_KEY, not in the URL',
    ],
    [
      'embedding:\n  apiKey: sk-123\n',
      'invalid configuration: embedding.apiKey = "sk-123"; unknown key; known keys are enabled, provider, url, model, dimensions, sendDimensions, timeoutMs, batchSize, maxRetries',
    ],
    ['embedding:\n  dimensions: 1\n', 'invalid configuration: embedding.dimensions = 1; expected an integer from 2 to 16000'],
  ])('refuses %j with one clear line', (text, message) => {
    const config = file('bad.yaml', text);
    expect(() => loadConfig({ argv: { config }, env: {} })).toThrow(new ConfigError(message));
  });

  it('holds ledger.retentionDays to ledger.retentionFloorDays, six months unless set', () => {
    const ledger = (text: string) => loadConfig({ argv: { config: file('retention.yaml', `ledger:\n${text}`) }, env: {} }).ledger;
    expect(DEFAULTS.ledger).toMatchObject({ retentionDays: 0, retentionFloorDays: 183 });
    expect(ledger('  retentionDays: 183\n')).toMatchObject({ retentionDays: 183, retentionFloorDays: 183 });
    // 0 keeps everything, which no floor forbids.
    expect(ledger('  retentionDays: 0\n  retentionFloorDays: 3650\n')).toMatchObject({ retentionDays: 0, retentionFloorDays: 3650 });
    expect(() => ledger('  retentionDays: 365\n  retentionFloorDays: 3650\n')).toThrow(
      /^invalid configuration: ledger\.retentionDays = 365; shorter than ledger\.retentionFloorDays = 3650 .*Articles 19\(1\) and 26\(6\).*set ledger\.retentionFloorDays: 0 if the system is not a high-risk AI system under the Act$/,
    );
  });

  it('lets ledger.retentionFloorDays: 0 turn the floor off, for a system the Act does not cover', () => {
    const config = file('nofloor.yaml', 'ledger:\n  retentionDays: 1\n  retentionFloorDays: 0\n');
    expect(loadConfig({ argv: { config }, env: {} }).ledger).toMatchObject({ retentionDays: 1, retentionFloorDays: 0 });
  });

  it('takes the embedding service from the file and its key from the environment only', () => {
    const config = file(
      'embed.yaml',
      'embedding:\n  provider: openai\n  url: http://localhost:11434/v1/embeddings\n  model: nomic-embed-text\n  dimensions: 768\n',
    );
    const c = loadConfig({ argv: { config }, env: { COTWIRE_EMBEDDING_API_KEY: 'sk-abc', COTWIRE_EMBEDDING_MODEL: 'mxbai-embed-large' } });
    expect(c.embedding).toMatchObject({
      provider: 'openai',
      url: 'http://localhost:11434/v1/embeddings',
      model: 'mxbai-embed-large',
      dimensions: 768,
      apiKey: 'sk-abc',
    });
    expect(loadConfig({ argv: {}, env: {} }).embedding).toMatchObject({
      enabled: true,
      provider: 'builtin',
      model: 'cotwire-hashed-v1',
      dimensions: 384,
      apiKey: null,
    });
  });

  it('takes users from COTWIRE_USERS, for containers', () => {
    const v = makeScramVerifier('pw');
    const config = loadConfig({ argv: {}, env: { COTWIRE_USERS: JSON.stringify([{ name: 'agent', password: v, role: 'writer' }]) } });
    expect(config.users).toEqual([{ name: 'agent', password: v, role: 'writer', agentId: null, orgId: null, token: null }]);
    expect(() => loadConfig({ argv: {}, env: { COTWIRE_USERS: '[{' } })).toThrow(/COTWIRE_USERS is not YAML or JSON/);
  });

  it('names the file it cannot read or parse', () => {
    expect(() => loadConfig({ argv: { config: join(dir, 'missing.yaml') }, env: {} })).toThrow(/^cannot read the configuration file .*missing\.yaml/);
    const broken = file('broken.yaml', 'listen: [\n');
    expect(() => loadConfig({ argv: { config: broken }, env: {} })).toThrow(/^cannot parse the configuration file .*broken\.yaml/);
  });

  it('accepts users with SCRAM verifiers and refuses duplicates', () => {
    const v = makeScramVerifier('pw');
    const ok = file('users.yaml', `users:\n  - name: a\n    password: ${v}\n`);
    expect(loadConfig({ argv: { config: ok }, env: {} }).users).toEqual([{ name: 'a', password: v, role: 'reader', agentId: null, orgId: null, token: null }]);
    const writer = file('writer.yaml', `users:\n  - name: w\n    password: ${v}\n    role: writer\n    agent_id: agent-7\n`);
    expect(loadConfig({ argv: { config: writer }, env: {} }).users[0]).toMatchObject({ role: 'writer', agentId: 'agent-7' });
    const badRole = file('role.yaml', `users:\n  - name: w\n    password: ${v}\n    role: root\n`);
    expect(() => loadConfig({ argv: { config: badRole }, env: {} })).toThrow(
      'invalid configuration: users[0].role = "root"; expected one of reader, writer, admin',
    );
    const identity = file('identity.yaml', `users:\n  - name: w\n    password: ${v}\n    agent_id: a\n`);
    expect(() => loadConfig({ argv: { config: identity }, env: {} })).toThrow(/an agent_id is for writer users/);
    // An organisation scopes a reader as it does a writer; an admin sees every organisation.
    const scoped = file('scoped.yaml', `users:\n  - name: r\n    password: ${v}\n    org_id: acme\n`);
    expect(loadConfig({ argv: { config: scoped }, env: {} }).users[0]).toMatchObject({ role: 'reader', orgId: 'acme' });
    const admin = file('admin.yaml', `users:\n  - name: r\n    password: ${v}\n    role: admin\n    org_id: acme\n`);
    expect(() => loadConfig({ argv: { config: admin }, env: {} })).toThrow(/an org_id is for reader and writer users: an admin sees every organisation/);
    const dup = file('dup.yaml', `users:\n  - name: a\n    password: ${v}\n  - name: a\n    password: ${v}\n`);
    expect(() => loadConfig({ argv: { config: dup }, env: {} })).toThrow(/user names must be unique/);
  });
});

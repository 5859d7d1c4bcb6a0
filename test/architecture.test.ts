import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, dirname, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/** Which src folders each folder may import from (DESIGN.md's one-way dependencies). */
const ALLOWED: Record<string, readonly string[]> = {
  errors: [],
  sql: [],
  protocol: ['errors'],
  session: ['protocol', 'errors'],
  server: ['session', 'protocol', 'errors', 'config', 'log', 'observe'],
  engine: ['errors', 'protocol', 'sql'],
  observe: [],
  guard: ['errors', 'sql', 'engine'],
  ledger: ['errors', 'engine', 'observe', 'embedding'],
  // Embedders know nothing of the ledger: texts in, vectors out.
  embedding: [],
  config: ['session'],
  log: ['config'],
  cli: [
    'config',
    'log',
    'server',
    'main.ts',
    'engines/duckdb',
    'engines/postgres',
    'session',
    'errors',
    'version.ts',
    'engine',
    'ledger',
    'guard',
    'mcp',
    'embedding',
    'observe',
  ],
  // A client of the wire: never the engine, so it cannot open a database file.
  mcp: ['ledger', 'sql', 'errors', 'version.ts'],
  // Spans in, steps out: what a span says, and the SQL that appends it over a client of the wire.
  otlp: ['ledger'],
  // The HTTP listener reaches the ledger as a client of the wire too, through connections opened in the process.
  http: ['server', 'session', 'config', 'otlp', 'errors', 'viewer', 'ledger'],
  // Pages from rows: HTML and nothing else.
  viewer: [],
};

/**
 * The handler's own modules, and which of them each may import: the
 * statement pipeline's stages point down, towards the plan, the context and
 * the transaction, and nothing but the factory reaches the facade.
 */
const HANDLER: Record<string, readonly string[]> = {
  'command-tag.ts': [],
  'settings.ts': [],
  'ledger-insert.ts': [],
  'commands.ts': ['settings.ts'],
  'access.ts': ['command-tag.ts'],
  'plan.ts': ['access.ts', 'commands.ts', 'key-registry.ts', 'ledger-insert.ts'],
  'transaction.ts': ['settings.ts'],
  'engine-calls.ts': [],
  'advisory-locks.ts': [],
  'key-registry.ts': [],
  'backends.ts': [],
  'session-cache.ts': [],
  'ledger-reads.ts': [],
  'steps-reads.ts': ['ledger-reads.ts', 'session-cache.ts'],
  'catalog-mode.ts': ['transaction.ts'],
  'context.ts': [
    'access.ts',
    'advisory-locks.ts',
    'backends.ts',
    'catalog-mode.ts',
    'engine-calls.ts',
    'key-registry.ts',
    'plan.ts',
    'session-cache.ts',
    'settings.ts',
    'transaction.ts',
  ],
  'foreign-keys.ts': ['context.ts', 'key-registry.ts'],
  'ledger-macros.ts': ['context.ts'],
  'ledger-create.ts': ['access.ts', 'command-tag.ts', 'context.ts', 'plan.ts'],
  'table-create.ts': ['command-tag.ts', 'context.ts', 'plan.ts'],
  'result-sources.ts': ['context.ts'],
  'engine-run.ts': ['command-tag.ts', 'context.ts', 'foreign-keys.ts', 'ledger-create.ts', 'plan.ts', 'result-sources.ts', 'table-create.ts'],
  'ledger-append.ts': ['context.ts', 'ledger-insert.ts', 'plan.ts'],
  'copy.ts': ['context.ts', 'engine-run.ts', 'foreign-keys.ts', 'key-registry.ts', 'ledger-append.ts', 'plan.ts'],
  'erasure.ts': ['context.ts', 'plan.ts'],
  'planner.ts': [
    'catalog-mode.ts',
    'commands.ts',
    'context.ts',
    'erasure.ts',
    'foreign-keys.ts',
    'key-registry.ts',
    'ledger-append.ts',
    'ledger-create.ts',
    'ledger-macros.ts',
    'ledger-reads.ts',
    'plan.ts',
    'result-sources.ts',
    'steps-reads.ts',
    'table-create.ts',
  ],
  'cursors.ts': ['commands.ts', 'context.ts', 'engine-run.ts', 'plan.ts', 'planner.ts'],
  'session-commands.ts': ['backends.ts', 'commands.ts', 'context.ts', 'cursors.ts', 'settings.ts'],
  'connection.ts': [
    'access.ts',
    'catalog-mode.ts',
    'commands.ts',
    'context.ts',
    'copy.ts',
    'cursors.ts',
    'erasure.ts',
    'engine-calls.ts',
    'engine-run.ts',
    'ledger-append.ts',
    'plan.ts',
    'planner.ts',
    'session-commands.ts',
    'settings.ts',
    'transaction.ts',
  ],
  'factory.ts': ['connection.ts', 'context.ts'],
};

const SRC = resolve(import.meta.dirname, '../src');
/** The DuckDB wing's statement pipeline. */
const HANDLER_DIR = 'engines/duckdb/handler';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^(?:import|export)[^'"]*from\s+'([^']+)'/gm), ...text.matchAll(/import\('([^']+)'\)/g)].map((m) => m[1] as string);
}

/** A source file's place: a wing (`engines/duckdb`, `engines/postgres`), a core folder, or a file at the top. */
function area(rel: string): string {
  return rel.startsWith('engines/') ? rel.split('/').slice(0, 2).join('/') : (rel.split('/')[0] as string);
}

describe('architecture', () => {
  const all = files(SRC);

  it('keeps each engine in its wing: nothing outside a wing imports it but main.ts and cli/, neither wing imports the other, the core imports no wing', () => {
    const wings = ['engines/duckdb', 'engines/postgres'];
    const seen = new Set<string>();
    const violations: string[] = [];
    for (const file of all) {
      const rel = relative(SRC, file);
      const from = area(rel);
      seen.add(from);
      for (const spec of imports(file).filter((s) => s.startsWith('.'))) {
        const to = area(relative(SRC, resolve(dirname(file), spec)));
        if (to === from || !wings.includes(to)) continue;
        if (from === 'main.ts' || from === 'cli') continue;
        violations.push(`${rel} imports ${to}: ${spec}`);
      }
    }
    expect(wings.every((w) => seen.has(w))).toBe(true);
    expect(violations).toEqual([]);
  });

  it('keeps main.ts a chooser of at most 80 lines', () => {
    expect(readFileSync(join(SRC, 'main.ts'), 'utf8').split('\n').length).toBeLessThanOrEqual(80);
  });

  it('loads nothing but commander for cotwire --version and --help: the CLI imports each command statically from nowhere', () => {
    // Static imports only: a command's modules are import()ed when it runs.
    const staticImports = (file: string): string[] =>
      [...readFileSync(file, 'utf8').matchAll(/^(?:import|export)(?!\s+type\b)[^'"]*from\s+'([^']+)'/gm)].map((m) => m[1] as string);
    const reached = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string): void => {
      if (reached.has(file)) return;
      reached.add(file);
      for (const spec of staticImports(file)) {
        if (spec.startsWith('.')) visit(resolve(dirname(file), spec).replace(/\.js$/, '.ts'));
        else if (!spec.startsWith('node:')) packages.add(spec);
      }
    };
    // cli.ts sizes libuv's pool first, then always loads cli/main.ts.
    visit(join(SRC, 'cli.ts'));
    visit(join(SRC, 'cli/main.ts'));
    expect([...reached].map((f) => relative(SRC, f)).sort()).toEqual(['cli.ts', 'cli/main.ts', 'cli/usage.ts', 'version.ts']);
    expect([...packages]).toEqual(['commander']);
  });

  it('keeps functions short: at most two in src/ run past 150 lines, and those hold declarative text', () => {
    const long: string[] = [];
    for (const file of all) {
      const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
      const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
          const from = source.getLineAndCharacterOfPosition(node.getStart()).line;
          const to = source.getLineAndCharacterOfPosition(node.getEnd()).line;
          const name = (node as ts.FunctionLikeDeclaration).name?.getText(source) ?? '(anonymous)';
          if (to - from + 1 > 150) long.push(`${relative(SRC, file)}:${name}`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    // The catalog's views and the MCP tools' definitions: SQL text and tool declarations, one after another.
    expect(long.sort()).toEqual(['engines/duckdb/catalog/pg-catalog.ts:catalogViews', 'mcp/tools.ts:registerTools']);
  });

  it('keeps the core small enough to read: no folder holds more than 30 source files directly', () => {
    const counts = new Map<string, number>();
    for (const file of all) counts.set(dirname(relative(SRC, file)), (counts.get(dirname(relative(SRC, file))) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 30)).toEqual([]);
  });

  it('keeps imports one-way between folders', () => {
    const violations: string[] = [];
    for (const file of all) {
      const rel = relative(SRC, file);
      const folder = area(rel);
      const allowed = ALLOWED[folder];
      if (allowed === undefined) continue;
      for (const spec of imports(file).filter((s) => s.startsWith('.'))) {
        const target = relative(SRC, resolve(dirname(file), spec)).replace(/\.js$/, '.ts');
        const targetFolder = area(target);
        if (targetFolder === folder) continue;
        if (!allowed.includes(targetFolder)) violations.push(`${rel} imports ${target}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it("lets only the DuckDB wing's adapter import @duckdb/node-api, and only the PostgreSQL wing's adapter and the wire's own clients (MCP, HTTP) import pg", () => {
    for (const file of all) {
      const rel = relative(SRC, file);
      for (const spec of imports(file)) {
        if (spec.startsWith('@duckdb/')) expect(rel.startsWith('engines/duckdb/adapter/'), rel).toBe(true);
        if (spec === 'pg' && !rel.startsWith('engines/postgres/adapter/')) expect(rel.startsWith('mcp/') || rel === 'http/wire-clients.ts', rel).toBe(true);
      }
    }
  });

  it('decides access on a PostgreSQL engine in one module too: only its handler/access.ts imports the guard and the security event log', () => {
    const importers: string[] = [];
    for (const file of all) {
      const rel = relative(SRC, file);
      if (!rel.startsWith('engines/postgres/handler/')) continue;
      for (const spec of imports(file).filter((s) => s.startsWith('.'))) {
        const target = relative(SRC, resolve(dirname(file), spec));
        if (target.startsWith('guard/') || target === 'engines/postgres/guard.js' || target === 'ledger/security-events.js')
          importers.push(`${rel} imports ${target}`);
      }
    }
    expect(importers.length).toBeGreaterThan(0);
    expect(importers.filter((i) => !i.startsWith('engines/postgres/handler/access.ts '))).toEqual([]);
  });

  it('decides access and records refusals in one DuckDB handler module: only its handler/access.ts imports the guard and the security event log', () => {
    const importers: string[] = [];
    for (const file of all) {
      const rel = relative(SRC, file);
      if (!rel.startsWith('engines/duckdb/handler/')) continue;
      for (const spec of imports(file).filter((s) => s.startsWith('.'))) {
        const target = relative(SRC, resolve(dirname(file), spec));
        if (target.startsWith('guard/') || target.startsWith('engines/duckdb/guard/') || target === 'ledger/security-events.js')
          importers.push(`${rel} imports ${target}`);
      }
    }
    expect(importers.length).toBeGreaterThan(0);
    expect(importers.filter((i) => !i.startsWith('engines/duckdb/handler/access.ts '))).toEqual([]);
  });

  it('keeps the handler a pipeline: each module imports only the stages below it, and only the factory reaches the facade', () => {
    const handlerFiles = all.filter((f) => relative(SRC, f).startsWith(`${HANDLER_DIR}/`)).map((f) => relative(join(SRC, HANDLER_DIR), f));
    expect(handlerFiles.sort()).toEqual(Object.keys(HANDLER).sort());
    const violations: string[] = [];
    for (const name of handlerFiles) {
      const file = join(SRC, HANDLER_DIR, name);
      for (const spec of imports(file).filter((s) => s.startsWith('./'))) {
        const target = spec.slice(2).replace(/\.js$/, '.ts');
        if (!(HANDLER[name] ?? []).includes(target)) violations.push(`${HANDLER_DIR}/${name} imports ${target}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('documents the same handler import map in docs/architecture.md', () => {
    const text = readFileSync(resolve(import.meta.dirname, '../docs/architecture.md'), 'utf8');
    const start = text.indexOf('| module | holds | imports (handler) |');
    expect(start).toBeGreaterThan(0);
    const doc = text.slice(start, text.indexOf('\n\n', start));
    const documented: Record<string, string[]> = {};
    for (const m of doc.matchAll(/^\| `([a-z-]+\.ts)` \| [^\n]* \| ([a-z, -]+|\(none\)) \|$/gm)) {
      const imports = m[2] === '(none)' ? [] : (m[2] as string).split(', ').map((n) => `${n}.ts`);
      documented[m[1] as string] = imports.sort();
    }
    const expected = Object.fromEntries(Object.entries(HANDLER).map(([k, v]) => [k, [...v].sort()]));
    expect(documented).toEqual(expected);
  });

  it("lets only the DuckDB handler's transaction.ts begin and end engine transactions", () => {
    const starts: string[] = [];
    for (const file of all) {
      const rel = relative(SRC, file);
      if (!rel.startsWith(`${HANDLER_DIR}/`) || rel === `${HANDLER_DIR}/transaction.ts`) continue;
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\.run\(\s*['`"](BEGIN|START|COMMIT|END|ROLLBACK|ABORT)\b/gi)) starts.push(`${rel}: ${m[0]}`);
    }
    expect(starts).toEqual([]);
    expect(readFileSync(join(SRC, HANDLER_DIR, 'transaction.ts'), 'utf8')).toMatch(/\.run\('COMMIT'\)/);
  });

  it("keeps the DuckDB handler's connection.ts a facade of a few hundred lines over the pipeline", () => {
    const lines = readFileSync(join(SRC, HANDLER_DIR, 'connection.ts'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(300);
  });

  it('ends every relative import in .js (nodenext ESM)', () => {
    for (const file of all) {
      for (const spec of imports(file).filter((s) => s.startsWith('.'))) expect(spec, relative(SRC, file)).toMatch(/\.js$/);
    }
  });

  it('reads process.env only in the CLI', () => {
    for (const file of all) {
      const rel = relative(SRC, file);
      if (rel === 'cli.ts' || rel.startsWith('cli/')) continue;
      expect(readFileSync(file, 'utf8'), rel).not.toMatch(/process\.env/);
    }
  });
});

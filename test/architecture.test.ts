import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, dirname, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Which src folders each folder may import from (DESIGN.md's one-way dependencies). */
const ALLOWED: Record<string, readonly string[]> = {
  errors: [],
  sql: [],
  protocol: ['errors'],
  session: ['protocol', 'errors'],
  server: ['session', 'protocol', 'errors', 'config', 'log', 'observe'],
  engine: ['errors', 'protocol', 'sql'],
  catalog: ['version.ts', 'protocol', 'sql'],
  handler: ['engine', 'session', 'protocol', 'sql', 'catalog', 'errors', 'guard', 'ledger', 'observe'],
  observe: [],
  guard: ['errors', 'sql', 'engine'],
  ledger: ['errors', 'engine', 'observe'],
  config: ['session'],
  log: ['config'],
  cli: ['config', 'log', 'main.ts', 'session', 'version.ts', 'engine', 'ledger', 'guard', 'mcp'],
  // A client of the wire: never the engine, so it cannot open a database file.
  mcp: ['ledger', 'sql', 'version.ts'],
};

const SRC = resolve(import.meta.dirname, '../src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^(?:import|export)[^'"]*from\s+'([^']+)'/gm), ...text.matchAll(/import\('([^']+)'\)/g)].map(
    (m) => m[1] as string,
  );
}

describe('architecture', () => {
  const all = files(SRC);

  it('keeps imports one-way between folders', () => {
    const violations: string[] = [];
    for (const file of all) {
      const rel = relative(SRC, file);
      const folder = rel.split('/')[0] as string;
      const allowed = ALLOWED[folder];
      if (allowed === undefined) continue;
      for (const spec of imports(file).filter((s) => s.startsWith('.'))) {
        const target = relative(SRC, resolve(dirname(file), spec)).replace(/\.js$/, '.ts');
        const targetFolder = target.split('/')[0] as string;
        if (targetFolder === folder) continue;
        if (!allowed.includes(targetFolder)) violations.push(`${rel} imports ${target}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('lets only engine/duckdb import @duckdb/node-api, and nothing import engine/duckdb but the composition roots (main.ts, the offline commands)', () => {
    for (const file of all) {
      const rel = relative(SRC, file);
      for (const spec of imports(file)) {
        if (spec.startsWith('@duckdb/')) expect(rel.startsWith('engine/duckdb/'), rel).toBe(true);
        if (spec.includes('/duckdb/') && !rel.startsWith('engine/duckdb/')) expect(['main.ts', 'cli/database.ts'], spec).toContain(rel);
      }
    }
  });

  it('decides access and records refusals in one handler module: only handler/access.ts imports the guard and the security event log', () => {
    const importers: string[] = [];
    for (const file of all) {
      const rel = relative(SRC, file);
      if (!rel.startsWith('handler/')) continue;
      for (const spec of imports(file).filter((s) => s.startsWith('.'))) {
        const target = relative(SRC, resolve(dirname(file), spec));
        if (target.startsWith('guard/') || target === 'ledger/security-events.js') importers.push(`${rel} imports ${target}`);
      }
    }
    expect(importers.length).toBeGreaterThan(0);
    expect(importers.filter((i) => !i.startsWith('handler/access.ts '))).toEqual([]);
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

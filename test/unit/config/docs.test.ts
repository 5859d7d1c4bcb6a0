import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEFAULTS } from '../../../src/config/schema.js';

const root = join(import.meta.dirname, '../../..');

function flatten(v: unknown, prefix = ''): string[] {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    return Object.entries(v).flatMap(([k, x]) => flatten(x, prefix === '' ? k : `${prefix}.${k}`));
  }
  return [prefix];
}

/** The backticked names in the first column of a markdown table's rows, users[] entries aside. */
function tableKeys(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .flatMap((l) => [...(l.split('|')[1] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] as string))
    .filter((k) => !k.startsWith('users[]'));
}

/** Keys from the full configuration table, docs/configuration.md. */
function documentedKeys(): string[] {
  return tableKeys(readFileSync(join(root, 'docs/configuration.md'), 'utf8'));
}

/** Keys from the README's short table of the keys used most. */
function readmeKeys(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const start = readme.indexOf('## Configuration');
  return tableKeys(readme.slice(start, readme.indexOf('\n## ', start + 5)));
}

describe('configuration reference', () => {
  const example = flatten(parse(readFileSync(join(root, 'config/cotwire.example.yaml'), 'utf8'))).sort();
  const schema = flatten(DEFAULTS)
    .map((k) => k.replace(/\.\d+$/, ''))
    // A secret is read from the environment only, never from a file.
    .filter((k) => k !== 'embedding.apiKey')
    .filter((k, i, all) => all.indexOf(k) === i)
    .sort();

  it('documents every key of the schema in config/cotwire.example.yaml', () => {
    expect(example).toEqual(schema);
  });

  it('lists in docs/configuration.md exactly the keys of config/cotwire.example.yaml', () => {
    expect(documentedKeys().sort()).toEqual(example);
  });

  it("lists in the README's short table only keys of config/cotwire.example.yaml, with the full table's rows", () => {
    const keys = readmeKeys();
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) expect(example).toContain(k);
    const full = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    for (const k of keys) {
      const row = readme.split('\n').find((l) => l.startsWith(`| \`${k}\` |`));
      const fullRow = full.split('\n').find((l) => l.startsWith(`| \`${k}\` |`));
      // Same default and flags; the meaning may differ only in where its links point.
      expect(row?.split('|').slice(1, 4), k).toEqual(fullRow?.split('|').slice(1, 4));
    }
  });
});

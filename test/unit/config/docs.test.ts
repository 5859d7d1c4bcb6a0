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

/** Keys from the configuration table of the README: the backticked names in the first column. */
function readmeKeys(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 5));
  return section
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .flatMap((l) => [...(l.split('|')[1] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] as string))
    .filter((k) => !k.startsWith('users[]'));
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

  it('lists in the README exactly the keys of config/cotwire.example.yaml', () => {
    expect(readmeKeys().sort()).toEqual(example);
  });
});

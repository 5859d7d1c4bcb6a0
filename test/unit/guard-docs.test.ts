import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { READ_ONLY_CALLS, READ_ONLY_PRAGMAS } from '../../src/guard/policy.js';

const doc = readFileSync(join(import.meta.dirname, '../../docs/security.md'), 'utf8');

function listAfter(label: string): string[] {
  const at = doc.indexOf(label);
  expect(at).toBeGreaterThanOrEqual(0);
  const paragraph = doc.slice(at + label.length, doc.indexOf('\n\n', at));
  return [...paragraph.matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string);
}

describe('docs/security.md', () => {
  it('lists exactly the PRAGMAs the guard allows', () => {
    expect(listAfter('Allowed `PRAGMA`s:').sort()).toEqual([...READ_ONLY_PRAGMAS].sort());
  });

  it('lists exactly the CALLs the guard allows', () => {
    expect(listAfter('Allowed `CALL`s:').sort()).toEqual([...READ_ONLY_CALLS].sort());
  });
});

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serverNodeFlags } from '../fixtures/node-flags.js';

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * The server's Node.js flags: `npm start` and the container image start it
 * the same way, and the tests and benchmarks run it with what `npm start`
 * gives it (test/fixtures/node-flags.ts).
 */
describe("the server's Node.js flags", () => {
  it('are a young generation large enough that a streamed result is not collected every few thousand rows', () => {
    // With V8's default, a SELECT * of 100,000 steps ran 100k rows/s on 2 cores, 125-130k with 32 MB (docs/benchmarks.md).
    expect(serverNodeFlags()).toEqual(['--max-semi-space-size=32']);
  });

  it('are the same in the container image as in npm start', () => {
    const cmd = /^CMD (\[.*\])$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
    expect(cmd).not.toBeNull();
    expect(JSON.parse(cmd?.[1] ?? '[]')).toEqual(['node', ...serverNodeFlags(), 'dist/launch.cjs', 'serve']);
  });
});

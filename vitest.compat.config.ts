import { defineConfig } from 'vitest/config';

// The workers inherit it: the server sizes its engine threads from libuv's pool, as cotwire's CLI sets it.
process.env.UV_THREADPOOL_SIZE ??= '64';

/** The client compatibility suite: real clients against cotwire and against a real PostgreSQL (see test/compat). */
export default defineConfig({
  test: {
    include: ['test/compat/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 1,
  },
});

import { defineConfig } from 'vitest/config';

/** The client compatibility suite: real clients against cotwire and against a real PostgreSQL (see test/compat). */
export default defineConfig({
  test: {
    include: ['test/compat/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 1,
  },
});

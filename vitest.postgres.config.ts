import { defineConfig } from 'vitest/config';

process.env.UV_THREADPOOL_SIZE ??= '64';

/**
 * cotwire on a PostgreSQL engine (engine.kind: postgres): its own tests in
 * test/postgres, each starting a throwaway PostgreSQL (Debian's
 * `postgresql`), as the benchmark does.
 */
export default defineConfig({
  test: {
    include: ['test/postgres/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
  },
});

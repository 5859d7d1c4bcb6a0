import { defineConfig } from 'vitest/config';

// The workers inherit it: the server sizes its engine threads from libuv's pool, as cotwire's CLI sets it.
process.env.UV_THREADPOOL_SIZE ??= '64';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The compatibility suite needs a PostgreSQL server and real clients: npm run test:compat; the PostgreSQL engine's, npm run test:postgres.
    exclude: ['test/compat/**', 'test/postgres/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests each start a server with its own DuckDB; two cores do not gain from more workers.
    maxWorkers: 2,
    benchmark: { include: ['bench/**/*.bench.ts'] },
  },
});

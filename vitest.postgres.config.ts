import { defineConfig } from 'vitest/config';

process.env.UV_THREADPOOL_SIZE ??= '64';

/**
 * cotwire on a PostgreSQL engine (engine.kind: postgres): its own tests in
 * test/postgres, and the integration suites of the wire, roles, COPY,
 * transactions and MCP run again with COTWIRE_TEST_ENGINE=postgres, each
 * server on a throwaway PostgreSQL (Debian's `postgresql`), as the benchmark
 * starts one.
 */
export default defineConfig({
  test: {
    include: ['test/postgres/**/*.test.ts', 'test/integration/{extended,clients,roles,copy,transactions,mcp}.test.ts', 'test/conformance/**/*.test.ts'],
    env: { COTWIRE_TEST_ENGINE: 'postgres' },
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
  },
});

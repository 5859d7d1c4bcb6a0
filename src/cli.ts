#!/usr/bin/env node
// DuckDB runs each query on libuv's thread pool. Its default of 4 threads
// would let four long queries stall every other connection, so the pool is
// sized before anything can start it; hence this file imports nothing else
// statically.
process.env.UV_THREADPOOL_SIZE ??= '64';
const { main } = await import('./cli/main.js');
process.exitCode = await main(process.argv.slice(2));

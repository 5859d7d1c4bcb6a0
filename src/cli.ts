#!/usr/bin/env node
// DuckDB runs each query on libuv's thread pool. Its default of 4 threads
// would let four long queries stall every other connection, so the pool is
// sized before anything can start it; hence this file imports nothing else
// statically.
process.env.UV_THREADPOOL_SIZE ??= '64';
// Output piped into `head` is closed early; that is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});
const { main } = await import('./cli/main.js');
process.exitCode = await main(process.argv.slice(2));

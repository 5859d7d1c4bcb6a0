#!/usr/bin/env node
// The command's entry, in CommonJS on purpose. DuckDB runs each query on one
// of libuv's threads, and libuv sizes its pool once, at its first use, from
// UV_THREADPOOL_SIZE (4 by default: four statements that the engine cannot
// interrupt, such as a constant folded while preparing, would hold every
// thread and stall every other connection). An ES module entry is read by
// Node's loader through that very pool, before its first line runs; a
// CommonJS one is read synchronously, so the size set here is the one the
// pool starts with.
process.env.UV_THREADPOOL_SIZE ??= '64';
void import('./cli.js');

#!/usr/bin/env node
// launch.cts sizes libuv's thread pool before this module is loaded (as an
// ES module, this file is itself read through that pool). Set here too for
// `node dist/cli.js`, where it only helps if nothing started the pool yet.
process.env.UV_THREADPOOL_SIZE ??= '64';
// Output piped into `head` is closed early; that is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});
const { main } = await import('./cli/main.js');
process.exitCode = await main(process.argv.slice(2));

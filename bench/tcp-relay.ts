import { connect, createServer } from 'node:net';

/**
 * A bare TCP relay in front of PostgreSQL, in a process of its own, as
 * cotwire is: what any proxy's second hop costs on this machine, with
 * nothing done to the bytes. Prints its port.
 */
const target = Number(process.argv[2]);
const server = createServer((client) => {
  const backend = connect(target, '127.0.0.1');
  client.setNoDelay(true);
  backend.setNoDelay(true);
  client.pipe(backend);
  backend.pipe(client);
  client.on('error', () => backend.destroy());
  backend.on('error', () => client.destroy());
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(typeof address === 'object' && address !== null ? address.port : 0);
});

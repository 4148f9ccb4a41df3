// Ports for what the tests and benchmarks start themselves.
import net from 'node:net';

/** A port nothing listens on now, as the kernel picks one: a random one may be a connection's or another service's. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

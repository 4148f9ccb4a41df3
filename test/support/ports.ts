// Ports for what the tests and benchmarks start themselves.
import net from 'node:net';

/**
 * Each process takes its ports from a block of its own below the kernel's ephemeral range (from
 * 32768 on Linux): a port the kernel picked for `listen(0)` was free when picked, but between its
 * close and the process that binds it later, another test file running in parallel could be given
 * the same one. Outside the ephemeral range the kernel hands none of these out, and each jest
 * worker (`JEST_WORKER_ID`; 0 for the main process and the benchmarks) has its own block.
 */
const blockSize = 500;
const blocks = 24;
const firstPort = 20_000 + (Number(process.env.JEST_WORKER_ID ?? 0) % blocks) * blockSize;
let nextPort = firstPort;

function listensNot(port: number): Promise<boolean> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port nothing listens on now, from this process's block (another service's, if any, skipped). */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < blockSize; tried++) {
    const port = nextPort;
    nextPort = nextPort + 1 < firstPort + blockSize ? nextPort + 1 : firstPort;
    if (await listensNot(port)) return port;
  }
  throw new Error(`no free port in ${firstPort}–${firstPort + blockSize - 1}`);
}

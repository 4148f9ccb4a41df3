// A TCP proxy in front of a server (Postgres, a provider simulator) that a test can cut (every
// connection closed, new ones refused) and restore: an outage without touching the server. Or it
// can blackhole: connections stay open and carry nothing, either way, like a peer that went
// silent or a half-open link whose far end vanished; restore() lets new connections through
// again while the blackholed ones stay hung, as they would after a network partition, until close().
// It also counts the conversation's turns: one starts each time a client speaks after the server
// has answered, so statements written at once are one turn however TCP splits them (round trips).
import net from 'node:net';

export type TcpProxy = {
  /** The target's URL with the proxy's host and port (no trailing slash is added to a bare origin). */
  url: string;
  port: number;
  /** Round trips so far, over every connection. */
  turns(): number;
  cut(): Promise<void>;
  blackhole(): void;
  restore(): Promise<void>;
  close(): Promise<void>;
};

type Pair = { client: net.Socket; upstream: net.Socket | null; hung: boolean };

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const pairs = new Set<Pair>();
  let silent = false;
  let turns = 0;
  let serverSpoke = true;

  // Silence: stop forwarding, swallow what arrives, and never pass a close on to the other side.
  const hang = (pair: Pair) => {
    pair.hung = true;
    pair.client.unpipe();
    pair.upstream?.unpipe();
    for (const socket of [pair.client, pair.upstream]) socket?.on('data', () => undefined);
  };
  const server = net.createServer((client) => {
    const pair: Pair = { client, upstream: null, hung: false };
    pairs.add(pair);
    client.on('error', () => client.destroy());
    client.on('close', () => {
      if (!pair.hung) pair.upstream?.destroy();
      if (pair.upstream === null || pair.upstream.destroyed) pairs.delete(pair);
    });
    if (silent) {
      hang(pair);
      return;
    }
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    pair.upstream = upstream;
    upstream.on('error', () => upstream.destroy());
    upstream.on('close', () => {
      if (!pair.hung) client.destroy();
      if (client.destroyed) pairs.delete(pair);
    });
    client.pipe(upstream).pipe(client);
    client.on('data', () => {
      if (serverSpoke) turns++;
      serverSpoke = false;
    });
    upstream.on('data', () => (serverSpoke = true));
  });
  // A port taken meanwhile (restore() listens on the same one again) fails the test instead of hanging it.
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  const destroyAll = () => {
    for (const pair of pairs) {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
    pairs.clear();
  };
  const stop = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    destroyAll();
    await closed;
  };
  const text = url.toString();
  return {
    url: target.pathname === '/' && !targetUrl.endsWith('/') ? text.replace(/\/$/, '') : text,
    port,
    turns: () => turns,
    cut: async () => {
      silent = false;
      if (server.listening) await stop();
    },
    blackhole: () => {
      silent = true;
      for (const pair of pairs) hang(pair);
    },
    restore: async () => {
      silent = false;
      if (!server.listening) await listen(port);
    },
    close: async () => {
      silent = false;
      if (server.listening) await stop();
      else destroyAll();
    },
  };
}

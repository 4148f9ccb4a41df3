// A simulator's provider side: the TLS HTTP/2 server a provider client connects to, with a throwaway
// certificate, answering each push after the latency set and recording it. Requests to /__sim/ go to
// the control side (control.ts).
import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Answer, Latency, ProviderHandler, SimRequest, SimResponse } from './common.ts';
import { answerControl, type Recording } from './control.ts';

/** Bodies larger than this are cut off: both providers refuse far smaller ones. */
const maxBodyBytes = 1024 * 1024;

export type Certificate = { private: string; cert: string };

/** A self-signed CA certificate for `host`, also valid for localhost. */
export async function selfSignedCertificate(name: string, host: string): Promise<Certificate> {
  // A subject of its own: OpenSSL finds trust anchors by subject name, so two simulators' certificates
  // with the same subject in one CA file (HERALD_PROVIDER_CA_FILE) would hide each other.
  // Imported here: the library and its X.509 stack are memory for simulators only, and
  // every `herald` command loads this module.
  const { generate } = await import('selfsigned');
  return generate([{ name: 'commonName', value: `Herald ${name} simulator ${randomBytes(6).toString('hex')}` }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
          ...(host === '127.0.0.1' || host === 'localhost' || host === '::1' || host === '0.0.0.0' ? [] : [altName(host)]),
        ],
      },
    ],
  });
}

function altName(host: string): { type: 2; value: string } | { type: 7; ip: string } {
  return /^[\d.]+$/.test(host) || host.includes(':') ? { type: 7, ip: host } : { type: 2, value: host };
}

export type ProviderServer = {
  port: number;
  /** Ends every HTTP/2 connection with a GOAWAY, as a provider does with one it has kept long enough. */
  closeSessions(): void;
  /**
   * Cuts every HTTP/2 connection at once, unanswered streams and all, as a network fault does;
   * answers how many push requests were still unanswered then.
   */
  resetSessions(): number;
  stop(): Promise<void>;
};

/** Listens on `host`:`port` (0: an ephemeral port) until stop(). */
export async function startProviderServer<Received>(
  certificate: Certificate,
  host: string,
  port: number,
  recording: Recording<Received>,
  handle: ProviderHandler<Received>,
): Promise<ProviderServer> {
  const server = http2.createSecureServer({
    key: certificate.private,
    cert: certificate.cert,
    // Plain HTTPS clients reach /__sim and FCM's /token; providers speak HTTP/2.
    allowHTTP1: true,
    // Apple's streams per connection (Herald's FCM client keeps to 100 a connection by itself).
    settings: { maxConcurrentStreams: 1000 },
    // Node's 10 MB default makes a busy session fail with ENHANCE_YOUR_CALM long before Apple would.
    maxSessionMemory: 256,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    recording.counters.sessions += 1;
    sessions.add(session);
    recording.counters.openSessions = sessions.size;
    session.once('close', () => {
      sessions.delete(session);
      recording.counters.openSessions = sessions.size;
    });
    // A client that vanishes must not crash the simulator.
    session.on('error', () => undefined);
  });
  const sockets = trackSockets(server);
  server.on('secureConnection', () => {
    recording.counters.connections += 1;
  });
  const resetSessions = () => {
    const unanswered = recording.inFlight;
    for (const session of sessions) session.destroy();
    return unanswered;
  };
  server.on('request', (request: SimRequest, response: SimResponse) => onRequest(request, response, recording, handle, resetSessions));
  await listen(server, port, host);
  return {
    port: (server.address() as AddressInfo).port,
    closeSessions: () => {
      for (const session of sessions) session.close();
    },
    resetSessions,
    stop: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

/** The open connections, HTTP/2 or HTTP/1.1 keep-alive: stop() ends them rather than wait for clients to leave. */
function trackSockets(server: http2.Http2SecureServer): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  return sockets;
}

function listen(server: http2.Http2SecureServer, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function onRequest<Received>(
  request: SimRequest,
  response: SimResponse,
  recording: Recording<Received>,
  handle: ProviderHandler<Received>,
  resetSessions: () => number,
) {
  // A client that resets a stream (timeout, shutdown) must not crash the simulator.
  response.on('error', () => undefined);
  request.on('error', () => undefined);
  void (async () => {
    const body = await readBody(request);
    const path = request.url.split('?')[0];
    if (path.startsWith('/__sim/')) return reply(response, answerControl(path, request.method, body, recording, resetSessions));
    await answerPush(request, body, response, recording, handle);
  })().catch(() => {
    if (!response.headersSent && !response.destroyed) reply(response, { status: 500, body: { reason: 'InternalServerError' } });
  });
}

async function answerPush<Received>(
  request: SimRequest,
  body: Buffer,
  response: SimResponse,
  recording: Recording<Received>,
  handle: ProviderHandler<Received>,
): Promise<void> {
  const { counters } = recording;
  recording.inFlight += 1;
  counters.maxInFlight = Math.max(counters.maxInFlight, recording.inFlight);
  // An answer held back (the latency) ends with its stream: the client gave up on it, or stop()
  // ended the connection. Its timer then goes too, and never keeps a process alive past stop().
  const held = new AbortController();
  response.once('close', () => {
    recording.inFlight -= 1;
    held.abort();
  });
  const result = await handle(request, body, recording.state);
  if (!result) return reply(response, { status: 404, body: { reason: 'BadPath' } });
  // Only pushes are counted and recorded: not FCM's /token.
  if (result.received !== undefined) {
    counters.requests += 1;
    counters.byStatus[result.answer.status] = (counters.byStatus[result.answer.status] ?? 0) + 1;
    if (recording.keep && recording.received.length < recording.limit) recording.received.push(result.received);
    else counters.unrecorded += 1;
  }
  await delay(recording.state.latency, held.signal);
  reply(response, result.answer);
}

function reply(response: SimResponse, answer: Answer): void {
  if (response.destroyed || response.headersSent) return;
  const headers: Record<string, string> = { ...answer.headers };
  let payload: string | undefined;
  if (answer.body !== undefined) {
    payload = JSON.stringify(answer.body);
    headers['content-type'] = 'application/json; charset=utf-8';
  }
  response.writeHead(answer.status, headers);
  if (payload === undefined) response.end();
  else response.end(payload);
}

async function readBody(request: SimRequest): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBodyBytes) break;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Resolves after the latency, or at once when `signal` aborts (reply() then finds the stream gone). */
async function delay(latency: Latency | undefined, signal: AbortSignal): Promise<void> {
  if (latency === undefined) return;
  const ms = typeof latency === 'number' ? latency : latency.min + Math.random() * (latency.max - latency.min);
  if (ms > 0) await sleep(ms, undefined, { signal }).catch(() => undefined);
}

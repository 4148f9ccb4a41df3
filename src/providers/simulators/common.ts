// What the APNs and FCM simulators share: a TLS HTTP/2 server with a throwaway certificate, failure
// rules, latency, a bounded record of what was received, and the /__sim control endpoints that let
// another process (a test, the benchmark) read and steer a simulator it did not start.
import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import type { IncomingHttpHeaders } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { generate } from 'selfsigned';

/**
 * Makes matching requests fail. A rule matches when the device token starts with `prefix` (every
 * token when unset), then only for a `rate` fraction of those requests (all when unset).
 * The first matching rule wins.
 */
export type FailureRule = {
  prefix?: string;
  rate?: number;
  /** The provider's error: an APNs `reason` (`Unregistered`) or an FCM error code (`UNREGISTERED`). */
  reason: string;
  /** Defaults to the status the provider answers with for `reason`. */
  status?: number;
  /** Seconds, answered as `Retry-After`. */
  retryAfter?: number;
  /** APNs 410: when the token stopped being valid (ms since epoch); default: the time of the request. */
  timestamp?: number;
  /** FCM: the error's message; default: Google's usual one for `reason`. */
  message?: string;
};

/** Milliseconds before answering: fixed, or uniform in [min, max]. */
export type Latency = number | { min: number; max: number };

export type SimulatorCounters = {
  /** Push requests answered (control endpoints and FCM's /token excluded). */
  requests: number;
  /** HTTP status → count. */
  byStatus: Record<string, number>;
  /** HTTP/2 connections opened by clients: a long-lived client opens one, or a few. */
  sessions: number;
  /** Requests answered but not kept in `received` (recording off, or past `recordLimit`). */
  unrecorded: number;
  /** Most requests being handled at once: how hard clients push on their connections. */
  maxInFlight: number;
};

export type SimulatorOptions = {
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 (default): an ephemeral port. */
  port?: number;
  rules?: FailureRule[];
  latency?: Latency;
  /** false: keep only counters (benchmarks). Default true. */
  record?: boolean;
  /** At most this many requests are kept; later ones are only counted. Default 100,000. */
  recordLimit?: number;
};

export type RunningSimulator<Received> = {
  /** e.g. `https://127.0.0.1:40123`. */
  url: string;
  port: number;
  /** PEM of the simulator's self-signed certificate: the CA a client must trust. */
  ca: string;
  /** What the simulator received, oldest first; emptied in place by `clear()`. */
  received: Received[];
  counters: SimulatorCounters;
  setRules(rules: FailureRule[]): void;
  setLatency(latency: Latency | undefined): void;
  clear(): void;
  stop(): Promise<void>;
};

export type SimRequest = http2.Http2ServerRequest;
export type SimResponse = http2.Http2ServerResponse;

/** One provider request's answer, recorded and counted by the shared core. */
export type Answer = { status: number; headers?: Record<string, string>; body?: unknown };

export type SimulatorState = {
  rules: FailureRule[];
  latency: Latency | undefined;
};

export type ProviderHandler<Received> = (
  request: SimRequest,
  body: Buffer,
  state: SimulatorState,
) => Promise<{ answer: Answer; received?: Received } | undefined>;

/** Bodies larger than this are cut off: both providers refuse far smaller ones. */
const maxBodyBytes = 1024 * 1024;

export async function startSimulator<Received>(
  name: string,
  options: SimulatorOptions,
  handle: ProviderHandler<Received>,
): Promise<RunningSimulator<Received>> {
  const host = options.host ?? '127.0.0.1';
  // A subject of its own: OpenSSL finds trust anchors by subject name, so two simulators' certificates
  // with the same subject in one CA file (HERALD_PROVIDER_CA_FILE) would hide each other.
  const pems = await generate([{ name: 'commonName', value: `Herald ${name} simulator ${randomBytes(6).toString('hex')}` }], {
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

  const state: SimulatorState = { rules: [...(options.rules ?? [])], latency: options.latency };
  const recording = options.record !== false;
  const recordLimit = options.recordLimit ?? 100_000;
  const received: Received[] = [];
  const counters: SimulatorCounters = { requests: 0, byStatus: {}, sessions: 0, unrecorded: 0, maxInFlight: 0 };
  let inFlight = 0;
  const sockets = new Set<Socket>();

  const server = http2.createSecureServer({
    key: pems.private,
    cert: pems.cert,
    // Plain HTTPS clients reach /__sim and FCM's /token; providers speak HTTP/2.
    allowHTTP1: true,
    // Apple's streams per connection (FCM allows 100, which firebase-admin keeps to by itself).
    settings: { maxConcurrentStreams: 1000 },
    // Node's 10 MB default makes a busy session fail with ENHANCE_YOUR_CALM long before Apple would.
    maxSessionMemory: 256,
  });
  server.on('session', (session) => {
    counters.sessions += 1;
    // A client that vanishes must not crash the simulator.
    session.on('error', () => undefined);
  });
  // stop() ends every connection, HTTP/2 or HTTP/1.1 keep-alive, rather than wait for clients to leave.
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  const clear = () => {
    received.length = 0;
    counters.requests = 0;
    counters.byStatus = {};
    counters.unrecorded = 0;
    counters.maxInFlight = inFlight;
  };

  server.on('request', (request: SimRequest, response: SimResponse) => {
    // A client that resets a stream (timeout, shutdown) must not crash the simulator.
    response.on('error', () => undefined);
    request.on('error', () => undefined);
    void (async () => {
      const body = await readBody(request);
      const path = request.url.split('?')[0];
      if (path.startsWith('/__sim/')) {
        return control(path, request.method, body, response);
      }
      inFlight += 1;
      counters.maxInFlight = Math.max(counters.maxInFlight, inFlight);
      response.once('close', () => {
        inFlight -= 1;
      });
      const result = await handle(request, body, state);
      if (!result) return reply(response, { status: 404, body: { reason: 'BadPath' } });
      // Only pushes are counted and recorded: not FCM's /token.
      if (result.received !== undefined) {
        counters.requests += 1;
        counters.byStatus[result.answer.status] = (counters.byStatus[result.answer.status] ?? 0) + 1;
        if (recording && received.length < recordLimit) received.push(result.received);
        else counters.unrecorded += 1;
      }
      await delay(state.latency);
      reply(response, result.answer);
    })().catch(() => {
      if (!response.headersSent && !response.destroyed) reply(response, { status: 500, body: { reason: 'InternalServerError' } });
    });
  });

  function control(path: string, method: string, body: Buffer, response: SimResponse): void {
    if (path === '/__sim/received' && method === 'GET') {
      return reply(response, { status: 200, body: { counters, received } });
    }
    if (path === '/__sim/received' && method === 'DELETE') {
      clear();
      return reply(response, { status: 204 });
    }
    if (path === '/__sim/rules' && method === 'PUT') {
      const parsed = parseControlBody(body);
      if (typeof parsed === 'string') return reply(response, { status: 400, body: { error: parsed } });
      if (parsed.rules) state.rules = parsed.rules;
      if (parsed.latency !== undefined) state.latency = parsed.latency ?? undefined;
      return reply(response, { status: 204 });
    }
    return reply(response, { status: 404, body: { error: 'unknown control endpoint' } });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;

  return {
    url: `https://${urlHost}:${port}`,
    port,
    // Ends with a newline, so that PEMs concatenated into one CA file stay parseable.
    ca: pems.cert.endsWith('\n') ? pems.cert : `${pems.cert}\n`,
    received,
    counters,
    setRules: (rules) => {
      state.rules = [...rules];
    },
    setLatency: (latency) => {
      state.latency = latency;
    },
    clear,
    stop: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

function altName(host: string): { type: 2; value: string } | { type: 7; ip: string } {
  return /^[\d.]+$/.test(host) || host.includes(':') ? { type: 7, ip: host } : { type: 2, value: host };
}

export function reply(response: SimResponse, answer: Answer): void {
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

function parseControlBody(body: Buffer): { rules?: FailureRule[]; latency?: Latency | null } | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return 'the body must be JSON: {"rules": [...], "latency": ms | {"min", "max"} | null}';
  }
  const value = Array.isArray(parsed) ? { rules: parsed } : parsed;
  if (typeof value !== 'object' || value === null) return 'the body must be an object or an array of rules';
  const { rules, latency } = value as { rules?: unknown; latency?: unknown };
  if (rules !== undefined && !(Array.isArray(rules) && rules.every(isRule))) {
    return 'rules must be an array of {reason, prefix?, rate?, status?, retryAfter?, timestamp?, message?}';
  }
  if (latency !== undefined && latency !== null && !isLatency(latency)) {
    return 'latency must be a number of milliseconds or {min, max}';
  }
  return { rules: rules as FailureRule[] | undefined, latency: latency as Latency | null | undefined };
}

function isRule(value: unknown): value is FailureRule {
  if (typeof value !== 'object' || value === null) return false;
  const rule = value as Record<string, unknown>;
  const optional = (key: string, type: 'string' | 'number') => rule[key] === undefined || typeof rule[key] === type;
  return (
    typeof rule.reason === 'string' &&
    optional('prefix', 'string') &&
    optional('rate', 'number') &&
    optional('status', 'number') &&
    optional('retryAfter', 'number') &&
    optional('timestamp', 'number') &&
    optional('message', 'string')
  );
}

function isLatency(value: unknown): value is Latency {
  if (typeof value === 'number') return value >= 0;
  if (typeof value !== 'object' || value === null) return false;
  const { min, max } = value as { min?: unknown; max?: unknown };
  return typeof min === 'number' && typeof max === 'number' && min >= 0 && max >= min;
}

/** The first rule that applies to this token on this request, if any. */
export function matchRule(rules: FailureRule[], token: string): FailureRule | undefined {
  return rules.find(
    (rule) => (rule.prefix === undefined || token.startsWith(rule.prefix)) && (rule.rate === undefined || Math.random() < rule.rate),
  );
}

async function delay(latency: Latency | undefined): Promise<void> {
  if (latency === undefined) return;
  const ms = typeof latency === 'number' ? latency : latency.min + Math.random() * (latency.max - latency.min);
  if (ms > 0) await sleep(ms);
}

export function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function base64UrlJson(segment: string): unknown {
  return JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

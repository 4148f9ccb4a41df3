// What the APNs and FCM simulators share: a TLS HTTP/2 server with a throwaway certificate that
// answers pushes (server.ts), failure rules, latency, a bounded record of what was received, and
// the control side that reads and steers them, in-process or over the /__sim endpoints from another
// process (a test, the benchmark) that did not start the simulator (control.ts).
import type http2 from 'node:http2';
import type { IncomingHttpHeaders } from 'node:http2';
import { createRecording, inProcessControls } from './control.ts';
import { selfSignedCertificate, startProviderServer } from './server.ts';

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
  /** HTTP/2 connections open now. */
  openSessions: number;
  /** TLS connections accepted, HTTP/2 or HTTP/1.1 (Web Push clients keep HTTP/1.1 connections alive). */
  connections: number;
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
  /** Ends every HTTP/2 connection with a GOAWAY (in-process only). */
  closeSessions(): void;
  /** Cuts every HTTP/2 connection, unanswered streams and all; answers how many pushes were unanswered (DELETE /__sim/connections from another process). */
  resetSessions(): number;
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

export async function startSimulator<Received>(
  name: string,
  options: SimulatorOptions,
  handle: ProviderHandler<Received>,
): Promise<RunningSimulator<Received>> {
  const host = options.host ?? '127.0.0.1';
  const certificate = await selfSignedCertificate(name, host);
  const recording = createRecording<Received>(options);
  const server = await startProviderServer(certificate, host, options.port ?? 0, recording, handle);
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  return {
    url: `https://${urlHost}:${server.port}`,
    port: server.port,
    // Ends with a newline, so that PEMs concatenated into one CA file stay parseable.
    ca: certificate.cert.endsWith('\n') ? certificate.cert : `${certificate.cert}\n`,
    ...inProcessControls(recording),
    closeSessions: server.closeSessions,
    resetSessions: server.resetSessions,
    stop: server.stop,
  };
}

/** The first rule that applies to this token on this request, if any. */
export function matchRule(rules: FailureRule[], token: string): FailureRule | undefined {
  return rules.find(
    (rule) => (rule.prefix === undefined || token.startsWith(rule.prefix)) && (rule.rate === undefined || Math.random() < rule.rate),
  );
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

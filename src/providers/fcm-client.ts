// FCM's HTTP v1 send is one HTTP/2 POST per message. This client sends them on a few connections
// kept between sends: each carries at most the streams its peer allows, a message waits for a free
// stream rather than opening a connection per batch, and each message can be given up on its own
// (a signal) while the others keep their answers. A connection is dropped when FCM ends it (GOAWAY)
// or it fails, and closed after a while with nothing in flight; idle, it does not keep the process
// alive.
import http2 from 'node:http2';

/** FCM's answer to one message, whatever its status. */
export type FcmAnswer = { status: number; headers: http2.IncomingHttpHeaders; body: string };

export type FcmClientOptions = {
  /** Where FCM is, e.g. a simulator's `https://127.0.0.1:2198`; Google's by default. */
  endpoint?: string;
  /** PEM of a CA to trust for `endpoint` (a simulator's self-signed certificate). */
  ca?: string;
  projectId: string;
  /** Connections open at most. */
  maxSessions?: number;
  /** Streams a connection carries at most, if its peer allows as many. */
  maxStreamsPerSession?: number;
  /** How long a connection with nothing in flight stays open. */
  idleMs?: number;
  /** How long a message may go without a byte of its answer before it is given up. */
  requestTimeoutMs?: number;
};

export type FcmClient = {
  /**
   * POSTs `body` (`{"message": …}`) with the OAuth access token. Resolves with FCM's answer;
   * rejects when there is none: the connection failed, or `signal` aborted or the request timed
   * out first (an error whose code is ETIMEDOUT).
   */
  send(body: string, accessToken: string, signal?: AbortSignal): Promise<FcmAnswer>;
  /** Closes every connection once the messages in flight on it are answered. */
  close(): void;
};

const googleEndpoint = 'https://fcm.googleapis.com';
const { NGHTTP2_CANCEL } = http2.constants;

type Kept = { session: http2.ClientHttp2Session; active: number; usable: boolean; idle?: NodeJS.Timeout };

export function timeoutError(message: string): Error {
  return Object.assign(new Error(message), { code: 'ETIMEDOUT' });
}

// One closure: its connections and the messages waiting for a stream are the state its short
// inner functions share.
export function createFcmClient(options: FcmClientOptions): FcmClient {
  const origin = new URL(options.endpoint ?? googleEndpoint).origin;
  const path = `/v1/projects/${encodeURIComponent(options.projectId)}/messages:send`;
  const maxSessions = options.maxSessions ?? 4;
  const maxStreams = options.maxStreamsPerSession ?? 100;
  const idleMs = options.idleMs ?? 30_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
  const kept: Kept[] = [];
  /** Messages waiting for a stream, first come first served. */
  const waiting: (() => void)[] = [];
  let closed = false;

  // Until its SETTINGS arrive, Node assumes the peer allows 100 streams.
  const capacity = (entry: Kept) => Math.min(maxStreams, entry.session.remoteSettings.maxConcurrentStreams ?? maxStreams);

  function retire(entry: Kept): void {
    if (!entry.usable) return;
    entry.usable = false;
    clearTimeout(entry.idle);
    kept.splice(kept.indexOf(entry), 1);
    if (entry.active === 0 && !entry.session.closed) entry.session.close();
    // A waiting message may now open a connection of its own.
    wakeNext();
  }

  function open(): Kept {
    // The CA is the simulator's: given to Google's host it would replace the system's CAs.
    const session = http2.connect(origin, options.endpoint && options.ca ? { ca: options.ca } : {});
    const entry: Kept = { session, active: 0, usable: true };
    // Without a listener, an error on an idle connection would be uncaught.
    session.on('error', () => retire(entry));
    session.on('goaway', () => retire(entry));
    session.once('close', () => retire(entry));
    kept.push(entry);
    return entry;
  }

  function take(): Kept | undefined {
    const free = kept.find((entry) => entry.active < capacity(entry));
    if (free) return free;
    return kept.length < maxSessions ? open() : undefined;
  }

  function wakeNext(): void {
    waiting.shift()?.();
  }

  async function acquire(signal?: AbortSignal): Promise<Kept> {
    for (;;) {
      if (closed) throw Object.assign(new Error('FCM client closed'), { code: 'ECONNABORTED' });
      signal?.throwIfAborted();
      const entry = take();
      if (entry) {
        entry.active += 1;
        clearTimeout(entry.idle);
        entry.session.ref();
        return entry;
      }
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          const index = waiting.indexOf(wake);
          if (index >= 0) waiting.splice(index, 1);
          reject(signal?.reason);
        };
        const wake = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        waiting.push(wake);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
  }

  function release(entry: Kept): void {
    entry.active -= 1;
    if (!entry.usable) {
      if (entry.active === 0 && !entry.session.closed) entry.session.close();
    } else if (entry.active === 0) {
      entry.session.unref();
      entry.idle = setTimeout(() => retire(entry), idleMs).unref();
    }
    wakeNext();
  }

  return {
    async send(body, accessToken, signal) {
      const entry = await acquire(signal);
      try {
        return await post(entry.session, { path, body, accessToken, timeoutMs: requestTimeoutMs }, signal);
      } finally {
        release(entry);
      }
    },
    close() {
      closed = true;
      for (const entry of [...kept]) {
        retire(entry);
        if (!entry.session.closed) entry.session.close();
      }
      for (const wake of waiting.splice(0)) wake();
    },
  };
}

/** One message on `session`: FCM's answer, or a rejection when there is none in time. */
function post(
  session: http2.ClientHttp2Session,
  message: { path: string; body: string; accessToken: string; timeoutMs: number },
  signal?: AbortSignal,
): Promise<FcmAnswer> {
  const { path, body, accessToken, timeoutMs } = message;
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      authorization: `Bearer ${accessToken}`,
      'content-type': 'application/json; charset=utf-8',
    });
    let status = 0;
    let headers: http2.IncomingHttpHeaders = {};
    let text = '';
    let settled = false;
    const settle = (error?: unknown) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (error === undefined) resolve({ status, headers, body: text });
      else {
        if (!stream.closed) stream.close(NGHTTP2_CANCEL);
        reject(error);
      }
    };
    const onAbort = () => settle(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    stream.setEncoding('utf8');
    stream.setTimeout(timeoutMs, () => settle(timeoutError('FCM did not answer in time')));
    stream.on('response', (answer) => {
      status = Number(answer[':status']);
      headers = answer;
    });
    stream.on('data', (chunk: string) => (text += chunk));
    // A stream its connection takes down may end or close without an error: it failed all the same.
    // (Made only then: every stream closes, and an error's stack costs more than the rest of a push.)
    const lost = () => Object.assign(new Error('FCM connection closed before it answered'), { code: 'ECONNRESET' });
    stream.on('end', () => settle(status === 0 ? lost() : undefined));
    stream.on('error', settle);
    stream.on('close', () => settled || settle(lost()));
    stream.end(body);
  });
}

// One webhook request: a POST to the endpoint's URL with Node's own http/https clients, bounded in
// time, never following a redirect, reading no more of the answer than an excerpt. Unless private
// addresses are allowed, every address it connects to is checked (providers/address-guard.ts, which
// Web Push shares).
import http from 'node:http';
import https from 'node:https';
import { AddressRefused, guardedLookup, literalRefusal } from '../providers/address-guard.ts';

export type WebhookAnswer = {
  ok: boolean;
  /** The answer's HTTP status; null when there was none. */
  statusCode: number | null;
  /** Why it failed; null when it succeeded. */
  error: string | null;
  /** The first characters of the answer's body. */
  excerpt: string | null;
};

export type WebhookSender = {
  post(url: string, body: string, headers: Record<string, string>): Promise<WebhookAnswer>;
  close(): void;
};

/** Characters of an answer's body kept (the delivery log's `response_excerpt`). */
export const excerptLength = 200;
// Bytes read at most: enough for the excerpt whatever the encoding; more is not waited for.
const readLimit = 4 * excerptLength;
// Connections per endpoint host per process; requests beyond wait for one.
const socketsPerHost = 10;

/** What a failed request says in the delivery log: never a stack, and the code where there is one. */
function describeError(error: Error & { code?: string }, timeoutMs: number): string {
  if (error instanceof AddressRefused) return error.message;
  switch (error.code) {
    case 'ETIMEDOUT_WEBHOOK':
      return `timeout after ${timeoutMs / 1000} s`;
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    case 'ENOTFOUND':
      return 'host not found';
    case 'EAI_AGAIN':
      return 'DNS lookup failed';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    default:
      return error.code?.startsWith('ERR_TLS') || error.code?.includes('CERT') ? `TLS: ${error.code}` : (error.code ?? error.message);
  }
}

const printable = (text: string) => text.replace(/\p{Cc}+/gu, ' ').trim();

export function createWebhookSender(options: { allowPrivate: boolean; timeoutMs: number }): WebhookSender {
  const lookup = options.allowPrivate ? undefined : guardedLookup();
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: socketsPerHost, lookup }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: socketsPerHost, lookup }),
  };
  return {
    post(url, body, headers) {
      const target = new URL(url);
      const refused = options.allowPrivate ? null : literalRefusal(target);
      if (refused) return Promise.resolve({ ok: false, statusCode: null, error: refused, excerpt: null });
      const protocol = target.protocol === 'https:' ? 'https:' : 'http:';
      return new Promise<WebhookAnswer>((resolve) => {
        let settled = false;
        const settle = (answer: WebhookAnswer) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(answer);
        };
        const request = (protocol === 'https:' ? https : http).request(target, {
          method: 'POST',
          agent: agents[protocol],
          headers: { ...headers, 'Content-Length': Buffer.byteLength(body) },
        });
        // The whole exchange, answer included, within the deadline.
        const timer = setTimeout(() => request.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT_WEBHOOK' })), options.timeoutMs);
        request.on('error', (error) => settle({ ok: false, statusCode: null, error: describeError(error, options.timeoutMs), excerpt: null }));
        request.on('response', (response) => {
          const status = response.statusCode ?? 0;
          const chunks: Buffer[] = [];
          let read = 0;
          const done = () => {
            const text = printable(Buffer.concat(chunks).toString('utf8')).slice(0, excerptLength);
            const ok = status >= 200 && status < 300;
            const error = ok ? null : status >= 300 && status < 400 ? `redirect not followed (HTTP ${status})` : `HTTP ${status}`;
            settle({ ok, statusCode: status, error, excerpt: text || null });
          };
          response.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            read += chunk.length;
            // Enough for the excerpt: the rest is not read (and the connection not reused).
            if (read >= readLimit) {
              done();
              response.destroy();
            }
          });
          response.on('end', done);
          response.on('error', done);
        });
        request.end(body);
      });
    },
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}

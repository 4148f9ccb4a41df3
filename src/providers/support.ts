// Small pieces both providers use.
import type { PushContent, PushIds } from '../domain/payloads.ts';
import type { Push, PushOutcome, PushProvider } from './provider.ts';

/**
 * What `build` makes of a push's content and ids, with `build(content)` run once per distinct
 * content: the pushes of a batch share their notification's content object, so its payload is
 * prepared once per batch instead of once per push.
 */
export function perContent<T>(build: (content: PushContent) => (ids: PushIds) => T): (push: Push) => T {
  const builders = new Map<PushContent, (ids: PushIds) => T>();
  return (push) => {
    let builder = builders.get(push.content);
    if (!builder) builders.set(push.content, (builder = build(push.content)));
    return builder(push);
  };
}

/**
 * At most `limit` calls of the returned function run at once, across all its callers: a provider
 * is shared by concurrent deliver jobs, and the cap protects its connection, not one batch.
 */
export function createLimiter(limit: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async (fn) => {
    if (active < limit) active += 1;
    // A finishing call hands its slot straight to the next waiter, so `active` never overshoots.
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else active -= 1;
    }
  };
}

/** Counts by kind, for one log line per batch (never tokens). */
export function summarize(outcomes: PushOutcome[]): Record<PushOutcome['kind'], number> {
  const counts = { accepted: 0, invalid_token: 0, rejected: 0, credentials: 0, transient: 0 };
  for (const outcome of outcomes) counts[outcome.kind] += 1;
  return counts;
}

/** A provider whose credentials cannot even be loaded: every push fails without touching a device. */
export function unusableProvider(reason: string): PushProvider {
  return {
    send: async (pushes: Push[]) => pushes.map((push) => ({ deliveryId: push.deliveryId, kind: 'credentials', reason })),
    close: async () => undefined,
  };
}

/** `Retry-After` as seconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: unknown, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string' && typeof text !== 'number') return undefined;
  const trimmed = String(text).trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/**
 * A failure to talk to a provider, in words. The error's own message names addresses and ports
 * (`connect ECONNREFUSED 10.0.3.7:443`): a delivery's reason is read by integrators, so it says what
 * happened, never where.
 */
export const networkReasons = ['provider unreachable', 'provider timeout', 'provider connection lost'] as const;
export type NetworkReason = (typeof networkReasons)[number];

const unreachableCodes = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);
const timeoutCodes = new Set(['ETIMEDOUT', 'ESOCKETTIMEDOUT', 'ECONNABORTED', 'UND_ERR_CONNECT_TIMEOUT']);

export function networkReason(error: unknown): NetworkReason {
  for (let current = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0; current && depth < 5; depth++) {
    const code = typeof current.code === 'string' ? current.code : '';
    const message = typeof current.message === 'string' ? current.message : '';
    if (unreachableCodes.has(code) || /ECONNREFUSED|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN/.test(message)) return 'provider unreachable';
    if (timeoutCodes.has(code) || /time(d)?\s?out/i.test(message)) return 'provider timeout';
    current = current.cause as typeof current;
  }
  return 'provider connection lost';
}

/** A URL's host as a socket wants it: an IPv6 address without the brackets it has in a URL. */
export function socketHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** A provider's answer parsed, or undefined when it is not JSON (a proxy's HTML error page...). */
export function parseJsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

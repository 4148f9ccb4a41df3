// One call to Herald, attempted until it gets an answer worth returning: a 429 or a 503 is tried
// again after its Retry-After, a request that got no answer only when repeating it is safe, and
// every retry stays within a number of attempts and a total wait.
import { answerError, HeraldError, HeraldNetworkError } from './errors.ts';

export type RetryOptions = {
  /** Attempts in all, the first one included (default 4). */
  maxAttempts?: number;
  /**
   * The longest a call waits between its attempts, added up (default 30,000 ms). A wait that would
   * pass it is not started: the last error is thrown at once (a 429's `retryAfter` says how long
   * Herald asked for).
   */
  maxWaitMs?: number;
  /** The wait after a first network error, doubled after each further one, up to 5 s (default 250 ms). */
  backoffMs?: number;
};

export type RetryPolicy = Required<RetryOptions> & { timeoutMs: number };

export const defaultRetry: Required<RetryOptions> = { maxAttempts: 4, maxWaitMs: 30_000, backoffMs: 250 };
export const defaultTimeoutMs = 30_000;
const maxBackoffMs = 5_000;

/** What a generated operation resolves to (it never throws for an answer or a network error). */
export type Outcome<T> = { data?: T; error?: unknown; request?: Request; response?: Response };

// Herald's answers that mean "nothing was done, ask again later" (both carry Retry-After).
const retriedStatuses = new Set([429, 503]);

export function retryPolicy(retry: RetryOptions | false | undefined, timeoutMs = defaultTimeoutMs): RetryPolicy {
  if (retry === false) return { ...defaultRetry, maxAttempts: 1, timeoutMs };
  return { ...defaultRetry, ...retry, timeoutMs };
}

/**
 * Runs `attempt` (each with its own timeout signal) until it returns data or a failure that is not
 * retried. `idempotent`: repeating the request cannot do its work twice, so a request that may or
 * may not have reached Herald can be sent again.
 */
export async function withRetries<T>(
  policy: RetryPolicy,
  idempotent: boolean,
  attempt: (signal: AbortSignal) => Promise<Outcome<T>>,
): Promise<T> {
  let waitedMs = 0;
  for (let attempts = 1; ; attempts++) {
    const { data, error, request, response } = await attempt(AbortSignal.timeout(policy.timeoutMs));
    // Never sent (the body could not be serialized, say): not Herald's failure, nor the network's.
    if (!request) throw error;
    let failure: HeraldError | HeraldNetworkError;
    let waitMs: number;
    if (!response) {
      failure = networkError(request, error, policy.timeoutMs, attempts);
      if (!idempotent) throw failure;
      waitMs = backoff(policy.backoffMs, attempts);
    } else if (response.ok && error === undefined) {
      return data as T;
    } else {
      failure = answerError(response, error);
      if (!retriedStatuses.has(response.status)) throw failure;
      waitMs = failure.retryAfter !== null ? failure.retryAfter * 1000 : backoff(policy.backoffMs, attempts);
    }
    if (attempts >= policy.maxAttempts || waitedMs + waitMs > policy.maxWaitMs) throw failure;
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    waitedMs += waitMs;
  }
}

// Doubling, with jitter so that clients cut off together do not come back together.
function backoff(firstMs: number, attempts: number): number {
  const ms = Math.min(firstMs * 2 ** (attempts - 1), maxBackoffMs);
  return Math.round(ms / 2 + (Math.random() * ms) / 2);
}

function networkError(request: Request, cause: unknown, timeoutMs: number, attempts: number): HeraldNetworkError {
  const what = `${request.method} ${new URL(request.url).pathname}`;
  const error = errorFields(cause);
  // fetch says only "fetch failed"; the reason ("connect ECONNREFUSED 127.0.0.1:3000", "other side
  // closed"...) is its cause.
  const inner = errorFields(error.cause);
  const reason = inner.message || inner.code || error.message || String(cause);
  const detail = error.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : `no answer (${reason})`;
  return new HeraldNetworkError(`${what}: ${detail}${attempts > 1 ? ` after ${attempts} attempts` : ''}`, { cause, attempts });
}

// Read by shape, not instanceof: fetch's errors may come from another realm (a VM context, a worker).
function errorFields(error: unknown): { name?: string; message?: string; code?: string; cause?: unknown } {
  if (typeof error !== 'object' || error === null) return {};
  const { name, message, code, cause } = error as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  return { name: text(name), message: text(message), code: text(code), cause };
}

// What a Herald client throws, one class per kind of failure, so that a caller can tell "Herald said
// no" (HeraldError) from "Herald could not be asked" (HeraldNetworkError) with `instanceof`.
import type { FieldErrors, Notification } from './generated/index.ts';

/** Herald answered with an error status; `message` and `errors` are its error body. */
export class HeraldError extends Error {
  override readonly name = 'HeraldError';
  /** The HTTP status: 401, 403, 404, 409, 422, 429, 503... */
  readonly status: number;
  /** A validation failure's (422) messages by field: `recipients.user_ids`, `Idempotency-Key`... */
  readonly errors: FieldErrors | undefined;
  /** The answer's `X-Request-Id`: quote it to the operators, it is on every log line of the request. */
  readonly requestId: string | null;
  /** Seconds Herald asked to wait before trying again (`Retry-After` of a 429 or a 503). */
  readonly retryAfter: number | null;
  /**
   * A 403's abilities the token lacks for this operation (the `scope` Herald puts in
   * `WWW-Authenticate`), e.g. `['notifications:send']`; null for any other answer.
   */
  readonly missingAbilities: string[] | null;

  constructor(fields: {
    status: number;
    message: string;
    errors?: FieldErrors;
    requestId?: string | null;
    retryAfter?: number | null;
    missingAbilities?: string[] | null;
  }) {
    super(fields.message);
    this.status = fields.status;
    this.errors = fields.errors;
    this.requestId = fields.requestId ?? null;
    this.retryAfter = fields.retryAfter ?? null;
    this.missingAbilities = fields.missingAbilities ?? null;
  }
}

/**
 * No answer from Herald: the connection was refused or cut, the name did not resolve, or the
 * attempt ran past `timeoutMs`. `cause` is the error fetch gave.
 */
export class HeraldNetworkError extends Error {
  override readonly name = 'HeraldNetworkError';
  /** Attempts made before giving up (more than 1 when the call was retried). */
  readonly attempts: number;

  constructor(message: string, options: { cause: unknown; attempts: number }) {
    super(message, { cause: options.cause });
    this.attempts = options.attempts;
  }
}

/** `waitForCompletion` ran out of time; `notification` is the last state it read. */
export class HeraldTimeoutError extends Error {
  override readonly name = 'HeraldTimeoutError';
  readonly notification: Notification;

  constructor(message: string, notification: Notification) {
    super(message);
    this.notification = notification;
  }
}

/** The HeraldError of an answer that was not a success, from its JSON error body (or none). */
export function answerError(response: Response, body: unknown): HeraldError {
  const { message, errors } = (typeof body === 'object' && body !== null ? body : {}) as { message?: unknown; errors?: unknown };
  const retryAfter = Number(response.headers.get('Retry-After') ?? Number.NaN);
  return new HeraldError({
    status: response.status,
    message: typeof message === 'string' ? message : `HTTP ${response.status}`,
    errors: typeof errors === 'object' && errors !== null ? (errors as HeraldError['errors']) : undefined,
    requestId: response.headers.get('X-Request-Id'),
    retryAfter: Number.isInteger(retryAfter) && retryAfter >= 0 ? retryAfter : null,
    missingAbilities: response.status === 403 ? scopeOf(response.headers.get('WWW-Authenticate')) : null,
  });
}

/** The abilities an RFC 6750 `insufficient_scope` challenge names: `Bearer …, scope="a b"`. */
function scopeOf(challenge: string | null): string[] | null {
  const scope = challenge && /\bscope="([^"]*)"/.exec(challenge)?.[1];
  return scope ? scope.split(' ').filter(Boolean) : null;
}

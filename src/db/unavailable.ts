// Whether an error means "the database cannot be reached right now" rather than a bug: those
// requests answer 503, not 500 or 401. Decided first by where the error happened: anything that
// fails while a connection is opened means the database is unavailable, whatever its code (refused,
// shutting down, not accepting connections, out of connections, a password it no longer takes).
// Then by what ends an open connection: the server ending the session, the link failing, or
// nothing answered within the client's bound (db/bounds.ts).

/**
 * An error raised while a connection was being opened (db/preparing-client.ts), with the driver's
 * as its cause. `failedWhile` is an enumerable field because a library may copy an error's fields
 * into an object of its own (pg-boss reports a worker's failure so), losing the class and the cause.
 */
export class ConnectionFailed extends Error {
  readonly failedWhile = 'connecting';

  constructor(cause: unknown) {
    super(`could not connect to the database: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'ConnectionFailed';
  }
}

/**
 * What a statement on a connection retired after an outage (db/preparing-client.ts retireConnections)
 * fails with: the database is unavailable to it, so it is retried as after an outage, but the outage
 * is over and this is not a new one (outage.ts). `retired` is enumerable, like ConnectionFailed's field.
 */
export class ConnectionRetired extends Error {
  readonly retired = true;

  constructor(cause: unknown) {
    super(`connection retired after a database outage: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'ConnectionRetired';
  }
}

/** Whether `error` came from a connection retired after an outage (ConnectionRetired, or a copy of its fields). */
export function isRetiredConnection(error: unknown): boolean {
  for (const { retired } of chain(error)) if (retired === true) return true;
  return false;
}

/** pg's message when a statement was not answered within its query_timeout. */
export const queryReadTimeout = 'Query read timeout';

// A live connection's socket failing.
const networkCodes = new Set(['ECONNRESET', 'ETIMEDOUT', 'EPIPE']);
// SQLSTATE: admin_shutdown, crash_shutdown (the server ended the session); class 08 is
// "connection exception".
const endedStates = new Set(['57P01', '57P02']);
// The driver's, the pool's and pg-boss's words for a connection lost, never answered, or not
// handed out within connectionTimeoutMillis (pg-boss adds the queue and worker to a message).
const driverMessages =
  /connection terminated|timeout exceeded when trying to connect|connection (?:is )?closed|client has encountered a connection error|cannot use a pool after calling end|query read timeout|LISTEN\/NOTIFY heartbeat timed out/i;

/** Each error of a chain (its causes, an AggregateError's first), once. */
function* chain(error: unknown): Generator<Record<string, unknown>> {
  const seen = new Set<unknown>();
  for (let current = error; current && typeof current === 'object' && !seen.has(current); ) {
    seen.add(current);
    const fields = current as Record<string, unknown>;
    yield fields;
    current = fields.cause ?? (Array.isArray(fields.errors) ? fields.errors[0] : undefined);
  }
}

export function isDatabaseUnavailable(error: unknown): boolean {
  for (const { code, name, message, failedWhile, retired } of chain(error)) {
    if (failedWhile === 'connecting' || retired === true) return true;
    if (typeof code === 'string' && (networkCodes.has(code) || endedStates.has(code) || code.startsWith('08'))) return true;
    if (name === 'ConnectionException') return true;
    if (typeof message === 'string' && driverMessages.test(message)) return true;
  }
  return false;
}

/**
 * The server ended a statement at its bound: statement_timeout (57014, query_canceled) or
 * lock_timeout (55P03, lock_not_available). The database answers; it is busy, or a lock is held
 * too long. Answered 503 like an outage, but not one: nothing pauses.
 */
export function isStatementTimeout(error: unknown): boolean {
  for (const { code } of chain(error)) if (code === '57014' || code === '55P03') return true;
  return false;
}

// Whether an error means "the database cannot be reached right now" (refused, reset, terminated,
// shutting down, out of connections) rather than a bug: those requests answer 503, not 500 or 401.
const networkCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN']);
// SQLSTATE: admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections; class 08 is
// "connection exception".
const unavailableStates = new Set(['57P01', '57P02', '57P03', '53300']);
const driverMessages = /connection terminated|timeout exceeded when trying to connect|connection (?:is )?closed|client has encountered a connection error|cannot use a pool after calling end/i;

export function isDatabaseUnavailable(error: unknown): boolean {
  const seen = new Set<unknown>();
  for (let current = error; current && typeof current === 'object' && !seen.has(current); ) {
    seen.add(current);
    const { code, name, message, cause, errors } = current as {
      code?: unknown;
      name?: unknown;
      message?: unknown;
      cause?: unknown;
      errors?: unknown;
    };
    if (typeof code === 'string' && (networkCodes.has(code) || unavailableStates.has(code) || code.startsWith('08'))) return true;
    if (name === 'ConnectionException') return true;
    if (typeof message === 'string' && driverMessages.test(message)) return true;
    // An AggregateError (e.g. every address refused) is unavailable when its first cause is.
    current = cause ?? (Array.isArray(errors) ? errors[0] : undefined);
  }
  return false;
}

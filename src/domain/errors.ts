// Every error a request can end in, with its status and the spec's message. The HTTP layer turns
// these (and the validator's and body parser's errors) into the error body; anything else is a 500.
export type FieldErrors = Record<string, string[]>;

/**
 * Field names come from clients (`?constructor=1`, a body key `__proto__`): errors are collected in
 * an object with no prototype, so no name can reach Object.prototype.
 */
export function fieldErrors(): FieldErrors {
  return Object.create(null) as FieldErrors;
}

export function addFieldError(errors: FieldErrors, field: string, message: string): void {
  (errors[field] ??= []).push(message);
}

export class HttpError extends Error {
  readonly status: number;
  readonly errors?: FieldErrors;
  readonly headers?: Record<string, string>;

  constructor(status: number, message: string, errors?: FieldErrors, headers?: Record<string, string>) {
    super(message);
    this.status = status;
    this.errors = errors;
    this.headers = headers;
  }
}

export const messages = {
  badRequest: 'Malformed JSON in request body.',
  unauthenticated: 'Unauthenticated.',
  forbidden: 'This action is unauthorized.',
  notFound: 'Not Found',
  methodNotAllowed: 'Method Not Allowed',
  payloadTooLarge: 'Request body is too large.',
  validationFailed: 'The given data was invalid.',
  tooManyRequests: 'Too Many Requests.',
  serverError: 'Server Error',
  unavailable: 'Service Unavailable',
} as const;

// RFC 6750: a 401 names the scheme (and why a token was refused); a 403 names the scope it lacked.
export const unauthenticated = (error?: 'invalid_token') =>
  new HttpError(401, messages.unauthenticated, undefined, {
    'WWW-Authenticate': `Bearer realm="herald"${error ? `, error="${error}"` : ''}`,
  });
export const forbidden = (abilities: string[]) =>
  new HttpError(403, messages.forbidden, undefined, {
    'WWW-Authenticate': `Bearer realm="herald", error="insufficient_scope", scope="${abilities.join(' ')}"`,
  });
export const notFound = () => new HttpError(404, messages.notFound);
export const methodNotAllowed = (allowed: string[]) =>
  new HttpError(405, messages.methodNotAllowed, undefined, {
    Allow: [...allowed, ...(allowed.includes('GET') ? ['HEAD'] : [])].join(', '),
  });
/** The database cannot be reached: the client may retry shortly; it is not the client's fault. */
export const unavailable = (retryAfterSeconds: number) =>
  new HttpError(503, messages.unavailable, undefined, { 'Retry-After': String(retryAfterSeconds) });
export const conflict = (message: string) => new HttpError(409, message);

export function validationFailed(errors: FieldErrors): HttpError {
  return new HttpError(422, validationMessage(errors), errors);
}

// Laravel-style summary: the first message, and how many more there are.
export function validationMessage(errors: FieldErrors): string {
  const all = Object.values(errors).flat();
  if (all.length === 0) return messages.validationFailed;
  const more = all.length - 1;
  return more === 0 ? all[0] : `${all[0]} (and ${more} more error${more === 1 ? '' : 's'})`;
}

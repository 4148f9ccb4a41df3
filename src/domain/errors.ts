// Every error a request can end in, with its status and the spec's message. The HTTP layer turns
// these (and the validator's and body parser's errors) into the error body; anything else is a 500.
export type FieldErrors = Record<string, string[]>;

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

export const unauthenticated = () => new HttpError(401, messages.unauthenticated);
export const forbidden = () => new HttpError(403, messages.forbidden);
export const notFound = () => new HttpError(404, messages.notFound);
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

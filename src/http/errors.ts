// The one error middleware: our errors, the OpenAPI validator's and the body parser's become the
// spec's error body; anything else is a masked 500, logged whole.
import type { ErrorRequestHandler } from 'express';
import { HttpError, messages, validationMessage, type FieldErrors } from '../domain/errors.ts';

type ValidatorIssue = { path?: string; message?: string; errorCode?: string };
type ForeignError = {
  status?: number;
  statusCode?: number;
  type?: string;
  expose?: boolean;
  errors?: ValidatorIssue[];
  headers?: Record<string, string>;
  message?: string;
};

const fixedMessages: Record<number, string> = {
  401: messages.unauthenticated,
  403: messages.forbidden,
  404: messages.notFound,
  405: messages.methodNotAllowed,
  413: messages.payloadTooLarge,
  429: messages.tooManyRequests,
};

/** `/body/recipients/user_ids/0` → `recipients.user_ids.0`; `/headers/idempotency-key` → `Idempotency-Key`. */
export function fieldName(path: string | undefined): string {
  const [, location = '', ...rest] = (path ?? '').split('/');
  if (location === 'headers') return rest.join('-').replace(/(^|-)([a-z])/g, (_, dash, c) => dash + c.toUpperCase());
  return rest.length > 0 ? rest.join('.') : location || 'body';
}

/** One readable sentence per issue: "The options.ttl field must be <= 2419200." */
function issueMessage(field: string, issue: ValidatorIssue): string {
  switch (issue.errorCode) {
    case 'required.openapi.validation':
      return `The ${field} field is required.`;
    case 'additionalProperties.openapi.validation':
      return `The ${field} field is not allowed.`;
    default:
      if (/^Unknown query parameter/.test(issue.message ?? '')) return `The ${field} parameter is not allowed.`;
      return `The ${field} field ${issue.message ?? 'is invalid'}.`;
  }
}

function fieldErrors(issues: ValidatorIssue[]): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of issues) {
    const field = fieldName(issue.path);
    (errors[field] ??= []).push(issueMessage(field, issue));
  }
  return errors;
}

/** Maps any thrown value to a status and the error body. Exported for the tests of the mapping. */
export function toHttpError(error: unknown): HttpError | null {
  if (error instanceof HttpError) return error;
  const foreign = (error ?? {}) as ForeignError;
  const status = foreign.status ?? foreign.statusCode;
  if (typeof status !== 'number' || status < 400 || status >= 500) return null;
  if (foreign.type === 'entity.parse.failed') return new HttpError(400, messages.badRequest);
  if (status === 400 && Array.isArray(foreign.errors) && foreign.errors.every(isRequestField)) {
    // The validator reports request validation as 400; the spec wants 422 with field errors.
    const errors = fieldErrors(foreign.errors);
    return new HttpError(422, validationMessage(errors), errors);
  }
  // The validator's other 400s (a path it cannot percent-decode) name no field: a plain 400.
  if (status === 400 && Array.isArray(foreign.errors)) return new HttpError(400, malformedMessage(foreign));
  const message = fixedMessages[status] ?? foreign.message;
  return new HttpError(status, message ?? 'Bad Request', undefined, foreign.headers);
}

// Where a request validation issue can point: `/body/...`, `/query/...`, `/path/...`, `/headers/...`.
const requestLocations = new Set(['body', 'query', 'path', 'params', 'headers', 'cookies']);

function isRequestField(issue: ValidatorIssue): boolean {
  const location = (issue.path ?? '').split('/')[1];
  return location === undefined || requestLocations.has(location);
}

function malformedMessage(error: ForeignError): string {
  const detail = `${error.errors?.[0]?.message ?? ''} ${error.message ?? ''}`;
  return /malformed uri/i.test(detail) ? 'Malformed URI.' : 'Bad Request';
}

function unsupportedMediaType(contentType: string | undefined): string {
  return `Unsupported Content-Type: ${contentType || 'none'}; expected application/json.`;
}

export const errorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  let httpError = toHttpError(error);
  if (httpError?.status === 415) httpError = new HttpError(415, unsupportedMediaType(req.get('content-type')));
  if (!httpError) {
    // pino-http logs the request's line with this error, stack and all.
    res.err = error;
    res.status(500).json({ message: messages.serverError });
    return;
  }
  for (const [name, value] of Object.entries(httpError.headers ?? {})) res.setHeader(name, value);
  // RFC 6750: a 401 names the scheme the client must use.
  if (httpError.status === 401) res.setHeader('WWW-Authenticate', 'Bearer realm="herald"');
  res.status(httpError.status).json(
    httpError.errors ? { message: httpError.message, errors: httpError.errors } : { message: httpError.message },
  );
};

// The one error middleware: our errors, the OpenAPI validator's and the body parser's become the
// spec's error body; anything else is a masked 500, logged whole.
import type { ErrorRequestHandler } from 'express';
import { HttpError, messages, validationMessage, type FieldErrors } from '../domain/errors.ts';

type ValidatorIssue = { path?: string; message?: string };
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

function fieldErrors(issues: ValidatorIssue[]): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of issues) {
    const additional = /must NOT have additional properties/.test(issue.message ?? '')
      ? (issue as { params?: { additionalProperty?: string } }).params?.additionalProperty
      : undefined;
    const field = fieldName(issue.path) + (additional ? `.${additional}` : '');
    const message = `The ${field} field ${issue.message ?? 'is invalid'}.`;
    (errors[field] ??= []).push(message);
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
  if (status === 400 && Array.isArray(foreign.errors)) {
    // The validator reports request validation as 400; the spec wants 422 with field errors.
    const errors = fieldErrors(foreign.errors);
    return new HttpError(422, validationMessage(errors), errors);
  }
  const message = fixedMessages[status] ?? (status === 415 ? unsupportedMediaType(foreign) : foreign.message);
  return new HttpError(status, message ?? 'Bad Request', undefined, foreign.headers);
}

function unsupportedMediaType(error: ForeignError): string {
  const detail = error.errors?.[0]?.message ?? error.message;
  return detail ? `Unsupported Content-Type: ${detail}` : 'Unsupported Content-Type.';
}

export const errorHandler: ErrorRequestHandler = (error, _req, res, _next) => {
  const httpError = toHttpError(error);
  if (!httpError) {
    // pino-http logs the request's line with this error, stack and all.
    res.err = error;
    res.status(500).json({ message: messages.serverError });
    return;
  }
  for (const [name, value] of Object.entries(httpError.headers ?? {})) res.setHeader(name, value);
  res.status(httpError.status).json(
    httpError.errors ? { message: httpError.message, errors: httpError.errors } : { message: httpError.message },
  );
};

// The one error middleware: our errors, the OpenAPI validator's and the body parser's become the
// spec's error body; a database that cannot be reached is a 503; anything else is a masked 500,
// logged whole. A last-resort handler behind it answers the same JSON whatever happened.
import type { ErrorRequestHandler, Request } from 'express';
import type { OutageWatch } from '../db/outage.ts';
import { isDatabaseUnavailable, isStatementTimeout } from '../db/unavailable.ts';
import {
  addFieldError,
  fieldErrors,
  HttpError,
  messages,
  unavailable,
  validationMessage,
  type FieldErrors,
} from '../domain/errors.ts';
import { localizationsWithoutDefaultMessage, nothingToShowMessage, oneRecipientKindMessage } from '../domain/notifications.ts';
import { timezoneNeedsLocalTimeMessage } from '../domain/local-time.ts';
import { keyValidationText, validationText } from './validation-messages.ts';

type ValidatorIssue = { path?: string; message?: string; errorCode?: string };
type ForeignError = {
  status?: number;
  statusCode?: number;
  type?: string;
  /** The body parser's: a charset it cannot decode; zlib's: the error number of a body it could not decompress. */
  charset?: string;
  errno?: number;
  errors?: ValidatorIssue[];
  headers?: Record<string, string>;
  message?: string;
};

/** Seconds a client should wait before retrying while the database is unreachable. */
export const unavailableRetryAfterSeconds = 5;

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

/** The value a validator path points at in the request (for messages that quote it). */
function valueAt(req: Request, path: string | undefined): unknown {
  const [, location, ...rest] = (path ?? '').split('/');
  let value: unknown = location === 'body' ? req.body : undefined;
  for (const key of rest) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
  return value;
}

// The document's `not` rules (the send's, each stated by the domain too), by the object they apply
// to, with the object whose content they judge: when that is not an object (`"notification": null`),
// the rule says nothing true, and its type error says what is wrong.
const notRules: Record<string, { field: string; message: string; judges: string }> = {
  '/body': { field: 'notification', message: nothingToShowMessage, judges: '/body/notification' },
  '/body/notification': { field: 'notification.localizations', message: localizationsWithoutDefaultMessage, judges: '/body/notification' },
  '/body/recipients': { field: 'recipients', message: oneRecipientKindMessage, judges: '/body/recipients' },
};

// The document's `dependentRequired` rules, by the path the validator reports (the missing field's):
// the field that needs it is the one named, with the domain's sentence.
const dependentRules: Record<string, { field: string; message: string }> = {
  '/body/options/local_time': { field: 'options.timezone', message: timezoneNeedsLocalTimeMessage },
};

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

function requestFieldErrors(req: Request, issues: ValidatorIssue[]): FieldErrors {
  const errors = fieldErrors();
  const add = (field: string, message: string) => {
    if (!errors[field]?.includes(message)) addFieldError(errors, field, message);
  };
  for (const issue of issues) {
    // An `if` that held reports its `then` failing as well: that one's issue names the field.
    if (issue.errorCode === 'if.openapi.validation') continue;
    if (issue.errorCode === 'not.openapi.validation') {
      const rule = notRules[issue.path ?? ''];
      if (rule && isObject(valueAt(req, rule.judges))) add(rule.field, rule.message);
      continue;
    }
    const dependent = issue.errorCode === 'dependentRequired.openapi.validation' ? dependentRules[issue.path ?? ''] : undefined;
    if (dependent) {
      add(dependent.field, dependent.message);
      continue;
    }
    const field = fieldName(issue.path);
    const value = valueAt(req, issue.path);
    // A string rule that fails on an object is one of its keys breaking `propertyNames`: the
    // validator names the object, not the key, so the keys are checked again to name them.
    const keyErrors = isObject(value) ? keyValidationText(field, issue, Object.keys(value)) : null;
    if (keyErrors) for (const [key, message] of keyErrors) add(`${field}.${key}`, message);
    else add(field, validationText(field, issue, value));
  }
  return errors;
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

/** The codings the body parser decodes on Node 24 (one, not a list of them). */
const contentEncodings = 'gzip, deflate, br, zstd or identity';

/** The body parser passes zlib's own error on ("incorrect header check"), which names no header. */
const isUndecodableBody = (error: ForeignError) => error.type === undefined && typeof error.errno === 'number';

/** Maps any thrown value to a status and the error body; null for a bug (500). */
export function toHttpError(error: unknown, req: Request): HttpError | null {
  if (error instanceof HttpError) return error;
  // Past a database bound (db/bounds.ts): nothing answered, or the server ended a statement at its
  // own. Either way nothing was done, and a retry may find it answered.
  if (isDatabaseUnavailable(error) || isStatementTimeout(error)) return unavailable(unavailableRetryAfterSeconds);
  const foreign = (error ?? {}) as ForeignError;
  const status = foreign.status ?? foreign.statusCode;
  if (typeof status !== 'number' || status < 400 || status >= 500) return null;
  if (foreign.type === 'entity.parse.failed') return new HttpError(400, messages.badRequest);
  if (foreign.type === 'encoding.unsupported') {
    return new HttpError(415, `Unsupported Content-Encoding: ${req.get('content-encoding')}; expected one of ${contentEncodings}.`);
  }
  if (foreign.type === 'charset.unsupported') {
    return new HttpError(415, `Unsupported charset in Content-Type: ${foreign.charset?.toLowerCase()}; expected utf-8.`);
  }
  if (status === 415) return new HttpError(415, unsupportedMediaType(req.get('content-type')));
  if (status === 400 && isUndecodableBody(foreign)) {
    const encoding = req.get('content-encoding');
    return new HttpError(400, `The Content-Encoding header says ${encoding}, but the body is not valid ${encoding} data.`);
  }
  if (status === 400 && Array.isArray(foreign.errors) && foreign.errors.every(isRequestField)) {
    // The validator reports request validation as 400; the spec wants 422 with field errors.
    const errors = requestFieldErrors(req, foreign.errors);
    return new HttpError(422, validationMessage(errors), errors);
  }
  // The validator's other 400s (a path it cannot percent-decode) name no field: a plain 400.
  if (status === 400 && Array.isArray(foreign.errors)) return new HttpError(400, malformedMessage(foreign));
  const message = fixedMessages[status] ?? foreign.message;
  return new HttpError(status, message ?? 'Bad Request', undefined, foreign.headers);
}

/**
 * A database outage is the process's watch's to log, once when it starts and once when it ends:
 * each 503 in between has only its request line (at `warn`), not a line with the error of its own.
 * A statement the server ended at its bound is no outage: its cause joins the request's line.
 */
export function errorHandler(outage: OutageWatch): ErrorRequestHandler {
  return (error, req, res, next) => {
    const httpError = toHttpError(error, req);
    if (!httpError) return next(error);
    for (const [name, value] of Object.entries(httpError.headers ?? {})) res.setHeader(name, value);
    if (httpError.status === 503 && !outage.report(error) && isStatementTimeout(error)) {
      req.log.warn({ cause: error instanceof Error ? error.message : String(error) }, 'database statement ended at its bound');
    }
    res.status(httpError.status).json(
      httpError.errors ? { message: httpError.message, errors: httpError.errors } : { message: httpError.message },
    );
  };
}

/**
 * Everything else, including a failure inside errorHandler: the JSON error body, never a stack or
 * an HTML page, whatever NODE_ENV says. pino-http logs the request's line with the error, whole.
 */
export const lastResortHandler: ErrorRequestHandler = (error, _req, res, _next) => {
  res.err = error;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.statusCode = 500;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(JSON.stringify({ message: messages.serverError }));
};

// Reading a request body, once its caller is known to be allowed (src/http/auth.ts runs first).
// JSON.parse itself copes with any nesting, but every later walk over client data (schema
// validation, payload building, hashing) would recurse as deep as the client nested it: the depth
// is bounded here, iteratively, before anything else looks at the body. Strings and keys must also
// be well-formed UTF-16: JSON may escape a lone surrogate ("\ud800"), which Postgres cannot store.
import express, { type RequestHandler } from 'express';
import { addFieldError, fieldErrors, validationFailed } from '../domain/errors.ts';

/** Containers nested in a body, the body itself included (documented in openapi.yaml). */
export const maxBodyDepth = 32;

type Pending = { value: unknown; path: string; depth: number };

const join = (path: string, key: string) => (path ? `${path}.${key.toWellFormed()}` : key.toWellFormed());

export const checkBodyText: RequestHandler = (req, _res, next) => {
  const errors = fieldErrors();
  const stack: Pending[] = [{ value: req.body, path: '', depth: 0 }];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    const field = path || 'body';
    if (typeof value === 'string') {
      if (!value.isWellFormed()) addFieldError(errors, field, `The ${field} field must not contain an unpaired UTF-16 surrogate.`);
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth === maxBodyDepth) {
      const top = path.split('.')[0];
      errors[top] = [`The ${top} field is nested more than ${maxBodyDepth} levels deep.`];
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      if (!key.isWellFormed()) addFieldError(errors, field, `The ${field} field has a key with an unpaired UTF-16 surrogate.`);
      stack.push({ value: item, path: join(path, key), depth: depth + 1 });
    }
  }
  next(Object.keys(errors).length > 0 ? validationFailed(errors) : undefined);
};

/** Any JSON value is parsed (not only objects and arrays), so that `null` or `"x"` is a 422 naming the body. */
export function readJsonBody(limit: string): RequestHandler[] {
  return [express.json({ limit, strict: false }), checkBodyText];
}

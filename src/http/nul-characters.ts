// Postgres text and jsonb cannot hold U+0000, which JSON strings and percent-encoded paths can
// carry. Refusing it once here, after authentication and schema validation, keeps it out of
// every handler (422 keyed by field, instead of a 500 from the database).
import type { RequestHandler } from 'express';
import { validationFailed, type FieldErrors } from '../domain/errors.ts';

function collect(value: unknown, path: string, errors: FieldErrors): void {
  if (typeof value === 'string') {
    if (value.includes('\u0000')) errors[path || 'body'] = [`The ${path || 'body'} field must not contain a NUL character.`];
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  for (const [key, item] of Object.entries(value)) {
    const itemPath = path ? `${path}.${key}` : key;
    if (key.includes('\u0000')) errors[itemPath] = [`The ${itemPath} key must not contain a NUL character.`];
    collect(item, itemPath, errors);
  }
}

export const refuseNulCharacters: RequestHandler = (req, _res, next) => {
  const errors: FieldErrors = {};
  collect((req as { openapi?: { pathParams?: object } }).openapi?.pathParams ?? {}, '', errors);
  collect(req.query, '', errors);
  collect(req.body, '', errors);
  next(Object.keys(errors).length > 0 ? validationFailed(errors) : undefined);
};

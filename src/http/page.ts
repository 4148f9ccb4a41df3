import type { Request } from 'express';

/** The document's `limit` default (components.parameters.Limit). */
const defaultPageSize = 25;

/** A list's `limit` and `cursor`, already checked against the document by the validator. */
export function pageParameters(req: Request): { limit: number; cursor?: string } {
  return {
    limit: req.query.limit === undefined ? defaultPageSize : Number(req.query.limit),
    cursor: typeof req.query.cursor === 'string' ? req.query.cursor : undefined,
  };
}

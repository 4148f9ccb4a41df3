// The bearer security handler of the OpenAPI validator. The abilities an operation needs are the
// role names of its security requirement in openapi.yaml: the document is the one place they live.
import type { Request } from 'express';
import type { Orm } from '../db/orm.ts';
import { authenticate, type Principal } from '../domain/applications.ts';
import { forbidden, unauthenticated } from '../domain/errors.ts';
import { grants } from '../domain/tokens.ts';

const principals = new WeakMap<Request, Principal>();

export function principalOf(req: Request): Principal {
  const principal = principals.get(req);
  // Only reachable if a route were declared without security in the document.
  if (!principal) throw new Error(`No authenticated principal for ${req.method} ${req.path}`);
  return principal;
}

export function bearerAuth(orm: Orm) {
  return async (req: Request, requiredAbilities: string[]): Promise<boolean> => {
    const match = /^Bearer +(\S+) *$/i.exec(req.get('authorization') ?? '');
    if (!match) throw unauthenticated();
    const principal = await authenticate(orm.em.fork(), match[1]);
    if (!principal) throw unauthenticated();
    if (!grants(principal.abilities, requiredAbilities)) throw forbidden();
    principals.set(req, principal);
    return true;
  };
}

// The first decision on every request, made from the method, the path and the headers alone,
// before a byte of the body is read: which documented operation it is (404/405 otherwise), and
// whether the bearer token may call it (401/403). Only then is the body parsed and validated, so
// an unauthenticated caller can never make Herald parse a body. The abilities an operation needs
// are the role names of its security requirement in openapi.yaml: the document is the one place
// they live.
import type { Request, RequestHandler } from 'express';
import type { Orm } from '../db/orm.ts';
import { authenticate, recordTokenUse, type Principal } from '../domain/applications.ts';
import { forbidden, methodNotAllowed, notFound, unauthenticated } from '../domain/errors.ts';
import { grants } from '../domain/tokens.ts';

const methods = ['get', 'put', 'post', 'patch', 'delete'] as const;

type Operation = { abilities: string[] | null };
type Route = { pattern: RegExp; operations: Map<string, Operation> };
type Document = {
  paths?: Record<string, Partial<Record<(typeof methods)[number], { security?: Record<string, string[]>[] }>>>;
  security?: Record<string, string[]>[];
};

/** `{installationId}` matches one raw path segment; matching is exact (case, trailing slash). */
function routesOf(document: Document): Route[] {
  return Object.entries(document.paths ?? {}).map(([path, item]) => {
    const source = path
      .split(/(\{[^}]+\})/)
      .map((part) => (part.startsWith('{') ? '([^/]+)' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('');
    const operations = new Map<string, Operation>();
    for (const method of methods) {
      const operation = item?.[method];
      if (!operation) continue;
      const requirement = (operation.security ?? document.security ?? [])[0];
      operations.set(method.toUpperCase(), { abilities: requirement ? Object.values(requirement).flat() : null });
    }
    return { pattern: new RegExp(`^${source}$`), operations };
  });
}

const principals = new WeakMap<Request, Principal>();

export function principalOf(req: Request): Principal {
  const principal = principals.get(req);
  // Only reachable if a route were declared without security in the document.
  if (!principal) throw new Error(`No authenticated principal for ${req.method} ${req.path}`);
  return principal;
}

export function authorize(orm: Orm, document: object): RequestHandler {
  const routes = routesOf(document as Document);
  return async (req, _res, next) => {
    // HEAD is GET without a body: Node already knows not to send one for this response.
    if (req.method === 'HEAD') req.method = 'GET';
    const route = routes.find(({ pattern }) => pattern.test(req.path));
    if (!route) return next(notFound());
    const operation = route.operations.get(req.method);
    if (!operation) return next(methodNotAllowed([...route.operations.keys()]));
    if (operation.abilities === null) return next();

    const match = /^Bearer +(\S+) *$/i.exec(req.get('authorization') ?? '');
    if (!match) return next(unauthenticated());
    try {
      const principal = await authenticate(orm.em, match[1]);
      if (!principal) return next(unauthenticated('invalid_token'));
      // Bookkeeping: a failed write is logged, never the request's failure.
      await recordTokenUse(orm.em, principal).catch((error: unknown) => req.log.warn({ err: error }, "could not record the token's last use"));
      if (!grants(principal.abilities, operation.abilities)) return next(forbidden(operation.abilities));
      principals.set(req, principal);
      next();
    } catch (error) {
      next(error);
    }
  };
}

// The first decision on every request, made from the method, the path and the headers alone,
// before a byte of the body is read: which documented operation it is (404/405 otherwise), and
// whether the bearer token may call it (401/403). Only then is the body parsed and validated, so
// an unauthenticated caller can never make Herald parse a body. The abilities an operation needs
// are the role names of its security requirement in openapi.yaml: the document is the one place
// they live.
import type { Request, RequestHandler, Response } from 'express';
import type { Orm } from '../db/orm.ts';
import { createAuthenticator, recordTokenUse, type Principal } from '../domain/applications.ts';
import { forbidden, methodNotAllowed, notFound, unauthenticated } from '../domain/errors.ts';
import { grants } from '../domain/tokens.ts';
import { authFailed } from '../observability/metrics.ts';
import { allowOrigin } from './cors.ts';

const methods = ['get', 'put', 'post', 'patch', 'delete'] as const;

type Operation = { abilities: string[] | null };
type Route = { template: string; pattern: RegExp; operations: Map<string, Operation> };
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
    return { template: path, pattern: new RegExp(`^${source}$`), operations };
  });
}

const principals = new WeakMap<Request, Principal>();

/** Any path the document does not list, as one label and log value (never the raw URL). */
const unmatchedRoute = 'unmatched';

/** The document's path template the request matched (`/api/v1/installations/{installationId}`). */
export function routeOf(res: Response): string {
  return (res.locals.route as string | undefined) ?? unmatchedRoute;
}

/** Names the route a request matched, for its log line and its metrics. */
export function matchedRoute(res: Response, template: string): void {
  res.locals.route = template;
}

/** The application whose token the request carried, once authenticated (a 403 included). */
export function applicationIdOf(res: Response): string | undefined {
  return res.locals.applicationId as string | undefined;
}

export function principalOf(req: Request): Principal {
  const principal = principals.get(req);
  // Only reachable if a route were declared without security in the document.
  if (!principal) throw new Error(`No authenticated principal for ${req.method} ${req.path}`);
  return principal;
}

export function authorize(orm: Orm, document: object, tokenCacheMs: number): RequestHandler {
  const routes = routesOf(document as Document);
  const authenticate = createAuthenticator(tokenCacheMs);
  return async (req, res, next) => {
    // HEAD is GET without a body: Node already knows not to send one for this response.
    if (req.method === 'HEAD') req.method = 'GET';
    const route = routes.find(({ pattern }) => pattern.test(req.path));
    if (!route) return next(notFound());
    matchedRoute(res, route.template);
    const operation = route.operations.get(req.method);
    if (!operation) return next(methodNotAllowed([...route.operations.keys()]));
    if (operation.abilities === null) return next();

    const match = /^Bearer +(\S+) *$/i.exec(req.get('authorization') ?? '');
    if (!match) {
      authFailed(401, 'missing_token');
      return next(unauthenticated());
    }
    try {
      const principal = await authenticate(orm.em, match[1]);
      if (!principal) {
        authFailed(401, 'invalid_token');
        return next(unauthenticated('invalid_token'));
      }
      res.locals.applicationId = principal.applicationId;
      allowOrigin(req, res, principal.allowedOrigins);
      // Bookkeeping: a failed write is logged, never the request's failure.
      await recordTokenUse(orm.em, principal).catch((error: unknown) => req.log.warn({ err: error }, "could not record the token's last use"));
      if (!grants(principal.abilities, operation.abilities)) {
        authFailed(403, 'insufficient_scope');
        return next(forbidden(operation.abilities));
      }
      principals.set(req, principal);
      next();
    } catch (error) {
      next(error);
    }
  };
}

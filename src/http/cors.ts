// CORS for the operations a web page calls with an app token: reading its application's VAPID public
// key (GET the application), registering its subscription (PUT or PATCH an installation) and
// reporting what the service worker saw (POST an event). A preflight
// carries no token, so it cannot say which application it is for: it is answered when any
// application allows the page's origin, for those operations only. The request itself then gets
// CORS headers only when the token's own application allows the origin; otherwise the browser
// keeps the answer from the page. Every other operation, and every other origin, gets no CORS
// headers at all: a page cannot use a server token from a browser, and nothing else is readable
// cross-origin.
import type { Request, RequestHandler, Response } from 'express';
import { LRUCache } from 'lru-cache';
import type { Orm } from '../db/orm.ts';
import { originAllowedByAny } from '../db/sql/tokens.ts';

const browserOperations: { pattern: RegExp; methods: readonly string[] }[] = [
  { pattern: /^\/api\/v1\/app$/, methods: ['GET'] },
  { pattern: /^\/api\/v1\/installations\/[^/]+$/, methods: ['PUT', 'PATCH'] },
  { pattern: /^\/api\/v1\/events$/, methods: ['POST'] },
];
/** What a page sends besides the simple headers: its token and a JSON body. */
const allowedHeaders = 'Authorization, Content-Type, Content-Encoding, X-Request-Id';
/** How long a browser may reuse a preflight's answer. */
const preflightMaxAgeSeconds = 600;

function browserOperation(req: Request) {
  return browserOperations.find(({ pattern }) => pattern.test(req.path));
}

/** Answers preflights of the browser operations from allowed origins; every other request passes on. */
export function corsPreflight(orm: Orm, cacheMs: number): RequestHandler {
  const known = cacheMs > 0 ? new LRUCache<string, boolean>({ max: 1_000, ttl: cacheMs }) : null;
  const allowedAnywhere = async (origin: string) => {
    let allowed = known?.get(origin);
    if (allowed === undefined) {
      allowed = await originAllowedByAny(orm.em.fork(), origin);
      known?.set(origin, allowed);
    }
    return allowed;
  };
  return async (req, res, next) => {
    const origin = req.get('origin');
    const method = req.get('access-control-request-method');
    if (req.method !== 'OPTIONS' || !origin || !method) return next();
    const operation = browserOperation(req);
    try {
      if (!operation?.methods.includes(method) || !(await allowedAnywhere(origin))) return next();
    } catch (error) {
      return next(error);
    }
    res.vary('Origin');
    res.set({
      'Access-Control-Allow-Origin': origin,
      'Access-Control-Allow-Methods': operation.methods.join(', '),
      'Access-Control-Allow-Headers': allowedHeaders,
      'Access-Control-Max-Age': String(preflightMaxAgeSeconds),
    });
    res.status(204).end();
  };
}

/** On a browser operation's answer (an error's too): the CORS headers, when the token's application allows the page's origin. */
export function allowOrigin(req: Request, res: Response, allowedOrigins: readonly string[]): void {
  const origin = req.get('origin');
  if (!origin || !browserOperation(req)?.methods.includes(req.method)) return;
  res.vary('Origin');
  if (!allowedOrigins.includes(origin)) return;
  res.set({ 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': 'X-Request-Id' });
}

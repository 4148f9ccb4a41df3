// The web dashboard (dashboard/, bundled by `make dashboard` into dist/dashboard/): static files,
// served before authentication because the page itself holds no data; it calls the API with the
// token the user signs in with, like any client.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router } from 'express';
import helmet from 'helmet';
import { matchedRoute } from './auth.ts';

export const dashboardPath = '/dashboard';
export const dashboardDir = fileURLToPath(new URL('../../dist/dashboard/', import.meta.url));

export function dashboardRouter(dir = dashboardDir): Router {
  // The app's exact routing (case, trailing slash) holds here too: a router has its own settings.
  const router = Router({ caseSensitive: true, strict: true });
  const index = path.join(dir, 'index.html');
  // Helmet's policy, less upgrade-insecure-requests: Herald is often reached over plain HTTP on a
  // private network, where the browser would ask for the bundle over HTTPS and fail.
  router.use(dashboardPath, helmet.contentSecurityPolicy({ directives: { upgradeInsecureRequests: null } }));
  // The page and its files are one route in the logs and the metrics.
  router.use(dashboardPath, (_req, res, next) => {
    matchedRoute(res, dashboardPath);
    next();
  });
  // Revalidated on every load (ETag): the bundle's names carry no hash, so a new build must not be masked by a cache.
  const noCache = (res: express.Response) => res.setHeader('Cache-Control', 'no-cache');
  router.get(dashboardPath, (_req, res) => {
    if (!existsSync(index)) {
      res.status(404).json({ message: 'The dashboard is not built: run `make dashboard` (make start and make test build it), then reload.' });
      return;
    }
    noCache(res);
    res.sendFile(index);
  });
  // The page's URLs are relative to /dashboard (so that it works under a proxy's path prefix): from
  // /dashboard/ they would resolve one folder too deep.
  router.get(`${dashboardPath}/`, (_req, res) => res.redirect(301, '../dashboard'));
  router.use(dashboardPath, express.static(dir, { index: false, redirect: false, setHeaders: noCache }));
  return router;
}

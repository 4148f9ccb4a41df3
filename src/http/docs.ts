// The API reference at /docs: Swagger UI rendering the served /openapi.json, every byte of it from
// this process (swagger-ui-dist, resolved in node_modules at start). Swagger UI, not Redoc: Redoc's
// standalone bundle loads its logo from cdn.redoc.ly (2.x) or carries OpenTelemetry (3.x), while
// Swagger UI's bundle fetches nothing but what it is pointed at once its validator badge is off.
//
// A page for people, not an operation of the document: it is served before the document's
// routing, so it needs no token and is neither in the SDK nor fuzzed (/openapi.json, which it
// shows, is in the document and is).
import { createRequire } from 'node:module';
import path from 'node:path';
import { Router } from 'express';
import helmet from 'helmet';
import { matchedRoute } from './auth.ts';

export const docsPath = '/docs';

const swaggerUiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The files of swagger-ui-dist the page uses; nothing else of the package is served. */
const assets = ['swagger-ui.css', 'swagger-ui-bundle.js', 'favicon-32x32.png', 'favicon-16x16.png'];

// URLs are relative (`docs/…` from `/docs`), so the page also works behind a proxy that serves
// Herald under a path prefix.
const page = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Herald API reference</title>
  <link rel="icon" type="image/png" sizes="32x32" href="docs/favicon-32x32.png">
  <link rel="icon" type="image/png" sizes="16x16" href="docs/favicon-16x16.png">
  <link rel="stylesheet" href="docs/swagger-ui.css">
  <script src="docs/swagger-ui-bundle.js" defer></script>
  <script src="docs/reference.js" defer></script>
</head>
<body>
  <div id="swagger-ui"><noscript>The API reference needs JavaScript; the document itself is at <a href="openapi.json">/openapi.json</a>.</noscript></div>
</body>
</html>
`;

// Runs in the browser (a file of its own: the CSP allows no inline script). The base layout has no
// box to load another document; the validator badge would fetch from validator.swagger.io; the
// token typed into Authorize stays in the page's memory (persistAuthorization is off).
const referenceScript = `window.ui = SwaggerUIBundle({
  url: 'openapi.json',
  dom_id: '#swagger-ui',
  layout: 'BaseLayout',
  presets: [SwaggerUIBundle.presets.apis],
  deepLinking: true,
  validatorUrl: null,
  queryConfigEnabled: false,
  persistAuthorization: false,
  displayRequestDuration: true,
});
`;

export function docsRouter(): Router {
  // The app's exact routing (case, trailing slash) holds here too: a router has its own settings.
  const router = Router({ caseSensitive: true, strict: true });
  // Helmet's policy, less upgrade-insecure-requests: Herald is often reached over plain HTTP on
  // a private network, where the browser would ask for the page's scripts over HTTPS and fail.
  router.use(docsPath, helmet.contentSecurityPolicy({ directives: { upgradeInsecureRequests: null } }));
  // The page and its files are one route in the logs and the metrics.
  router.use(docsPath, (_req, res, next) => {
    matchedRoute(res, docsPath);
    next();
  });
  router.get(docsPath, (_req, res) => {
    res.type('html').send(page);
  });
  router.get(`${docsPath}/reference.js`, (_req, res) => {
    res.type('js').send(referenceScript);
  });
  for (const asset of assets) {
    router.get(`${docsPath}/${asset}`, (_req, res, next) => {
      res.sendFile(path.join(swaggerUiDir, asset), (error) => error && next(error));
    });
  }
  return router;
}

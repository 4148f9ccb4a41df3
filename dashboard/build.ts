// Bundles the dashboard (dashboard/src, on the generated SDK in sdk/src) with esbuild into
// dist/dashboard/: index.html, main.js and main.css, everything the page loads (no CDN, no web
// font). `make dashboard` runs it; the server serves that folder at /dashboard.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { build } from 'esbuild';

const root = new URL('..', import.meta.url);
const outdir = new URL('dist/dashboard/', root).pathname;

rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });
await build({
  entryPoints: { main: new URL('dashboard/src/main.tsx', root).pathname },
  outdir,
  bundle: true,
  format: 'esm',
  target: 'es2022',
  platform: 'browser',
  minify: true,
  sourcemap: true,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  // Fonts, images and the like would be files beside main.js; the dashboard has none, and a URL
  // import would fail the build rather than reach out at run time.
  loader: { '.css': 'css' },
  logLevel: 'warning',
});
copyFileSync(new URL('dashboard/index.html', root), `${outdir}index.html`);

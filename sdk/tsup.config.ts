// The package's build (`npm run build`, and `npm pack` before packing), for Node 20 and later, for
// bundlers, and for browsers as they are. The package has no runtime dependency: the generated
// client needs only fetch.
//   - src/index.ts: ESM and CommonJS bundles with their type declarations (dist/index.*).
//   - src/web/index.ts and src/web/service-worker.ts (`@herald/sdk/web`, `.../web/service-worker`):
//     ESM, each one file with nothing shared (a site without a bundler copies one file), and the
//     service worker also as a script for `importScripts` (dist/web/service-worker.global.js,
//     global `HeraldServiceWorker`): every browser runs a classic service worker.
import { defineConfig } from 'tsup';

const common = { dts: true, target: 'es2022', clean: false, tsconfig: 'tsconfig.json' } as const;

export default defineConfig([
  { ...common, entry: ['src/index.ts'], format: ['esm', 'cjs'], platform: 'neutral' },
  // One build per browser entry: built together, their declarations would share a hashed file.
  { ...common, entry: { 'web/index': 'src/web/index.ts' }, format: ['esm'], platform: 'browser' },
  { ...common, entry: { 'web/service-worker': 'src/web/service-worker.ts' }, format: ['esm'], platform: 'browser' },
  { ...common, entry: { 'web/service-worker': 'src/web/service-worker.ts' }, format: ['iife'], platform: 'browser', globalName: 'HeraldServiceWorker', dts: false },
]);

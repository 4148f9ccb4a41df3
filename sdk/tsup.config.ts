// The package's build (`npm run build`, and `npm pack` before packing): ESM and CommonJS bundles of
// src/index.ts with their type declarations, for Node 20 and later and for bundlers. The package has
// no runtime dependency: the generated client needs only fetch.
import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  target: 'es2022',
  platform: 'neutral',
  clean: true,
  tsconfig: 'tsconfig.json',
});

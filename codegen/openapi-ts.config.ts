// hey-api: the typed client in sdk/src/generated, generated from the hand-maintained document. The
// generator empties its output folder on every run, so the package's hand-written layer lives
// beside it in sdk/src, never inside it.
import { defineConfig } from '@hey-api/openapi-ts';

export default defineConfig({
  input: './openapi/openapi.yaml',
  output: { path: './sdk/src/generated', module: { extension: '.ts' } },
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
});

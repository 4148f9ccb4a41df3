// hey-api: the typed client SDK in sdk/src, generated from the hand-maintained document.
import { defineConfig } from '@hey-api/openapi-ts';

export default defineConfig({
  input: './openapi/openapi.yaml',
  output: { path: './sdk/src', module: { extension: '.ts' } },
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
});

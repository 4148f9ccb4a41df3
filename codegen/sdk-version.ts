// The SDK package's version is the document's `info.version`: a client is published for exactly one
// version of the API. Rewrites sdk/package.json only when they differ (codegen-check then sees it).
import { readFileSync, writeFileSync } from 'node:fs';
import { parse } from 'yaml';

const document = parse(readFileSync(new URL('../openapi/openapi.yaml', import.meta.url), 'utf8')) as { info: { version: string } };
const packageFile = new URL('../sdk/package.json', import.meta.url);
const packageJson = JSON.parse(readFileSync(packageFile, 'utf8')) as { version: string };
if (packageJson.version !== document.info.version) {
  packageJson.version = document.info.version;
  writeFileSync(packageFile, `${JSON.stringify(packageJson, null, 2)}\n`);
}

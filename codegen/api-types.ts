// openapi-typescript: the server's request and response types in src/generated/api.ts, generated
// from the hand-maintained document (the CLI's output, plus one transform).
import { writeFileSync } from 'node:fs';
import openapiTS, { astToString, COMMENT_HEADER, UNKNOWN } from 'openapi-typescript';

const document = new URL('../openapi/openapi.yaml', import.meta.url);
const output = new URL('../src/generated/api.ts', import.meta.url);

const ast = await openapiTS(document, {
  enumValues: true,
  transform(_schema, options) {
    // JsonValue contains arrays of itself, which TypeScript cannot resolve in the interface this
    // tool emits ("referenced directly or indirectly in its own type annotation"): it is `unknown`
    // to the server, exactly what `additionalProperties: true` gave before.
    if (options.path === '#/components/schemas/JsonValue') return UNKNOWN;
    return undefined;
  },
});
writeFileSync(output, COMMENT_HEADER + astToString(ast));

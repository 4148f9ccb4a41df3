import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export const documentPath = new URL('../../openapi/openapi.yaml', import.meta.url);

/** The hand-maintained contract: it validates requests and responses and is served as JSON. */
export function loadDocument(): Record<string, unknown> {
  return parse(readFileSync(documentPath, 'utf8')) as Record<string, unknown>;
}

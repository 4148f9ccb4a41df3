import { readFileSync } from 'node:fs';
import { load } from 'js-yaml';

export const documentPath = new URL('../../openapi/openapi.yaml', import.meta.url);

/**
 * The hand-maintained contract: it validates requests and responses and is served as JSON.
 * Parsed with js-yaml: every process that serves the API (and every test file) parses it at
 * start, and js-yaml reads it an order of magnitude faster than `yaml`, to the same object.
 */
export function loadDocument(): Record<string, unknown> {
  return load(readFileSync(documentPath, 'utf8')) as Record<string, unknown>;
}

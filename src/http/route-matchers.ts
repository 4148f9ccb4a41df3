// express-openapi-validator 5.6.2 finds a request's operation by compiling each route's path
// pattern with path-to-regexp on every request, until one matches (routes most specific first):
// about 4 µs a route, the eighth route for GET notification, a tenth of that read's CPU. A compiled
// pattern depends only on the pattern and its options, and its regular expression keeps no state
// between matches (no `g` or `y` flag), so the module the validator calls is given a memo of them.
// Delete this file once the validator caches them itself (cdimascio/express-openapi-validator#1217).
import { createRequire } from 'node:module';

type Compiled = { regexp: RegExp; keys: unknown[] };
type Compile = ((path: unknown, options?: object) => Compiled) & { memoized?: true };

/** The path-to-regexp module the validator resolves (its own copy, were it ever to have one). */
export function validatorPathToRegexp(): { pathToRegexp: Compile } {
  const validator = createRequire(import.meta.url).resolve('express-openapi-validator');
  return createRequire(validator)('path-to-regexp') as { pathToRegexp: Compile };
}

/** Once per process: the path-to-regexp the validator resolves compiles each pattern once. */
export function memoizeValidatorRouteMatchers(): void {
  const pathToRegexp = validatorPathToRegexp();
  const compile = pathToRegexp.pathToRegexp;
  if (compile.memoized) return;
  const compiled = new Map<string, Compiled>();
  const memoized: Compile = (path, options) => {
    // Patterns come from the document and the app's routes: a fixed, small set.
    if (typeof path !== 'string') return compile(path, options);
    const key = `${JSON.stringify(options ?? {})} ${path}`;
    let found = compiled.get(key);
    if (!found) compiled.set(key, (found = compile(path, options)));
    return found;
  };
  memoized.memoized = true;
  pathToRegexp.pathToRegexp = memoized;
}

// pg-boss sends its statements as text each time: Postgres parses and plans every fetch, complete
// and insert anew, about 0.5 ms of planning a fetch (most fetches find nothing: the workers' polls
// and wake-ups). Its pool's connections use this client instead, which runs each text of one data
// statement as a named prepared statement, so that each connection parses and plans it once (a
// generic plan: queue.ts).
import { createHash } from 'node:crypto';
import pg from 'pg';

/**
 * How many distinct statements are prepared at most; any other runs unnamed. pg-boss builds its
 * SQL from a bounded set of shapes (queue names and options inlined, values as parameters), so
 * this is a guard against a text that would vary per call, never reached in practice.
 */
const maxPrepared = 500;
const names = new Map<string, string>();

function preparedName(text: string): string | undefined {
  let name = names.get(text);
  if (name === undefined && names.size < maxPrepared) {
    name = `s${createHash('sha1').update(text).digest('base64url')}`;
    names.set(text, name);
  }
  return name;
}

/**
 * One data statement: pg-boss's fetches have their values inlined and no parameters. Texts of
 * several statements (its migrations) cannot be prepared, nor should a transaction's BEGIN be.
 */
const singleDataStatement = /^\s*(with|select|insert|update|delete)\b[^;]*$/i;

export class PreparingClient extends pg.Client {
  // @ts-expect-error: pg.Client's query has a dozen overloads; this one forwards them all.
  override query(config: unknown, values?: unknown, callback?: unknown) {
    if (typeof config === 'string' && singleDataStatement.test(config)) {
      const name = preparedName(config);
      // @ts-expect-error: see above.
      if (name !== undefined) return super.query({ name, text: config, values: Array.isArray(values) ? values : [] }, typeof values === 'function' ? values : callback);
    }
    // @ts-expect-error: see above.
    return super.query(config, values, callback);
  }
}

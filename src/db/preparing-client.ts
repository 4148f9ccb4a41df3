// pg-boss sends its statements as text each time: Postgres parses and plans every fetch, complete
// and insert anew, about 0.5 ms of planning a fetch (most fetches find nothing: the workers' polls
// and wake-ups). Its pool's connections use this client instead, which runs each text of one data
// statement as a named prepared statement, so that each connection parses and plans it once (a
// generic plan: queue.ts).
import { createHash } from 'node:crypto';
import pg from 'pg';

/**
 * How many distinct statements are prepared at most; any other runs unnamed. pg-boss builds its
 * SQL from a bounded set of shapes (queue names and options inlined, values as parameters): 37
 * texts through a benchmark's fanouts, deliveries and maintenance. This guards against a text that
 * would vary per call.
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
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // Assigned rather than overridden: pg.Client's query has a dozen overloads, all forwarded here.
    const query = this.query.bind(this) as (config: unknown, values?: unknown, callback?: unknown) => unknown;
    this.query = ((config: unknown, values?: unknown, callback?: unknown) => {
      const name = typeof config === 'string' && singleDataStatement.test(config) ? preparedName(config) : undefined;
      if (name === undefined) return query(config, values, callback);
      // (text, callback) as well as (text, values, callback).
      return typeof values === 'function' ? query({ name, text: config, values: [] }, values) : query({ name, text: config, values: values ?? [] }, callback);
    }) as pg.Client['query'];
  }
}

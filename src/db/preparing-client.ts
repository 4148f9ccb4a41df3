// node-postgres sends a statement with values as an unnamed one: Postgres parses and plans it
// anew every time. Every pool of Herald's uses this client instead, which runs each text of one data
// statement as a named prepared statement, so that each connection parses it once:
// - pg-boss's pool, with `plan_cache_mode=force_generic_plan` (queue.ts): most of its fetches are
//   polls that find nothing, and planning each anew cost more than running it;
// - Herald's own (the ORM's, the sends', the leases'), with Postgres' default choice of plan: a
//   deliver batch's read and its outcomes' update cost Postgres less CPU once they are not parsed
//   and analysed anew (make bench-statements), and Postgres still plans a call for its own values
//   where a generic plan would cost more.
import { createHash } from 'node:crypto';
import pg from 'pg';

/**
 * How many distinct statements are prepared at most; any other runs unnamed. pg-boss builds its
 * SQL from a bounded set of shapes (queue names and options inlined, values as parameters), a few
 * dozen texts. Herald's own are fixed texts with values as parameters (db/sql/), and the ORM's vary only with the length of an `in` list.
 * This guards against a text that would vary per call.
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

type Query = (config: unknown, values?: unknown, callback?: unknown) => never;

class Preparing extends pg.Client {
  // pg.Client's query has a dozen overloads, with the text or a config first: all arrive here.
  override query(config: unknown, values?: unknown, callback?: unknown): never {
    const query = super.query as unknown as Query;
    const name = typeof config === 'string' && singleDataStatement.test(config) ? preparedName(config) : undefined;
    if (name === undefined) return query.call(this, config, values, callback);
    // (text, callback) as well as (text, values, callback).
    return typeof values === 'function'
      ? query.call(this, { name, text: config, values: [] }, values)
      : query.call(this, { name, text: config, values: values ?? [] }, callback);
  }
}

/**
 * A pg.Client whose query runs each text of one data statement as a named prepared statement,
 * typed as pg.Client (its query keeps pg's overloads). Every pool of Herald's is given it as its
 * `Client`; test/upgrade-guards.test.ts proves that each (pg.Pool, the ORM's, pg-boss's) still
 * runs its statements through this method.
 */
export const PreparingClient = Preparing as unknown as typeof pg.Client;
export type PreparingClient = pg.Client;

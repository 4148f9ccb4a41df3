// node-postgres sends a statement with values as an unnamed one: Postgres parses and plans it
// anew every time. Every pool of Herald's uses this client instead, which runs each text of one data
// statement as a named prepared statement, so that each connection parses it once:
// - pg-boss's pool, with `plan_cache_mode=force_generic_plan` (queue.ts): most of its fetches are
//   polls that find nothing, and planning each anew cost more than running it;
// - Herald's own (the ORM's, the sends', the leases'), with Postgres' default choice of plan: a
//   deliver batch's read and its outcomes' update cost Postgres less CPU once they are not parsed
//   and analysed anew (make bench-statements), and Postgres still plans a call for its own values
//   where a generic plan would cost more.
//
// It also keeps the bounds of db/bounds.ts: an error while opening the connection is a
// ConnectionFailed (the database is unavailable, whatever the driver or the server said), and a
// connection whose statement was not answered within pg's query_timeout is closed, so that the pool
// drops it instead of lending it out again behind a statement that may never be answered.
//
// And a pool's connections are retired when a database outage ends (retireConnections): a
// connection opened before the outage may sit on a link that will never carry anything again (a
// half-open link, a partition), and would hold each statement lent to it until its bound.
import { createHash } from 'node:crypto';
import pg from 'pg';
import { ConnectionFailed, ConnectionRetired, queryReadTimeout } from './unavailable.ts';

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

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;
type Callback = (error: unknown, result?: unknown) => void;
type ConnectCallback = (error: unknown, ...rest: unknown[]) => void;
type Connect = (callback?: ConnectCallback) => Promise<unknown> | undefined;

class Preparing extends pg.Client {
  /** Ended by retireConnections: what fails on it from then on is a ConnectionRetired. */
  private retired = false;

  // pg.Client's query has a dozen overloads, with the text or a config first: all arrive here.
  override query(config: unknown, values?: unknown, callback?: unknown): never {
    const query = super.query as unknown as Query;
    // The answer, whichever way it comes back (a callback, or the promise), is watched for pg's
    // read timeout (query_timeout).
    const watched = (given: unknown) =>
      typeof given === 'function'
        ? (error: unknown, result?: unknown) => {
            this.closeIfUnanswered(error);
            (given as Callback)(this.failure(error), result);
          }
        : given;
    const name = typeof config === 'string' && singleDataStatement.test(config) ? preparedName(config) : undefined;
    const result =
      name === undefined
        ? query.call(this, config, watched(values), watched(callback))
        : // (text, callback) as well as (text, values, callback).
          typeof values === 'function'
          ? query.call(this, { name, text: config, values: [] }, watched(values))
          : query.call(this, { name, text: config, values: values ?? [] }, watched(callback));
    if (!(result instanceof Promise)) return result as never;
    return result.catch((error: unknown) => {
      this.closeIfUnanswered(error);
      throw this.failure(error);
    }) as never;
  }

  // (callback) as pg-pool calls it, and () as a dedicated session does.
  override connect(callback?: unknown): never {
    const connect = super.connect as unknown as Connect;
    if (typeof callback === 'function') {
      return connect.call(this, (error, ...rest) => (callback as ConnectCallback)(error && new ConnectionFailed(error), ...rest)) as never;
    }
    return connect.call(this)!.catch((error: unknown) => {
      throw new ConnectionFailed(error);
    }) as never;
  }

  /**
   * After pg's read timeout the statement is still on the connection, and whatever is sent next
   * would wait behind it: closed, the connection is dropped by its pool when released.
   */
  private closeIfUnanswered(error: unknown): void {
    if (error instanceof Error && error.message === queryReadTimeout) this.end().catch(() => undefined);
  }

  private failure(error: unknown): unknown {
    return error && this.retired ? new ConnectionRetired(error) : error;
  }

  /**
   * Drops the connection as a failed link would: its socket is destroyed (pg's own end() does so
   * only under an active statement, and otherwise waits for a goodbye a hung link never carries).
   * A statement waiting on it fails at once; an idle one leaves its pool, which never lends it again.
   */
  retire(): void {
    this.retired = true;
    this.connection.stream.destroy();
  }
}

/** The pools' connections, each with the time it was opened. */
const pooled = new Map<PoolClient, number>();

class PoolClient extends Preparing {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // A connection that fails while lent out, between statements, fails its holder's next
    // statement; unheard, the 'error' event would end the process.
    this.on('error', () => undefined);
    this.once('end', () => pooled.delete(this));
  }

  override connect(callback?: unknown): never {
    const opened = () => pooled.set(this, Date.now());
    if (typeof callback === 'function') {
      return super.connect((error: unknown, ...rest: unknown[]) => {
        if (!error) opened();
        (callback as ConnectCallback)(error, ...rest);
      });
    }
    return (super.connect() as unknown as Promise<unknown>).then((value) => {
      opened();
      return value;
    }) as never;
  }
}

/**
 * Drops every pool connection to `database` (a URL: its host, port and database name) opened
 * before `openedBefore` (the start of an outage of it that is now over), idle or busy; the pools
 * open new ones. A statement waiting on one fails with a
 * ConnectionRetired, which is retried like an outage's failure but does not start another
 * (outage.ts). Returns how many were dropped. Sessions (PreparingClient outside a pool: the job leases' lock,
 * the migrations' lock) are never retired: their locks last as long as their connection.
 */
export function retireConnections(database: string, openedBefore: number): number {
  const url = new URL(database);
  const [host, port, name] = [url.hostname, Number(url.port || 5432), decodeURIComponent(url.pathname.slice(1))];
  let retired = 0;
  for (const [client, openedAt] of pooled) {
    if (openedAt >= openedBefore || client.host !== host || client.port !== port || client.database !== name) continue;
    pooled.delete(client);
    client.retire();
    retired++;
  }
  return retired;
}

/**
 * A pg.Client whose query runs each text of one data statement as a named prepared statement,
 * typed as pg.Client (its query keeps pg's overloads). Every pool of Herald's is given it as its
 * `Client`; test/upgrade-guards.test.ts proves that each (pg.Pool, the ORM's, pg-boss's) still
 * runs its statements through this method.
 */
export const PreparingClient = Preparing as unknown as typeof pg.Client;
export type PreparingClient = pg.Client;

/** PreparingClient as every pool of Herald's is given it (`Client`): retired when an outage ends (retireConnections). */
export const PreparingPoolClient = PoolClient as unknown as typeof pg.Client;

// Pools of Herald's own beside the ORM's: a send's pipelined transactions and its limiter, the
// leases, benchmarks.
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { boundedConnections, defaultBounds, type DatabaseBounds } from './bounds.ts';
import { PreparingPoolClient } from './preparing-client.ts';

/**
 * A pool of its own, beside the ORM's. A connection the database cuts emits 'error': on an idle one
 * the pool's listener takes it, but one checked out between two statements has none, and an
 * unheard 'error' ends the process. Every connection gets a listener; the failure still reaches
 * the statement that uses the connection. Its connections prepare each statement text once
 * (PreparingPoolClient), as the ORM's do.
 */
export function openListenedPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool({ Client: PreparingPoolClient, ...config });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** A Kysely on a pool of its own (a service beside the ORM's, a benchmark), with these bounds on every call. */
export function openStatementPool(url: string, max: number, bounds: DatabaseBounds = defaultBounds): { db: Kysely<unknown>; close(): Promise<void> } {
  const pool = openListenedPool({ connectionString: url, max, ...boundedConnections(bounds) });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  return { db, close: () => db.destroy() };
}

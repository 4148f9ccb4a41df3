// Pools of Herald's own beside the ORM's: a send's pipelined transactions and its limiter, the
// leases, benchmarks.
import { Kysely, PostgresDialect, type PostgresPool } from 'kysely';
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

/**
 * A Kysely on a pool of its own (a service beside the ORM's, a benchmark), with these bounds on every
 * call. close() refuses new statements, lets those already waiting for a connection get it (each
 * within the connect bound), then ends the pool, which waits for their statements to give their
 * connections back. Kysely's driver forgets its pool as it is destroyed and fails a connection that
 * arrives afterwards without giving it back: ended at once, the pool would wait for it forever (a
 * database probe opening a connection at shutdown).
 */
export function openStatementPool(url: string, max: number, bounds: DatabaseBounds = defaultBounds): { db: Kysely<unknown>; close(): Promise<void> } {
  const pool = openListenedPool({ connectionString: url, max, ...boundedConnections(bounds) });
  const waiting = new Set<Promise<unknown>>();
  let closing = false;
  const lending: PostgresPool = {
    options: pool.options,
    connect: () => {
      if (closing) return Promise.reject(new Error('the statement pool is closed'));
      const connection = pool.connect();
      waiting.add(connection);
      const arrived = () => waiting.delete(connection);
      connection.then(arrived, arrived);
      return connection;
    },
    end: () => pool.end(),
  };
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: lending }) });
  return {
    db,
    close: async () => {
      closing = true;
      await Promise.allSettled(waiting);
      await db.destroy();
    },
  };
}

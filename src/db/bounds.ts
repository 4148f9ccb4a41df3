// How long a database call may take, per pool. A server-side timeout (statement_timeout,
// lock_timeout) ends a statement that runs or waits too long and keeps its connection; it cannot
// end a stall where the database answers nothing, so the client bounds every call too (pg's
// query_timeout, after which the connection is closed: db/preparing-client.ts), and opening a
// connection or waiting for a free one (connectionTimeoutMillis). TCP keepalive finds a peer that
// vanished while a connection sat idle.
import type pg from 'pg';

export type DatabaseBounds = {
  /** Opening a connection, or waiting for a free one of the pool. */
  connectMs: number;
  /** Postgres' statement_timeout; the client gives up `clientGraceMs` later. 0: no limit (migrations). */
  statementMs: number;
  /** Postgres' lock_timeout (a lock wait is ended with its own message, not as a slow statement); 0: none. */
  lockMs: number;
  /** Postgres' idle_in_transaction_session_timeout: a client that vanished mid-transaction gives its locks back. 0: none. */
  idleInTransactionMs: number;
};

/** Bounds when none are given: the CLI's commands, the tests, the benchmarks. A worker's defaults. */
export const defaultBounds: DatabaseBounds = { connectMs: 10_000, statementMs: 30_000, lockMs: 0, idleInTransactionMs: 0 };

/** Migrations may rewrite a large table, and wait for another process's: only the connection is bounded. */
export const migrationBounds: DatabaseBounds = { connectMs: 10_000, statementMs: 0, lockMs: 0, idleInTransactionMs: 0 };

/**
 * The outage watch's and readiness's `select 1`, on a pool of its own: answered, or given up, within
 * 2 s whatever the role's pools are waiting for.
 */
export const probeBounds: DatabaseBounds = { connectMs: 800, statementMs: 300, lockMs: 0, idleInTransactionMs: 0 };

/**
 * How much longer than the server's statement_timeout the client waits: time for the server's own
 * cancel to arrive, which keeps the connection. Past it the database answered nothing.
 */
export const clientGraceMs = 500;

/** Idle time before the first keepalive probe of a connection. */
const keepAliveDelayMs = 10_000;

/**
 * The client's side of these bounds alone: a session that must never be ended by the server for
 * being slow or idle (the job leases' lock: worker/leases.ts) still gives up on a database that
 * answers nothing.
 */
export function clientSideBounds(bounds: DatabaseBounds): pg.ClientConfig {
  return {
    connectionTimeoutMillis: bounds.connectMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: keepAliveDelayMs,
    ...(bounds.statementMs > 0 ? { query_timeout: bounds.statementMs + clientGraceMs } : {}),
  };
}

/** The pg options (pool and client) that set these bounds. */
export function boundedConnections(bounds: DatabaseBounds): pg.PoolConfig {
  return {
    ...clientSideBounds(bounds),
    ...(bounds.statementMs > 0 ? { statement_timeout: bounds.statementMs } : {}),
    ...(bounds.lockMs > 0 ? { lock_timeout: bounds.lockMs } : {}),
    ...(bounds.idleInTransactionMs > 0 ? { idle_in_transaction_session_timeout: bounds.idleInTransactionMs } : {}),
  };
}

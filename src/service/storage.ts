// What a process keeps its data with: the database (the configured server, or the embedded one when
// DATABASE_URL is unset, migrated) and the key that encrypts credentials. Apart from the service, so
// that admin commands load nothing of the API or the workers.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from '../db/embedded.ts';
import { clientGraceMs, migrationBounds, type DatabaseBounds } from '../db/bounds.ts';
import { migrate, openOrm, type Orm } from '../db/orm.ts';
import type { Logger } from '../logging/logger.ts';
import { credentialsKey } from '../domain/credentials.ts';

/**
 * The key that encrypts provider credentials: HERALD_CREDENTIALS_KEY; on a developer's machine
 * (the embedded database, or pushing to the simulators) a key kept beside the data, created on
 * first use.
 */
export function resolveCredentialsKey(config: Config, options: { simulated?: boolean } = {}): Buffer | null {
  const configured = credentialsKey(config.HERALD_CREDENTIALS_KEY);
  if (configured || (config.DATABASE_URL && !options.simulated)) return configured;
  const file = path.join(config.dataDir, 'credentials.key');
  if (!existsSync(file)) {
    mkdirSync(config.dataDir, { recursive: true });
    writeFileSync(file, randomBytes(32).toString('base64'), { mode: 0o600 });
  }
  return Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
}

export type Database = { orm: Orm; url: string; close(): Promise<void> };

export type RoleBounds = { api: DatabaseBounds; worker: DatabaseBounds };

/**
 * The bounds of each role's database calls (db/bounds.ts). A transaction may sit idle only as long
 * as what it waits on between two statements: the API's, a statement of another pool (a send's
 * quota); a worker's, a provider's answer (a chunk is pushed inside its transaction).
 */
export function roleBounds(config: Config): RoleBounds {
  const connectMs = config.HERALD_DB_CONNECT_TIMEOUT_SECONDS * 1000;
  const statementMs = config.HERALD_DB_STATEMENT_TIMEOUT_SECONDS * 1000;
  const workerStatementMs = config.HERALD_DB_WORKER_STATEMENT_TIMEOUT_SECONDS * 1000;
  return {
    api: {
      connectMs,
      statementMs,
      lockMs: config.HERALD_DB_LOCK_TIMEOUT_SECONDS * 1000,
      idleInTransactionMs: connectMs + statementMs + clientGraceMs + 1000,
    },
    worker: {
      connectMs,
      statementMs: workerStatementMs,
      lockMs: 0,
      idleInTransactionMs: config.HERALD_PROVIDER_DEADLINE_SECONDS * 1000 + workerStatementMs,
    },
  };
}

/** How long closing the database waits for connections still held by jobs cut short. */
const closeWaitMs = 1000;

/**
 * Whether the database could not be reached or refused us: a network error, or Postgres' classes
 * 08 (connection), 28 (authorization) and 3D000 (no such database). A failed migration is not.
 */
function isConnectionFailure(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  return ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH', '3D000'].includes(code) || /^(08|28)/.test(code);
}

/**
 * A failure to connect, as an error that names the setting to fix and where it points (never its
 * password): the driver's own message (`connect ECONNREFUSED 127.0.0.1:5432`) names neither.
 */
function namingDatabaseUrl(error: unknown, databaseUrl: string): Error {
  const url = new URL(databaseUrl);
  const where = `${url.hostname}:${url.port || 5432}${url.pathname}`;
  // Read as a field: an error from another realm (a test's VM context) is not `instanceof Error`.
  const message = (error as { message?: unknown }).message ?? String(error);
  return new Error(`Cannot use the database DATABASE_URL names (${where}): ${message}. Check DATABASE_URL, or unset it for the embedded Postgres.`, {
    cause: error,
  });
}

/**
 * A job cut short by the grace period may still hold a connection (a chunk's transaction waits for
 * its provider's answer): its pushes are handed back, and the connection dies with the process (or
 * the embedded server), rolling it back. So closing waits for it only briefly.
 */
export async function closeOrm(orm: Orm): Promise<void> {
  await Promise.race([orm.close(), sleep(closeWaitMs, undefined, { ref: false })]);
}

/**
 * Opens the configured database, or the embedded one when DATABASE_URL is unset, migrated; its ORM
 * with these bounds. Migrations run on an ORM of their own, without a statement bound.
 */
export async function openDatabase(config: Config, logger: Logger, bounds: DatabaseBounds): Promise<Database> {
  const embedded = config.DATABASE_URL
    ? null
    : await startEmbeddedPostgres({
        dataDir: config.dataDir,
        port: config.HERALD_EMBEDDED_PG_PORT,
        logger,
      });
  const url = config.DATABASE_URL ?? embedded!.url;
  try {
    const migrating = await openOrm(url, 1, migrationBounds);
    try {
      await migrate(migrating);
    } catch (error) {
      // A failure to connect comes wrapped (db/unavailable.ts ConnectionFailed): the driver's own is its cause.
      const failure = (error as { failedWhile?: unknown }).failedWhile === 'connecting' ? (error as { cause?: unknown }).cause : error;
      throw config.DATABASE_URL && isConnectionFailure(failure) ? namingDatabaseUrl(failure, config.DATABASE_URL) : error;
    } finally {
      await migrating.close();
    }
    const orm = await openOrm(url, config.HERALD_DB_POOL_MAX, bounds);
    return {
      orm,
      url,
      close: async () => {
        await closeOrm(orm);
        await embedded?.stop();
      },
    };
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
}

// What a process keeps its data with: the database (the configured server, or the embedded one when
// DATABASE_URL is unset, migrated) and the key that encrypts credentials. Apart from the service, so
// that admin commands load nothing of the API or the workers.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from '../db/embedded.ts';
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

/** Opens the configured database, or the embedded one when DATABASE_URL is unset, migrated. */
export async function openDatabase(config: Config, logger: Logger): Promise<Database> {
  const embedded = config.DATABASE_URL
    ? null
    : await startEmbeddedPostgres({
        dataDir: config.dataDir,
        port: config.HERALD_EMBEDDED_PG_PORT,
        logger,
      });
  const url = config.DATABASE_URL ?? embedded!.url;
  try {
    const orm = await openOrm(url, config.HERALD_DB_POOL_MAX);
    await migrate(orm).catch(async (error: unknown) => {
      await orm.close();
      throw config.DATABASE_URL && isConnectionFailure(error) ? namingDatabaseUrl(error, config.DATABASE_URL) : error;
    });
    return {
      orm,
      url,
      close: async () => {
        // A job cut short by the grace period may still hold a connection (a chunk's transaction
        // waits for its provider's answer): its pushes are handed back, and the connection dies with
        // the process (or the embedded server), rolling it back. So closing waits for it only briefly.
        await Promise.race([orm.close(), sleep(closeWaitMs, undefined, { ref: false })]);
        await embedded?.stop();
      },
    };
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
}

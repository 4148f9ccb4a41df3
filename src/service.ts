// Composition of a Herald process: database (given or embedded), ORM, job queue, and the roles
// it plays (API, worker). Everything opened here is closed by the returned stop().
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import path from 'node:path';
import pg from 'pg';
import type { PgBoss } from 'pg-boss';
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from './db/embedded.ts';
import { migrate, openOrm, type Orm } from './db/orm.ts';
import { assertCredentialsReadable, credentialsKey } from './domain/credentials.ts';
import { createSendLimiter } from './domain/rate-limits.ts';
import { createProviderClients, type ProviderClients } from './fanout/clients.ts';
import { startMaintenance } from './fanout/maintenance.ts';
import { startBoss } from './fanout/queue.ts';
import { startWorkers } from './fanout/worker.ts';
import { createApp } from './http/app.ts';
import { loadDocument } from './http/document.ts';
import type { Logger } from './logger.ts';
import type { ProviderEndpoints } from './providers/provider.ts';

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

export function configuredEndpoints(config: Config): ProviderEndpoints {
  return {
    apns: config.HERALD_APNS_ENDPOINT,
    fcm: config.HERALD_FCM_ENDPOINT,
    ca: config.HERALD_PROVIDER_CA_FILE ? readFileSync(config.HERALD_PROVIDER_CA_FILE, 'utf8') : undefined,
  };
}

export type Database = { orm: Orm; url: string; close(): Promise<void> };

/** Opens the configured database, or the embedded one when DATABASE_URL is unset, migrated. */
export async function openDatabase(config: Config, logger: Logger, options: { ownEmbedded: boolean }): Promise<Database> {
  const embedded = config.DATABASE_URL
    ? null
    : await startEmbeddedPostgres({
        dataDir: config.dataDir,
        port: config.HERALD_EMBEDDED_PG_PORT,
        logger,
        own: options.ownEmbedded,
      });
  const url = config.DATABASE_URL ?? embedded!.url;
  try {
    const orm = await openOrm(url, config.HERALD_DB_POOL_MAX);
    await migrate(orm);
    return {
      orm,
      url,
      close: async () => {
        await orm.close();
        await embedded?.stop();
      },
    };
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
}

/** The validator compiles the document on its first request (~300 ms): pay that now, not on a client. */
async function warmUp(server: Server, logger: Logger): Promise<void> {
  const address = server.address();
  if (!address || typeof address === 'string') return;
  const host = ['0.0.0.0', '::'].includes(address.address) ? '127.0.0.1' : address.address;
  try {
    await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${address.port}/healthz`);
  } catch (error) {
    logger.warn({ err: error }, 'warm-up request failed');
  }
}

export type Service = {
  database: Database;
  boss: PgBoss;
  server: Server | null;
  credentialsKey: Buffer | null;
  stop(): Promise<void>;
};

export async function startService(
  config: Config,
  logger: Logger,
  roles: { api: boolean; worker: boolean },
  simulators?: ProviderEndpoints,
): Promise<Service> {
  const endpoints = simulators ?? configuredEndpoints(config);
  const database = await openDatabase(config, logger, { ownEmbedded: true });
  const key = resolveCredentialsKey(config, { simulated: simulators !== undefined });
  // Only workers open credentials; an API process has no use for the key.
  if (roles.worker) await assertCredentialsReadable(database.orm.em.fork(), key);
  const boss = await startBoss(database.url, logger, { worker: roles.worker, schema: config.HERALD_QUEUE_SCHEMA });
  let clients: ProviderClients | null = null;
  if (roles.worker) {
    clients = createProviderClients({ key, endpoints, logger });
    await startWorkers({
      orm: database.orm,
      boss,
      clients,
      logger,
      concurrency: config.HERALD_WORKER_CONCURRENCY,
      batchSize: config.HERALD_DELIVER_BATCH_SIZE,
    });
    await startMaintenance(boss, database.orm, logger, { retentionDays: config.HERALD_RETENTION_DAYS });
  }
  let server: Server | null = null;
  let limiterPool: pg.Pool | null = null;
  if (roles.api) {
    limiterPool = new pg.Pool({ connectionString: database.url, max: 4 });
    // An idle connection the server closes is an 'error' event: without a listener it would end the process.
    limiterPool.on('error', (error) => logger.warn({ err: error }, 'rate-limit database connection lost'));
    const app = createApp({
      orm: database.orm,
      boss,
      logger,
      document: loadDocument(),
      bodyLimit: config.HERALD_BODY_LIMIT,
      validateResponses: config.HERALD_VALIDATE_RESPONSES,
      sendLimiter: createSendLimiter(limiterPool),
      defaultSendPolicy: { quota: config.HERALD_SEND_QUOTA, windowSeconds: config.HERALD_SEND_WINDOW_SECONDS },
    });
    server = await new Promise<Server>((resolve, reject) => {
      const listening = app.listen(config.PORT, config.HOST, (error?: Error) => (error ? reject(error) : resolve(listening)));
    });
    logger.info({ address: server.address() }, 'API listening');
    await warmUp(server, logger);
  }
  const stop = async () => {
    if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
    // Graceful: in-flight batches finish (or are released to another worker) before we close.
    await boss.stop({ graceful: true, timeout: 20_000 });
    await clients?.close();
    await limiterPool?.end();
    await database.close();
  };
  return { database, boss, server, credentialsKey: key, stop };
}

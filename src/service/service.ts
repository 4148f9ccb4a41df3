// Composition of a Herald process: database (given or embedded), ORM, job queue, and the roles
// it plays (API, worker). Everything opened here is closed by the returned stop().
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import path from 'node:path';
import pg from 'pg';
import type { PgBoss } from 'pg-boss';
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from '../db/embedded.ts';
import { migrate, openOrm, type Orm } from '../db/orm.ts';
import { watchDatabase, type OutageWatch } from '../db/outage.ts';
import { ping } from '../db/sql.ts';
import { assertCredentialsReadable, credentialsKey, upgradeSealedCredentials } from '../domain/credentials.ts';
import { createSendLimiter } from '../http/send-limiter.ts';
import { createProviderClients, type ProviderClients } from '../worker/clients.ts';
import { startMaintenance } from '../worker/maintenance.ts';
import { fanoutEnqueuer, startBoss } from '../worker/queue.ts';
import { startWorkers, type Workers } from '../worker/workers.ts';
import { createApp } from '../http/app.ts';
import { loadDocument } from '../http/document.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderEndpoints } from '../providers/provider.ts';

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

function listen(handler: RequestListener, port: number, host: string): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const server = createServer(handler);
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

/** A worker's health for its container: alive, and ready while its database answers. */
function workerHealth(outage: OutageWatch): RequestListener {
  return (req, res) => {
    const path = req.url?.split('?')[0];
    const [status, body] =
      req.method !== 'GET' ? [405, { status: 'method not allowed' }]
      : path === '/healthz' ? [200, { status: 'ok' }]
      : path === '/readyz' ? (outage.down ? [503, { status: 'unavailable' }] : [200, { status: 'ok' }])
      : [404, { status: 'not found' }];
    res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
  };
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

/** `released`: jobs still running when the grace period ended, handed back for another worker. */
export type StopResult = { released: number };

export type Service = {
  database: Database;
  boss: PgBoss;
  server: Server | null;
  credentialsKey: Buffer | null;
  stop(graceMs: number): Promise<StopResult>;
};

export async function startService(
  config: Config,
  logger: Logger,
  roles: { api: boolean; worker: boolean },
  simulators?: ProviderEndpoints,
): Promise<Service> {
  const endpoints = simulators ?? configuredEndpoints(config);
  const database = await openDatabase(config, logger);
  const key = resolveCredentialsKey(config, { simulated: simulators !== undefined });
  // Only workers open credentials; an API process has no use for the key.
  if (roles.worker) await assertCredentialsReadable(database.orm.em.fork(), key);
  if (roles.worker) await upgradeSealedCredentials(database.orm.em.fork(), key, logger);
  let workers: Workers | null = null;
  const outage = watchDatabase({
    probe: () => ping(database.orm.em.fork()),
    logger,
    onDown: () => workers?.pause(),
    onUp: () => workers?.resume(),
  });
  const boss = await startBoss(database.url, logger, { worker: roles.worker, schema: config.HERALD_QUEUE_SCHEMA, outage });
  let clients: ProviderClients | null = null;
  if (roles.worker) {
    clients = createProviderClients({ key, endpoints, logger });
    workers = await startWorkers({
      orm: database.orm,
      boss,
      clients,
      logger,
      concurrency: config.HERALD_WORKER_CONCURRENCY,
      batchSize: config.HERALD_DELIVER_BATCH_SIZE,
      sendDeadlineSeconds: config.HERALD_PROVIDER_DEADLINE_SECONDS,
      queueSchema: config.HERALD_QUEUE_SCHEMA,
      chunkSize: config.HERALD_DELIVER_CHUNK_SIZE,
      outage,
    });
    await startMaintenance(boss, database.orm, logger, { retentionDays: config.HERALD_RETENTION_DAYS });
  }
  let server: Server | null = null;
  let limiterPool: pg.Pool | null = null;
  if (roles.worker && !roles.api && config.HERALD_WORKER_HEALTH_PORT) {
    server = await listen(workerHealth(outage), config.HERALD_WORKER_HEALTH_PORT, config.HOST);
    logger.info({ address: server.address() }, 'worker health listening');
  }
  if (roles.api) {
    limiterPool = new pg.Pool({ connectionString: database.url, max: 4 });
    // An idle connection the server closes is an 'error' event: without a listener it would end the process.
    limiterPool.on('error', (error) => logger.warn({ err: error }, 'rate-limit database connection lost'));
    const app = createApp({
      orm: database.orm,
      enqueueFanout: fanoutEnqueuer(boss),
      logger,
      document: loadDocument(),
      bodyLimit: config.HERALD_BODY_LIMIT,
      validateResponses: config.HERALD_VALIDATE_RESPONSES,
      sendLimiter: createSendLimiter(limiterPool),
      defaultSendPolicy: { quota: config.HERALD_SEND_QUOTA, windowSeconds: config.HERALD_SEND_WINDOW_SECONDS },
    });
    server = await listen(app, config.PORT, config.HOST);
    logger.info({ address: server.address() }, 'API listening');
    await warmUp(server, logger);
  }
  const stop = async (graceMs: number): Promise<StopResult> => {
    outage.stop();
    // No new connections; requests in progress finish (or are cut by the caller's deadline).
    const closed = server ? new Promise<void>((resolve) => server!.close(() => resolve())) : Promise.resolve();
    // In-flight batches have until the grace period ends; then pg-boss fails them, so that another
    // worker retries them (their deliveries are still pending), and its pool closes.
    await boss.stop({ graceful: true, timeout: graceMs });
    const released = workers?.inFlight ?? 0;
    await workers?.stop();
    await closed;
    await clients?.close();
    await limiterPool?.end();
    await database.close();
    return { released };
  };
  return { database, boss, server, credentialsKey: key, stop };
}

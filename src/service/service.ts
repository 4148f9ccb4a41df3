// Composition of a Herald process: database (given or embedded), ORM, job queue, and the roles
// it plays (API, worker). Everything opened here is closed by the returned stop().
import { createServer, type RequestListener, type Server } from 'node:http';
import type { PgBoss } from 'pg-boss';
import type { Config } from './config.ts';
import { configuredEndpoints } from './endpoints.ts';
import { closeOrm, openDatabase, resolveCredentialsKey, roleBounds, type Database, type RoleBounds } from './storage.ts';
import { openOrm, type Orm } from '../db/orm.ts';
import { openDatabaseProbe, watchDatabase, type OutageWatch } from '../db/outage.ts';
import { openPipelinedPool } from '../db/pipelined-pool.ts';
import { tokenCacheMs } from '../domain/applications.ts';
import { checkStoredSecrets, upgradeSealedCredentials } from '../domain/credentials.ts';
import { openSendLimiter } from '../http/send-limiter.ts';
import { createProviderClients } from '../worker/clients.ts';
import { startMaintenance } from '../worker/maintenance.ts';
import { fanoutQueue, queueDepths, startBoss, tagSummaryQueue, webhookEnqueuer } from '../worker/queue.ts';
import { startTagSummaries } from '../worker/tag-summaries.ts';
import { createWebhookSender } from '../worker/webhook-sender.ts';
import { createWebhookOutbox, type WebhookOutbox } from '../domain/webhook-outbox.ts';
import type { EndpointRules } from '../domain/web-push.ts';
import { startWorkers, type Workers } from '../worker/workers.ts';
import { createApp } from '../http/app.ts';
import { loadDocument } from '../http/document.ts';
import type { Logger } from '../logging/logger.ts';
import { collectProcessMetrics, observeQueues } from '../observability/metrics.ts';
import { operationsListener } from './operations.ts';
import type { ProviderEndpoints } from '../providers/provider.ts';

function listen(handler: RequestListener, port: number, host: string): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const server = createServer(handler);
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

/**
 * Before anything starts (an embedded Postgres, the simulators): every port this process will
 * listen on is free, else an error that names it and its setting.
 */
export async function assertPortsFree(config: Config, roles: { api: boolean; worker: boolean }): Promise<void> {
  const wanted: { port: number | undefined; host: string; setting: string }[] = [
    ...(roles.api ? [{ port: config.PORT, host: config.HOST, setting: 'PORT (or --port)' }] : []),
    { port: config.HERALD_METRICS_PORT, host: config.HERALD_METRICS_HOST, setting: 'HERALD_METRICS_PORT' },
    ...(roles.worker && !roles.api ? [{ port: config.HERALD_WORKER_HEALTH_PORT, host: config.HOST, setting: 'HERALD_WORKER_HEALTH_PORT' }] : []),
  ];
  for (const { port, host, setting } of wanted) {
    // 0 asks the system for a free port: nothing to check.
    if (!port) continue;
    try {
      await closeServer(await listen(() => undefined, port, host))();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EADDRINUSE' && code !== 'EACCES') throw error;
      const why = code === 'EADDRINUSE' ? 'is in use' : 'cannot be opened by this user';
      throw new Error(`Port ${port} on ${host} ${why}: nothing was started. Stop what uses it, or set ${setting} to another port.`, { cause: error });
    }
  }
}

const closeServer = (server: Server) => () => new Promise<void>((resolve) => server.close(() => resolve()));

/** The validator compiles the document on its first request: pay that now, not on a client's request. */
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

/**
 * Connections for sends' pipelined transactions in an API process: a send holds one for its two
 * round trips, so at this many in flight more sends wait a moment for a connection.
 */
const sendPoolMax = 5;

/** `released`: jobs still running when the grace period ended, handed back for another worker. */
export type StopResult = { released: number };

export type Service = {
  database: Database;
  boss: PgBoss;
  /** The API's listener (or, for a worker alone, its health checks'). */
  server: Server | null;
  /** Where GET /metrics is answered (HERALD_METRICS_PORT). */
  metricsServer: Server | null;
  credentialsKey: Buffer | null;
  stop(graceMs: number): Promise<StopResult>;
};

export async function startService(
  config: Config,
  logger: Logger,
  roles: { api: boolean; worker: boolean },
  simulators?: ProviderEndpoints,
): Promise<Service> {
  const bounds = roleBounds(config);
  // Each role's units of work on a pool with its bounds: the API's database, or the workers' alone.
  const database = await openDatabase(config, logger, roles.api ? bounds.api : bounds.worker);
  // What has started so far, closed in reverse order when a later step fails: a failed start
  // leaves nothing running (an embedded Postgres it started would outlive the process).
  const started: (() => Promise<unknown>)[] = [() => database.close()];
  try {
    return await startOn(database, bounds, config, logger, roles, simulators, (close) => started.push(close));
  } catch (error) {
    for (const close of started.reverse()) {
      await close().catch((closeError: unknown) => logger.warn({ err: closeError }, 'closing after a failed start failed'));
    }
    throw error;
  }
}

/** The rest of startService(), once its database is open; `started` is told how to close each part it starts. */
async function startOn(
  database: Database,
  bounds: RoleBounds,
  config: Config,
  logger: Logger,
  roles: { api: boolean; worker: boolean },
  simulators: ProviderEndpoints | undefined,
  started: (close: () => Promise<unknown>) => void,
): Promise<Service> {
  const endpoints = simulators ?? configuredEndpoints(config);
  const workerOrm = roles.worker && roles.api ? await openOrm(database.url, config.HERALD_DB_POOL_MAX, bounds.worker) : database.orm;
  if (workerOrm !== database.orm) started(() => closeOrm(workerOrm));
  const key = resolveCredentialsKey(config, { simulated: simulators !== undefined });
  // Only workers open credentials; an API process has no use for the key.
  if (roles.worker) await checkStoredSecrets(workerOrm.em.fork(), key, logger);
  if (roles.worker) await upgradeSealedCredentials(workerOrm.em.fork(), key, logger);
  let workerPart: WorkerPart | null = null;
  const probe = openDatabaseProbe(database.url);
  started(() => probe.close());
  const outage = watchDatabase({
    probe: probe.probe,
    database: database.url,
    logger,
    roles,
    onDown: () => workerPart?.workers.pause(),
    onUp: () => workerPart?.workers.resume(),
  });
  started(async () => outage.stop());
  const boss = await startBoss(database.url, logger, {
    worker: roles.worker,
    schema: config.HERALD_QUEUE_SCHEMA,
    outage,
    bounds: roles.worker ? bounds.worker : bounds.api,
  });
  started(() => boss.stop({ graceful: false }));
  const webhooks = createWebhookOutbox(webhookEnqueuer(boss));
  if (roles.worker) {
    workerPart = await startWorkerPart(config, logger, { database, orm: workerOrm, bounds, boss, key, endpoints, outage, webhooks });
    const { workers, close } = workerPart;
    started(async () => {
      await workers.stop();
      await close();
      observeQueues(null);
    });
  }
  const listeners = await startOperationsListeners(config, logger, roles, outage, started);
  let server = listeners.health;
  let apiPart: ApiPart | null = null;
  if (roles.api) {
    apiPart = await startApiPart(config, logger, { database, bounds, boss, outage, webhooks, readiness: probe.probe, endpoints });
    server = apiPart.server;
  }
  const stop = async (graceMs: number): Promise<StopResult> => {
    outage.stop();
    // No new connections; requests in progress finish (or are cut by the caller's deadline).
    const closed = Promise.all(
      [...new Set([server, listeners.metrics])].map((open) => open && closeServer(open)()),
    );
    // In-flight batches have until the grace period ends; then pg-boss fails them, so that another
    // worker retries them (their deliveries are still pending), and its pool closes.
    await boss.stop({ graceful: true, timeout: graceMs });
    const released = workerPart?.workers.inFlight ?? 0;
    await workerPart?.workers.stop();
    await closed;
    await workerPart?.close();
    await apiPart?.close();
    if (roles.worker) observeQueues(null);
    await probe.close();
    if (workerOrm !== database.orm) await closeOrm(workerOrm);
    await database.close();
    return { released };
  };
  return { database, boss, server, metricsServer: listeners.metrics, credentialsKey: key, stop };
}

type Shared = { database: Database; bounds: RoleBounds; boss: PgBoss; outage: OutageWatch; webhooks: WebhookOutbox };
type WorkerPart = { workers: Workers; close(): Promise<void> };
type ApiPart = { server: Server; close(): Promise<void> };

/** The job workers, their provider clients and webhook sender, and the maintenance schedule. */
async function startWorkerPart(
  config: Config,
  logger: Logger,
  shared: Shared & { orm: Orm; key: Buffer | null; endpoints: ProviderEndpoints },
): Promise<WorkerPart> {
  const { orm, bounds, boss, key, endpoints, outage, webhooks } = shared;
  const clients = createProviderClients({ key, endpoints, logger });
  const webhookSender = createWebhookSender({
    allowPrivate: config.HERALD_WEBHOOK_ALLOW_PRIVATE,
    timeoutMs: config.HERALD_WEBHOOK_TIMEOUT_SECONDS * 1000,
  });
  const workers = await startWorkers({
    orm,
    bounds: bounds.worker,
    boss,
    clients,
    logger,
    concurrency: config.HERALD_WORKER_CONCURRENCY,
    batchSize: config.HERALD_DELIVER_BATCH_SIZE,
    sendDeadlineSeconds: config.HERALD_PROVIDER_DEADLINE_SECONDS,
    queueSchema: config.HERALD_QUEUE_SCHEMA,
    chunkSize: config.HERALD_DELIVER_CHUNK_SIZE,
    pollSeconds: config.HERALD_QUEUE_POLL_SECONDS,
    outage,
    webhooks: {
      outbox: webhooks,
      sender: webhookSender,
      key,
      concurrency: config.HERALD_WEBHOOK_CONCURRENCY,
      retryBaseSeconds: config.HERALD_WEBHOOK_RETRY_BASE_SECONDS,
      windowSeconds: config.HERALD_WEBHOOK_RETRY_WINDOW_SECONDS,
    },
  });
  await startMaintenance(boss, orm, logger, { retentionDays: config.HERALD_RETENTION_DAYS });
  await startTagSummaries(boss, orm, logger);
  // The queue's depth is the same for every process: the workers report it (they keep its counts fresh).
  observeQueues(() => queueDepths(boss));
  return {
    workers,
    async close() {
      await clients.close();
      webhookSender.close();
    },
  };
}

/** GET /metrics (HERALD_METRICS_PORT) and, for a worker alone, its health checks; one server when they share a port. */
async function startOperationsListeners(
  config: Config,
  logger: Logger,
  roles: { api: boolean; worker: boolean },
  outage: OutageWatch,
  started: (close: () => Promise<unknown>) => void,
): Promise<{ metrics: Server | null; health: Server | null }> {
  const healthPort = roles.worker && !roles.api ? config.HERALD_WORKER_HEALTH_PORT : undefined;
  const metricsPort = config.HERALD_METRICS_PORT;
  let metrics: Server | null = null;
  let health: Server | null = null;
  if (metricsPort !== undefined) {
    collectProcessMetrics();
    const shared = metricsPort === healthPort;
    metrics = await listen(operationsListener({ metrics: true, health: shared ? outage : null }), metricsPort, config.HERALD_METRICS_HOST);
    started(closeServer(metrics));
    if (shared) health = metrics;
    logger.info({ address: metrics.address(), health: shared }, 'metrics listening');
  }
  if (healthPort !== undefined && healthPort !== metricsPort) {
    health = await listen(operationsListener({ metrics: false, health: outage }), healthPort, config.HOST);
    started(closeServer(health));
    logger.info({ address: health.address() }, 'worker health listening');
  }
  return { metrics, health };
}

/** Which subscription endpoints the API takes: the configured ones, and the simulator's running here. */
function webPushEndpointRules(config: Config, endpoints: ProviderEndpoints): EndpointRules {
  const simulator = endpoints.webPushSimulator ? [new URL(endpoints.webPushSimulator).host] : [];
  return { extraHosts: [...config.HERALD_WEBPUSH_HOSTS, ...simulator], allowPrivate: config.HERALD_WEBPUSH_ALLOW_PRIVATE || simulator.length > 0 };
}

/** The HTTP API, with the send limiter and the sends' pool it alone uses. */
async function startApiPart(
  config: Config,
  logger: Logger,
  shared: Shared & { readiness: () => Promise<void>; endpoints: ProviderEndpoints },
): Promise<ApiPart> {
  const { database, bounds, boss, outage, webhooks, readiness } = shared;
  const sendLimiter = openSendLimiter(database.url, 4, bounds.api);
  const sendPool = openPipelinedPool(database.url, sendPoolMax, bounds.api);
  const app = createApp({
    orm: database.orm,
    sends: sendPool,
    fanouts: fanoutQueue(boss),
    tagSummaries: tagSummaryQueue(boss),
    webhooks,
    logger,
    document: loadDocument(),
    bodyLimit: config.HERALD_BODY_LIMIT,
    validateResponses: config.HERALD_VALIDATE_RESPONSES,
    sendLimiter,
    outage,
    readiness,
    defaultSendPolicy: { quota: config.HERALD_SEND_QUOTA, windowSeconds: config.HERALD_SEND_WINDOW_SECONDS },
    tokenCacheMs,
    webPushEndpoints: webPushEndpointRules(config, shared.endpoints),
  });
  let server: Server;
  try {
    server = await listen(app, config.PORT, config.HOST);
  } catch (error) {
    await sendLimiter.close();
    await sendPool.close();
    throw error;
  }
  logger.info({ address: server.address() }, 'API listening');
  await warmUp(server, logger);
  return {
    server,
    async close() {
      await sendLimiter.close();
      await sendPool.close();
    },
  };
}

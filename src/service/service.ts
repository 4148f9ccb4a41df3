// Composition of a Herald process: database (given or embedded), ORM, job queue, and the roles
// it plays (API, worker). Everything opened here is closed by the returned stop().
import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { PgBoss } from 'pg-boss';
import type { Config } from './config.ts';
import { openDatabase, resolveCredentialsKey, type Database } from './storage.ts';
import { watchDatabase } from '../db/outage.ts';
import { openPipelinedPool, type PipelinedPool } from '../db/pipelined-pool.ts';
import { ping } from '../db/sql/infrastructure.ts';
import { tokenCacheMs } from '../domain/applications.ts';
import { assertCredentialsReadable, upgradeSealedCredentials } from '../domain/credentials.ts';
import { openSendLimiter, type SendLimiter } from '../http/send-limiter.ts';
import { createProviderClients, type ProviderClients } from '../worker/clients.ts';
import { startMaintenance } from '../worker/maintenance.ts';
import { fanoutQueue, queueDepths, startBoss, webhookEnqueuer } from '../worker/queue.ts';
import { createWebhookSender, type WebhookSender } from '../worker/webhook-sender.ts';
import { createWebhookOutbox } from '../domain/webhook-outbox.ts';
import { startWorkers, type Workers } from '../worker/workers.ts';
import { createApp } from '../http/app.ts';
import { loadDocument } from '../http/document.ts';
import type { Logger } from '../logging/logger.ts';
import { collectProcessMetrics, observeQueues } from '../observability/metrics.ts';
import { operationsListener } from './operations.ts';
import type { ProviderEndpoints } from '../providers/provider.ts';

export function configuredEndpoints(config: Config): ProviderEndpoints {
  return {
    apns: config.HERALD_APNS_ENDPOINT,
    fcm: config.HERALD_FCM_ENDPOINT,
    ca: config.HERALD_PROVIDER_CA_FILE ? readFileSync(config.HERALD_PROVIDER_CA_FILE, 'utf8') : undefined,
  };
}

function listen(handler: RequestListener, port: number, host: string): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const server = createServer(handler);
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

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
    roles,
    onDown: () => workers?.pause(),
    onUp: () => workers?.resume(),
  });
  const boss = await startBoss(database.url, logger, { worker: roles.worker, schema: config.HERALD_QUEUE_SCHEMA, outage });
  const webhooks = createWebhookOutbox(webhookEnqueuer(boss));
  let clients: ProviderClients | null = null;
  let webhookSender: WebhookSender | null = null;
  if (roles.worker) {
    clients = createProviderClients({ key, endpoints, logger });
    webhookSender = createWebhookSender({
      allowPrivate: config.HERALD_WEBHOOK_ALLOW_PRIVATE,
      timeoutMs: config.HERALD_WEBHOOK_TIMEOUT_SECONDS * 1000,
    });
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
    await startMaintenance(boss, database.orm, logger, { retentionDays: config.HERALD_RETENTION_DAYS });
  }
  let server: Server | null = null;
  let metricsServer: Server | null = null;
  let sendLimiter: SendLimiter | null = null;
  let sendPool: PipelinedPool | null = null;
  // The queue's depth is the same for every process: the workers report it (they keep its counts fresh).
  if (roles.worker) observeQueues(() => queueDepths(boss));
  const healthPort = roles.worker && !roles.api ? config.HERALD_WORKER_HEALTH_PORT : undefined;
  const metricsPort = config.HERALD_METRICS_PORT;
  if (metricsPort !== undefined) {
    collectProcessMetrics();
    const shared = metricsPort === healthPort;
    metricsServer = await listen(operationsListener({ metrics: true, health: shared ? outage : null }), metricsPort, config.HERALD_METRICS_HOST);
    if (shared) server = metricsServer;
    logger.info({ address: metricsServer.address(), health: shared }, 'metrics listening');
  }
  if (healthPort !== undefined && healthPort !== metricsPort) {
    server = await listen(operationsListener({ metrics: false, health: outage }), healthPort, config.HOST);
    logger.info({ address: server.address() }, 'worker health listening');
  }
  if (roles.api) {
    sendLimiter = openSendLimiter(database.url, 4);
    sendPool = openPipelinedPool(database.url, sendPoolMax);
    const app = createApp({
      orm: database.orm,
      sends: sendPool,
      fanouts: fanoutQueue(boss),
      webhooks,
      logger,
      document: loadDocument(),
      bodyLimit: config.HERALD_BODY_LIMIT,
      validateResponses: config.HERALD_VALIDATE_RESPONSES,
      sendLimiter,
      outage,
      defaultSendPolicy: { quota: config.HERALD_SEND_QUOTA, windowSeconds: config.HERALD_SEND_WINDOW_SECONDS },
      tokenCacheMs,
    });
    server = await listen(app, config.PORT, config.HOST);
    logger.info({ address: server.address() }, 'API listening');
    await warmUp(server, logger);
  }
  const stop = async (graceMs: number): Promise<StopResult> => {
    outage.stop();
    // No new connections; requests in progress finish (or are cut by the caller's deadline).
    const closed = Promise.all(
      [...new Set([server, metricsServer])].map((open) => open && new Promise<void>((resolve) => open.close(() => resolve()))),
    );
    // In-flight batches have until the grace period ends; then pg-boss fails them, so that another
    // worker retries them (their deliveries are still pending), and its pool closes.
    await boss.stop({ graceful: true, timeout: graceMs });
    const released = workers?.inFlight ?? 0;
    await workers?.stop();
    await closed;
    await clients?.close();
    webhookSender?.close();
    await sendLimiter?.close();
    await sendPool?.close();
    if (roles.worker) observeQueues(null);
    await database.close();
    return { released };
  };
  return { database, boss, server, metricsServer, credentialsKey: key, stop };
}

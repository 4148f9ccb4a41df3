// What a test file needs: the real app (responses validated against the document) on the run's
// database, and helpers to make applications and tokens the way the CLI does.
import type { Express } from 'express';
import type { PgBoss } from 'pg-boss';
import { migrate, openOrm, type Orm } from '../../src/db/orm.ts';
import { openPipelinedPool } from '../../src/db/pipelined-pool.ts';
import { createApplication, createToken } from '../../src/domain/applications.ts';
import type { SendPolicy } from '../../src/domain/rate-limits.ts';
import { openSendLimiter } from '../../src/http/send-limiter.ts';
import type { DatabaseBounds } from '../../src/db/bounds.ts';
import { openDatabaseProbe, watchDatabase } from '../../src/db/outage.ts';
import { fanoutQueue, startBoss, tagSummaryQueue, webhookEnqueuer } from '../../src/worker/queue.ts';
import { createWebhookOutbox, type WebhookOutbox } from '../../src/domain/webhook-outbox.ts';
import { createApp } from '../../src/http/app.ts';
import type { EndpointRules } from '../../src/domain/web-push.ts';
import { loadDocument } from '../../src/http/document.ts';
import { createLogger, type Logger } from '../../src/logging/logger.ts';
import { defaultQueueSchema } from '../../src/service/config.ts';

export type Harness = {
  app: Express;
  orm: Orm;
  boss: PgBoss;
  /** The app's webhook outbox (subscriptions read on every use: no cache between a test's steps). */
  webhooks: WebhookOutbox;
  /** pg-boss's schema: where this harness's jobs are. */
  queueSchema: string;
  url: string;
  logger: Logger;
  newApplication(name?: string): Promise<TestApplication>;
  close(): Promise<void>;
};

export type TestApplication = {
  id: string;
  /** A token with exactly these abilities (default: all). */
  token(abilities?: string[]): Promise<string>;
};

export function databaseUrl(): string {
  const url = process.env.HERALD_TEST_DATABASE_URL;
  if (!url) throw new Error('HERALD_TEST_DATABASE_URL is not set: run the tests through jest (global setup).');
  return url;
}

/** The run's credentials key (global setup): every test file's workers open credentials with it. */
export function runCredentialsKey(): Buffer {
  const key = process.env.HERALD_TEST_CREDENTIALS_KEY;
  if (!key) throw new Error('HERALD_TEST_CREDENTIALS_KEY is not set: run the tests through jest (global setup).');
  return Buffer.from(key, 'base64');
}

export async function startHarness(
  options: {
    logger?: Logger;
    bodyLimit?: string;
    sendPolicy?: SendPolicy;
    queueSchema?: string;
    databaseUrl?: string;
    /** 0 by default: a revocation or a policy set by a test applies to its next request. */
    tokenCacheMs?: number;
    /** The API's database bounds (default: db/bounds.ts defaultBounds). */
    bounds?: DatabaseBounds;
    /** Web Push endpoints allowed beyond the known push services (default: none, public addresses only). */
    webPushEndpoints?: EndpointRules;
  } = {},
): Promise<Harness> {
  const url = options.databaseUrl ?? databaseUrl();
  const logger = options.logger ?? createLogger('silent');
  const orm = await openOrm(url, 5, options.bounds);
  await migrate(orm);
  const queueSchema = options.queueSchema ?? defaultQueueSchema;
  const probe = openDatabaseProbe(url);
  const outage = watchDatabase({ probe: probe.probe, database: url, logger, roles: { api: true, worker: false } });
  const boss = await startBoss(url, logger, { worker: false, schema: queueSchema, outage, bounds: options.bounds });
  const sendLimiter = openSendLimiter(url, 2, options.bounds);
  const sends = openPipelinedPool(url, 3, options.bounds);
  const webhooks = createWebhookOutbox(webhookEnqueuer(boss), { cacheMs: 0 });
  const app = createApp({
    orm,
    sends,
    fanouts: fanoutQueue(boss),
    tagSummaries: tagSummaryQueue(boss),
    webhooks,
    logger,
    document: loadDocument(),
    bodyLimit: options.bodyLimit ?? '1mb',
    validateResponses: true,
    sendLimiter,
    outage,
    readiness: probe.probe,
    defaultSendPolicy: options.sendPolicy ?? { quota: 100_000, windowSeconds: 60 },
    tokenCacheMs: options.tokenCacheMs ?? 0,
    webPushEndpoints: options.webPushEndpoints,
  });
  return {
    app,
    orm,
    boss,
    webhooks,
    queueSchema,
    url,
    logger,
    async newApplication(name = 'test') {
      const application = await createApplication(orm.em.fork(), name);
      return {
        id: application.id,
        token: async (abilities = ['*']) =>
          (await createToken(orm.em.fork(), { applicationId: application.id, name: 'test', abilities })).plaintext,
      };
    },
    async close() {
      await boss.stop({ graceful: false });
      outage.stop();
      await probe.close();
      await sendLimiter.close();
      await sends.close();
      await orm.close();
    },
  };
}

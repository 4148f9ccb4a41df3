// The whole pipeline in one process: the API (supertest), workers on their own queue schema (so
// that test files never take each other's jobs), and the provider simulators (APNs, FCM, Web Push),
// reached through the real client libraries.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import request from 'supertest';
import type { PgBoss } from 'pg-boss';
import type { components } from '../../src/generated/api.ts';
import { generateVapidKeys, setApnsCredentials, setFcmCredentials, setWebPushCredentials, type WebPushCredentials } from '../../src/domain/credentials.ts';
import { startWebPushSimulator, type SubscriptionJson } from '../../src/providers/simulators/web-push-simulator.ts';
import { createProviderClients, type ProviderClients } from '../../src/worker/clients.ts';
import { startBoss, webhookEnqueuer } from '../../src/worker/queue.ts';
import { createWebhookSender } from '../../src/worker/webhook-sender.ts';
import { createWebhookOutbox } from '../../src/domain/webhook-outbox.ts';
import { startWorkers } from '../../src/worker/workers.ts';
import type { ProviderEndpoints } from '../../src/providers/provider.ts';
import { runCredentialsKey, startHarness, type Harness } from './harness.ts';
import { apnsSimulator, fcmSimulator, silentLogger } from './simulators.ts';
import { waitFor } from './receiver.ts';

/**
 * The workers' poll for jobs no NOTIFY announced (retries, deferred jobs come due): pg-boss's
 * shortest, so that a retry runs about when it is due instead of up to the default 2 s later.
 */
export const testPollSeconds = 0.5;

export type Pipeline = Awaited<ReturnType<typeof startPipeline>>;
export type PipelineApplication = Awaited<ReturnType<Pipeline['newApplication']>>;

/** `workers: false` leaves the jobs to worker processes a test starts itself. */
export async function startPipeline(
  options: {
    batchSize?: number;
    workers?: boolean;
    sendDeadlineSeconds?: number;
    chunkSize?: number;
    /** Webhook sending: private addresses allowed (receivers run on this machine) unless said otherwise. */
    webhooks?: { allowPrivate?: boolean; timeoutSeconds?: number; retryBaseSeconds?: number; windowSeconds?: number };
  } = {},
) {
  const queueSchema = `pgboss_${randomBytes(4).toString('hex')}`;
  const webPush = await startWebPushSimulator();
  // The simulator runs on this machine: its host is added and private addresses allowed, as `herald start --simulate` does.
  const harness: Harness = await startHarness({ queueSchema, webPushEndpoints: { extraHosts: [new URL(webPush.url).host], allowPrivate: true } });
  const apns = await apnsSimulator();
  const fcm = await fcmSimulator();
  const credentialsKey = runCredentialsKey();
  const vapid: WebPushCredentials = { subject: 'mailto:tests@example.com', ...generateVapidKeys() };
  const endpoints: ProviderEndpoints = {
    apns: apns.sim.url,
    fcm: fcm.sim.url,
    ca: `${apns.sim.ca}\n${fcm.sim.ca}\n${webPush.ca}`,
    webPushAllowPrivate: true,
  };
  const workerBoss: PgBoss = await startBoss(harness.url, silentLogger, { worker: true, schema: queueSchema });
  const clients: ProviderClients = createProviderClients({ key: credentialsKey, endpoints, logger: silentLogger });
  const webhookSender = createWebhookSender({
    allowPrivate: options.webhooks?.allowPrivate ?? true,
    timeoutMs: (options.webhooks?.timeoutSeconds ?? 10) * 1000,
  });
  const workers = options.workers === false ? null : await startWorkers({
    orm: harness.orm,
    boss: workerBoss,
    clients,
    logger: silentLogger,
    concurrency: 4,
    batchSize: options.batchSize ?? 50,
    sendDeadlineSeconds: options.sendDeadlineSeconds ?? 30,
    queueSchema,
    chunkSize: options.chunkSize ?? 100,
    pollSeconds: testPollSeconds,
    webhooks: {
      outbox: createWebhookOutbox(webhookEnqueuer(workerBoss), { cacheMs: 0 }),
      sender: webhookSender,
      key: credentialsKey,
      concurrency: 2,
      retryBaseSeconds: options.webhooks?.retryBaseSeconds ?? 10,
      windowSeconds: options.webhooks?.windowSeconds ?? 86_400,
    },
  });

  const pipeline = {
    harness,
    apns: apns.sim,
    fcm: fcm.sim,
    webPush,
    credentialsKey,
    /** The workers' queue (its getWipData() says when each worker last fetched). */
    workerBoss,
    /** The credentials the simulators accept, for an application set up by hand. */
    credentials: { apns: apns.credentials, fcm: fcm.credentials, webpush: vapid },
    endpoints,
    queueSchema,

    /**
     * The environment of a `herald` process working this pipeline's queue against its simulators
     * (the simulators' CA written to a file for it).
     */
    workerEnvironment(): NodeJS.ProcessEnv {
      const caFile = path.join(mkdtempSync(path.join(tmpdir(), 'herald-ca-')), 'ca.pem');
      writeFileSync(caFile, endpoints.ca!);
      return {
        HERALD_QUEUE_SCHEMA: queueSchema,
        HERALD_CREDENTIALS_KEY: credentialsKey.toString('base64'),
        HERALD_APNS_ENDPOINT: endpoints.apns!,
        HERALD_FCM_ENDPOINT: endpoints.fcm!,
        HERALD_PROVIDER_CA_FILE: caFile,
        HERALD_QUEUE_POLL_SECONDS: String(testPollSeconds),
        HERALD_WEBPUSH_ALLOW_PRIVATE: 'true',
      };
    },

    /** An application with a server token, an app token, and (by default) APNs and FCM credentials; Web Push's when asked. */
    async newApplication(providers: { apns?: boolean; fcm?: boolean; webpush?: boolean } = { apns: true, fcm: true }) {
      const application = await harness.newApplication('fanout');
      const em = harness.orm.em.fork();
      if (providers.apns) await setApnsCredentials(em, application.id, apns.credentials, credentialsKey);
      if (providers.fcm) await setFcmCredentials(em, application.id, fcm.credentials, credentialsKey);
      if (providers.webpush) await setWebPushCredentials(em, application.id, { subject: vapid.subject, keys: vapid, force: false }, credentialsKey);
      const server = await application.token(['*']);
      const client = await application.token(['installations:write', 'installations:read', 'events:write']);
      const api = () => request(harness.app);
      return {
        id: application.id,
        server,
        client,
        async register(installationId: string, body: Record<string, unknown>) {
          const res = await api().put(`/api/v1/installations/${installationId}`).set('Authorization', `Bearer ${client}`).send(body);
          if (res.status >= 300) throw new Error(`register ${installationId}: ${res.status} ${JSON.stringify(res.body)}`);
          return res.body.data;
        },
        /** Registers every one of them, a few at a time: a test's audience set up in a moment. */
        async registerAll(installations: [installationId: string, body: Record<string, unknown>][]) {
          const waiting = [...installations];
          const registerNext = async (): Promise<void> => {
            for (let next = waiting.shift(); next; next = waiting.shift()) await this.register(...next);
          };
          await Promise.all(Array.from({ length: 8 }, registerNext));
        },
        async send(body: Record<string, unknown>): Promise<string> {
          const res = await api().post('/api/v1/notifications').set('Authorization', `Bearer ${server}`).send(body);
          if (res.status !== 202) throw new Error(`send: ${res.status} ${JSON.stringify(res.body)}`);
          return res.body.data.id;
        },
        async notification(id: string) {
          const res = await api().get(`/api/v1/notifications/${id}`).set('Authorization', `Bearer ${server}`).expect(200);
          return res.body.data;
        },
        async deliveries(id: string, query: Record<string, string> = {}) {
          const res = await api()
            .get(`/api/v1/notifications/${id}/deliveries`)
            .query({ limit: '100', ...query })
            .set('Authorization', `Bearer ${server}`)
            .expect(200);
          return res.body.data as components['schemas']['Delivery'][];
        },
        async installation(installationId: string) {
          const res = await api().get(`/api/v1/installations/${installationId}`).set('Authorization', `Bearer ${client}`).expect(200);
          return res.body.data;
        },
        /** Waits until the notification has a final status (polling the API, as an integrator would). */
        async settled(id: string, timeoutMs = 20_000) {
          return waitFor(() => this.notification(id), (notification) => Boolean(notification.completed_at), timeoutMs);
        },
      };
    },

    async close() {
      await workerBoss.stop({ graceful: false, close: true });
      await workers?.stop();
      await clients.close();
      webhookSender.close();
      await apns.sim.stop();
      await fcm.sim.stop();
      await webPush.stop();
      await harness.close();
    },
  };
  return pipeline;
}

export const ios = (token: string, user: string, extra: Record<string, unknown> = {}) => ({
  platform: 'ios',
  provider: { identifier: token },
  user_id: user,
  permission: 'authorized',
  ...extra,
});

export const android = (token: string, user: string, extra: Record<string, unknown> = {}) => ({
  platform: 'android',
  provider: { identifier: token },
  user_id: user,
  permission: 'authorized',
  ...extra,
});

/** A web installation of a subscription (as PushSubscription.toJSON() gives it, from the Web Push simulator). */
export const web = (subscription: SubscriptionJson, user: string, extra: Record<string, unknown> = {}) => ({
  platform: 'web',
  provider: { identifier: subscription.endpoint, keys: subscription.keys },
  user_id: user,
  permission: 'authorized',
  ...extra,
});

/** `started` and `completed` are epoch milliseconds, null until pg-boss records them. */
export type QueuedJob = { id: string; group_id: string | null; priority: number; started: number | null; completed: number | null };

/**
 * The jobs of a queue that work for these notifications, oldest first: a fanout job names its
 * notification; a deliver job, its deliveries (which may be of several notifications).
 */
export async function jobsOf(pipeline: Pipeline, queue: 'fanout' | 'deliver', notificationIds: string[]): Promise<QueuedJob[]> {
  return pipeline.harness.orm.em.fork().execute<QueuedJob[]>(
    `select j.id, j.group_id, j.priority, extract(epoch from j.started_on) * 1000 as started, extract(epoch from j.completed_on) * 1000 as completed
       from ${pipeline.queueSchema}.job j
      where j.name = ? and (j.data->>'notificationId' in (?) or exists (
              select 1 from deliveries d
               where d.notification_id::text in (?) and d.id::text in (select jsonb_array_elements_text(j.data->'deliveryIds'))))
      order by j.created_on`,
    [queue, notificationIds, notificationIds],
  );
}

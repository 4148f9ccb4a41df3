// The two jobs behind a send. Fanout: resolve the target users' installations, write one delivery
// row each and queue deliver batches, all in one transaction. Deliver: push a batch, record the
// outcomes, retry the transient ones later, and close the notification when nothing is pending.
import type { EntityManager } from '@mikro-orm/postgresql';
import { fromKysely, type PgBoss } from 'pg-boss';
import { v7 as uuidv7 } from 'uuid';
import { Notification, ProviderCredential } from '../db/entities.ts';
import {
  classify,
  expiresAt,
  finalStatus,
  isDataOnly,
  jobPriority,
  mayAttempt,
  retryDelaySeconds,
} from '../domain/fanout.ts';
import { fitToPlatform, pushContent } from '../domain/payloads.ts';
import type { Logger } from '../logging/logger.ts';
import type { Push, PushOutcome, PushProvider } from '../providers/provider.ts';
import { networkReasons } from '../providers/support.ts';
import { type ProviderClient, type ProviderClients } from './clients.ts';
import { providerOf } from '../domain/platforms.ts';
import type { FanoutJob } from '../domain/notifications.ts';
import { queues } from './queue.ts';
import {
  claimPending,
  completeNotification,
  deliveryCounts,
  insertDeliveries,
  invalidateInstallations,
  markCredentialHealthy,
  markCredentialUnhealthy,
  markCredentialUnreachable,
  recordResults,
  startProcessing,
  targetInstallations,
  type ClaimedDelivery,
  type DeliveryResult,
  type Invalidation,
} from '../db/sql.ts';

export type DeliverJob = {
  notificationId: string;
  applicationId: string;
  platform: 'ios' | 'android';
  deliveryIds: string[];
};

export type JobContext = {
  boss: PgBoss;
  clients: ProviderClients;
  logger: Logger;
  /** Pushes per deliver job: one provider round of sends. */
  batchSize: number;
  /** A batch's provider send that has not answered by then is given up as `provider timeout`. */
  sendDeadlineMs: number;
  /** Pushes sent per provider round trip, each round's outcomes recorded before the next is sent. */
  recordEvery: number;
};

const unreachable = new Set<string>(networkReasons);

/**
 * The provider's answers, or, past the deadline, a timeout for every push (the client is then
 * rebuilt). Without a deadline a hung connection would hold the batch until the job expires.
 */
async function sendWithDeadline(provider: PushProvider, pushes: Push[], deadlineMs: number): Promise<PushOutcome[] | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const sending = provider.send(pushes);
  // Still settles after the deadline; nobody awaits it then.
  sending.catch(() => undefined);
  try {
    return await Promise.race([sending, new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), deadlineMs)))]);
  } finally {
    clearTimeout(timer);
  }
}

function chunk<T>(items: T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}

export async function runFanout(em: EntityManager, context: JobContext, job: FanoutJob): Promise<void> {
  await em.fork().transactional(async (tx) => {
    // Everything below commits together: a re-run after a crash either sees it all or redoes it all.
    if (!(await startProcessing(tx, job.notificationId))) return;
    const notification = await tx.findOneOrFail(Notification, { id: job.notificationId });
    const candidates = await targetInstallations(tx, job.applicationId, notification.userIds);
    const credentials = await tx.find(ProviderCredential, { applicationId: job.applicationId }, { fields: ['provider'] });
    const providers = new Set<string>(credentials.map((credential) => credential.provider));
    const platformsWithCredentials = new Set(
      Object.entries(providerOf)
        .filter(([, provider]) => providers.has(provider))
        .map(([platform]) => platform),
    );
    const content = pushContent(notification);
    const classified = classify(candidates, { dataOnly: isDataOnly(content), platformsWithCredentials });
    // The push is cut to fit once per platform; the deliver jobs cut it the same way (fitToPlatform is pure).
    const truncation = {
      ios: fitToPlatform(content, 'ios').truncation,
      android: fitToPlatform(content, 'android').truncation,
    };
    const deliveries = classified.map((delivery) => ({
      ...delivery,
      deliveryId: uuidv7(),
      truncation: delivery.state === 'pending' ? truncation[delivery.platform] : null,
    }));
    await insertDeliveries(tx, job.applicationId, job.notificationId, deliveries);

    const priority = jobPriority(notification.options);
    const batches: DeliverJob[] = [];
    for (const platform of ['ios', 'android'] as const) {
      const pending = deliveries.filter((d) => d.state === 'pending' && d.platform === platform).map((d) => d.deliveryId);
      for (const deliveryIds of chunk(pending, context.batchSize)) {
        batches.push({ notificationId: job.notificationId, applicationId: job.applicationId, platform, deliveryIds });
      }
    }
    if (batches.length === 0) {
      await completeNotification(tx, job.notificationId, 'completed');
      return;
    }
    await context.boss.insert(
      queues.deliver,
      batches.map((data) => ({ data, priority })),
      { db: fromKysely(tx.getKysely()) },
    );
  });
}

/** What a fanout that failed for good leaves: a failed notification, not a queued one forever. */
export async function failFanout(em: EntityManager, job: FanoutJob): Promise<void> {
  await completeNotification(em.fork(), job.notificationId, 'failed');
}

type Attempt = { results: DeliveryResult[]; invalidations: Invalidation[]; retry: string[]; retryAfter: number };

function settle(notification: Notification, sent: ClaimedDelivery[], outcomes: PushOutcome[]): Attempt {
  const attempt: Attempt = { results: [], invalidations: [], retry: [], retryAfter: 0 };
  const pushes = new Map(sent.map((delivery) => [delivery.deliveryId, delivery]));
  const fail = (deliveryId: string, reason: string) =>
    attempt.results.push({ deliveryId, state: 'failed', reason, providerMessageId: null });
  for (const outcome of outcomes) {
    const delivery = pushes.get(outcome.deliveryId)!;
    switch (outcome.kind) {
      case 'accepted':
        attempt.results.push({
          deliveryId: outcome.deliveryId,
          state: 'accepted',
          reason: null,
          providerMessageId: outcome.providerId ?? null,
        });
        break;
      case 'invalid_token':
        fail(outcome.deliveryId, outcome.reason);
        attempt.invalidations.push({
          installationRowId: delivery.installationRowId!,
          providerIdentifier: delivery.providerIdentifier!,
          reason: outcome.reason,
          providerTimestamp: outcome.invalidatedAt ?? null,
        });
        break;
      case 'rejected':
        fail(outcome.deliveryId, outcome.reason);
        break;
      case 'credentials':
        fail(outcome.deliveryId, 'provider_credentials');
        break;
      case 'transient': {
        const delay = retryDelaySeconds(delivery.attempts, outcome.retryAfterSeconds);
        const retryAt = new Date(Date.now() + delay * 1000);
        if (!mayAttempt(notification, delivery.attempts + 1, retryAt)) fail(outcome.deliveryId, 'expired');
        else {
          attempt.retry.push(outcome.deliveryId);
          attempt.retryAfter = Math.max(attempt.retryAfter, delay);
        }
        break;
      }
    }
  }
  // A delivery the provider gave no outcome for is retried like a transient error.
  const answered = new Set(outcomes.map((outcome) => outcome.deliveryId));
  for (const delivery of sent) {
    if (!answered.has(delivery.deliveryId)) {
      attempt.retry.push(delivery.deliveryId);
      attempt.retryAfter = Math.max(attempt.retryAfter, retryDelaySeconds(delivery.attempts));
    }
  }
  return attempt;
}

/** Deliver: claim the batch's pending deliveries, push them a chunk at a time, record each chunk. */
export async function runDeliver(em: EntityManager, context: JobContext, job: DeliverJob): Promise<void> {
  const db = em.fork();
  const notification = await db.findOne(Notification, { id: job.notificationId });
  if (!notification) return;
  const { sendable, unsendable } = await claim(db, notification, job);
  const client = sendable.length > 0 ? await context.clients.get(db, job.applicationId, providerOf[job.platform]) : null;
  if (sendable.length > 0 && !client) {
    for (const delivery of sendable) unsendable.push(ended(delivery.deliveryId, 'skipped', 'no_credentials'));
  }
  if (unsendable.length > 0) await record(db, context, job, notification, { ...noAttempt(), results: unsendable });
  if (client) await sendAndRecord(db, context, job, notification, client, sendable);
  await completeIfDone(db, job.notificationId);
}

const ended = (deliveryId: string, state: 'skipped' | 'failed', reason: string): DeliveryResult => ({
  deliveryId,
  state,
  reason,
  providerMessageId: null,
});

/** Claims the batch's pending deliveries: those that can still be pushed, and the end of the others. */
async function claim(
  db: EntityManager,
  notification: Notification,
  job: DeliverJob,
): Promise<{ sendable: ClaimedDelivery[]; unsendable: DeliveryResult[] }> {
  const sendable: ClaimedDelivery[] = [];
  const unsendable: DeliveryResult[] = [];
  for (const delivery of await claimPending(db, job.deliveryIds)) {
    if (!delivery.installationRowId || !delivery.providerIdentifier) unsendable.push(ended(delivery.deliveryId, 'skipped', 'installation_deleted'));
    else if (delivery.installationStatus !== 'active') unsendable.push(ended(delivery.deliveryId, 'skipped', 'installation_invalid'));
    else if (!mayAttempt(notification, delivery.attempts)) unsendable.push(ended(delivery.deliveryId, 'failed', 'expired'));
    else sendable.push(delivery);
  }
  return { sendable, unsendable };
}

async function sendAndRecord(
  db: EntityManager,
  context: JobContext,
  job: DeliverJob,
  notification: Notification,
  client: ProviderClient,
  sendable: ClaimedDelivery[],
): Promise<void> {
  // Exactly the content the fanout measured and recorded as this platform's truncation.
  const { content } = fitToPlatform(pushContent(notification), job.platform);
  const expiry = expiresAt(notification);
  // Outcomes are recorded a chunk at a time, each before the next chunk is sent: a crash or a
  // database outage re-sends at most the one chunk whose answers were not recorded yet.
  for (const part of chunk(sendable, context.recordEvery)) {
    const pushes: Push[] = part.map((delivery) => ({
      deliveryId: delivery.deliveryId,
      notificationId: notification.id,
      providerIdentifier: delivery.providerIdentifier!,
      content,
      expiresAt: expiry,
    }));
    const outcomes = await sendChunk(db, context, job, client, pushes);
    await record(db, context, job, notification, settle(notification, part, outcomes));
  }
}

const noAttempt = (): Attempt => ({ results: [], invalidations: [], retry: [], retryAfter: 0 });

/** One provider round trip, bounded by the deadline; the client's and the credential's health follow it. */
async function sendChunk(db: EntityManager, context: JobContext, job: DeliverJob, client: ProviderClient, pushes: Push[]): Promise<PushOutcome[]> {
  const failAll = (reason: string) => pushes.map((push): PushOutcome => ({ deliveryId: push.deliveryId, kind: 'transient', reason }));
  let outcomes: PushOutcome[];
  try {
    const answered = await sendWithDeadline(client.provider, pushes, context.sendDeadlineMs);
    if (answered === 'timeout') {
      context.logger.warn({ notificationId: job.notificationId, pushes: pushes.length, deadlineMs: context.sendDeadlineMs }, 'provider send timed out');
      context.clients.report(client, 'broken');
      await markCredentialUnreachable(db, client.credentialId);
      return failAll('provider timeout');
    }
    outcomes = answered;
    const reached = outcomes.length === 0 || !outcomes.every((o) => o.kind === 'transient' && unreachable.has(o.reason));
    context.clients.report(client, reached ? 'reached' : 'unreachable');
    if (!reached) await markCredentialUnreachable(db, client.credentialId);
  } catch (error) {
    // The adapters map provider errors to outcomes; anything thrown is retried like a 5xx.
    context.logger.error({ err: error, notificationId: job.notificationId }, 'provider send failed');
    return failAll('provider error');
  }
  const refused = outcomes.find((outcome) => outcome.kind === 'credentials');
  if (refused) {
    await markCredentialUnhealthy(db, client.credentialId, refused.reason);
    context.logger.error({ applicationId: job.applicationId, provider: providerOf[job.platform], reason: refused.reason }, 'provider refused the credentials');
  } else if (outcomes.some((outcome) => outcome.kind === 'accepted')) {
    await markCredentialHealthy(db, client.credentialId);
  }
  return outcomes;
}

/** Outcomes, dead devices and the retry of the transient ones (in the notification's lane) commit together. */
async function record(db: EntityManager, context: JobContext, job: DeliverJob, notification: Notification, attempt: Attempt): Promise<void> {
  await db.transactional(async (tx) => {
    await recordResults(tx, attempt.results);
    await invalidateInstallations(tx, attempt.invalidations);
    if (attempt.retry.length > 0) {
      await context.boss.send(
        queues.deliver,
        { ...job, deliveryIds: attempt.retry } satisfies DeliverJob,
        { startAfter: attempt.retryAfter, priority: jobPriority(notification.options), db: fromKysely(tx.getKysely()) },
      );
    }
  });
}

/** A deliver job that failed for good (its retries exhausted): its pushes fail, the notification closes. */
export async function failDeliver(em: EntityManager, job: DeliverJob): Promise<void> {
  const db = em.fork();
  await recordResults(
    db,
    job.deliveryIds.map((deliveryId) => ({ deliveryId, state: 'failed', reason: 'internal_error', providerMessageId: null })),
  );
  await completeIfDone(db, job.notificationId);
}

/**
 * Run after the batch's outcomes are committed: whichever batch commits last sees no pending
 * delivery and closes the notification; completeNotification makes a concurrent second call a no-op.
 */
async function completeIfDone(em: EntityManager, notificationId: string): Promise<void> {
  const [counts = { pending: 0, accepted: 0, failed: 0 }] = await deliveryCounts(em, [notificationId]);
  if (counts.pending === 0) await completeNotification(em, notificationId, finalStatus(counts));
}

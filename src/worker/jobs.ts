// The two jobs behind a send. Fanout: resolve the target users' installations, write one delivery
// row each and queue deliver batches, all in one transaction. Deliver: push a batch, record the
// outcomes, retry the transient ones later, and close the notification when nothing is pending.
import { performance } from 'node:perf_hooks';
import type { EntityManager } from '@mikro-orm/postgresql';
import { fromKysely, type PgBoss } from 'pg-boss';
import { v7 as uuidv7 } from 'uuid';
import { Notification, ProviderCredential } from '../db/entities.ts';
import {
  classify,
  countsAttemptBeforePush,
  expiresAt,
  finalStatus,
  isDataOnly,
  jobPriority,
  mayAttempt,
  retryDelaySeconds,
} from '../domain/fanout.ts';
import { finishCancellation, reportCancellation } from '../domain/cancellation.ts';
import { localeMatcher } from '../domain/locales.ts';
import { contentFor, fitToPlatform, pushContent, type PushContent } from '../domain/payloads.ts';
import type { Platform } from '../domain/platforms.ts';
import type { Logger } from '../logging/logger.ts';
import {
  deliveriesEnded,
  deliveriesRetried,
  notificationMoved,
  providerRequest,
} from '../observability/metrics.ts';
import type { Push, PushOutcome, PushProvider } from '../providers/provider.ts';
import { networkReasons } from '../providers/support.ts';
import { type ProviderClient, type ProviderClients } from './clients.ts';
import { providerOf } from '../domain/platforms.ts';
import { reportNotificationEnd, type FanoutJob } from '../domain/notifications.ts';
import { deliveriesFailed, installationsInvalidated, notificationCompleted, type WebhookOutbox } from '../domain/webhook-outbox.ts';
import { placement, queues } from './queue.ts';
import {
  claimPending,
  countAttempts,
  completeNotification,
  holdUncancelled,
  isCancelUnfinished,
  insertDeliveries,
  invalidateInstallations,
  markCredentialHealthy,
  markCredentialUnhealthy,
  markCredentialUnreachable,
  notificationProgress,
  recordResults,
  startProcessing,
  targetInstallations,
  type ClaimedDelivery,
  type DeliveryResult,
  type FinishedNotification,
  type Invalidation,
  type MovedCount,
} from '../db/sql.ts';

export type DeliverJob = {
  notificationId: string;
  applicationId: string;
  platform: 'ios' | 'android';
  deliveryIds: string[];
};

export type JobContext = {
  boss: PgBoss;
  /** Where `delivery.failed`, `installation.invalidated` and `notification.completed` webhooks go. */
  webhooks: WebhookOutbox;
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

/**
 * Fans out a batch of notifications in one transaction: each one's deliveries and deliver jobs, or
 * its end when it has nothing to push. Notifications no longer queued (fanned out before, or
 * cancelled) are left alone; a cancel cut short is finished (endCancelled).
 */
export async function runFanouts(em: EntityManager, context: JobContext, jobs: FanoutJob[]): Promise<void> {
  const fanned = await em.fork().transactional(async (tx) => {
    // Everything below commits together: a re-run after a crash either sees it all or redoes it all.
    const started = await startProcessing(tx, jobs.map((job) => job.notificationId));
    const notifications = started.length === 0 ? [] : await tx.find(Notification, { id: { $in: started } });
    const platformsOf = new Map<string, Set<string>>();
    const deliverJobs: { data: DeliverJob; priority: number; group: { id: string } }[] = [];
    const results: { skips: Map<string, MovedCount[]>; finished: FinishedNotification | undefined }[] = [];
    for (const notification of notifications) {
      const job = { notificationId: notification.id, applicationId: notification.applicationId };
      if (!platformsOf.has(job.applicationId)) platformsOf.set(job.applicationId, await platformsWithCredentials(tx, job.applicationId));
      const { batches, skips } = await fanOut(tx, context, notification, platformsOf.get(job.applicationId)!);
      if (batches.length === 0) {
        const announce = await context.webhooks.wants(tx, job.applicationId, 'notification.completed');
        results.push({ skips, finished: await completeAndAnnounce(tx, context.webhooks, job, 'completed', announce) });
      } else {
        const where = placement(job.applicationId, jobPriority(notification.options));
        deliverJobs.push(...batches.map((data) => ({ data, ...where })));
        results.push({ skips, finished: undefined });
      }
    }
    if (deliverJobs.length > 0) await context.boss.insert(queues.deliver, deliverJobs, { db: fromKysely(tx.getKysely()) });
    return { results, notStarted: jobs.filter((job) => !started.includes(job.notificationId)) };
  });
  // Counted once committed: a fanout that rolled back did none of it.
  for (const { skips, finished } of fanned.results) {
    notificationMoved('processing');
    for (const [platform, counts] of skips) deliveriesEnded(platform, counts);
    reportNotificationEnd(context.logger, finished);
  }
  // Not queued any more: fanned out before, or cancelled (perhaps by a cancel cut short).
  for (const job of fanned.notStarted) {
    if (await isCancelUnfinished(em, job.notificationId)) await endCancelled(em, context, job);
  }
}

/** The platforms whose provider the application has credentials for. */
async function platformsWithCredentials(tx: EntityManager, applicationId: string): Promise<Set<string>> {
  const credentials = await tx.find(ProviderCredential, { applicationId }, { fields: ['provider'] });
  const providers = new Set<string>(credentials.map((credential) => credential.provider));
  return new Set(
    Object.entries(providerOf)
      .filter(([, provider]) => providers.has(provider))
      .map(([platform]) => platform),
  );
}

/** One notification's fanout, in the batch's transaction: its deliveries written, its deliver batches made. */
async function fanOut(
  tx: EntityManager,
  context: JobContext,
  notification: Notification,
  withCredentials: ReadonlySet<string>,
): Promise<{ batches: DeliverJob[]; skips: Map<string, MovedCount[]> }> {
  const { id: notificationId, applicationId } = notification;
  const tags = Object.keys(notification.localizations ?? {});
  const candidates = await targetInstallations(tx, applicationId, notification.userIds, tags.length > 0);
  const content = pushContent(notification);
  const classified = classify(candidates, { dataOnly: isDataOnly(content), platformsWithCredentials: withCredentials });
  // Each device gets its localization (or the default content, null); the push is cut to fit
  // once per platform and localization; the deliver jobs cut it the same way (fitToPlatform is pure).
  const localeOf = tags.length > 0 ? localeMatcher(tags) : () => null;
  const truncationOf = fitsOnce((platform, locale) => fitToPlatform(contentFor(content, locale), platform).truncation);
  const deliveries = classified.map((delivery) => {
    const locale = delivery.state === 'pending' ? localeOf(delivery.deviceLocale) : null;
    return {
      ...delivery,
      deliveryId: uuidv7(),
      locale,
      truncation: delivery.state === 'pending' ? truncationOf(delivery.platform, locale) : null,
    };
  });
  await insertDeliveries(tx, applicationId, notificationId, deliveries);
  const batches: DeliverJob[] = [];
  for (const platform of ['ios', 'android'] as const) {
    const pending = deliveries.filter((d) => d.state === 'pending' && d.platform === platform).map((d) => d.deliveryId);
    for (const deliveryIds of chunk(pending, context.batchSize)) batches.push({ notificationId, applicationId, platform, deliveryIds });
  }
  return { batches, skips: skipsByPlatform(classified) };
}

/** The fanout's skipped deliveries, per platform, counted by reason. */
function skipsByPlatform(classified: readonly { platform: string; state: string; reason: string | null }[]): Map<string, MovedCount[]> {
  const skips = new Map<string, MovedCount[]>();
  for (const { platform, state, reason } of classified) {
    if (state !== 'skipped') continue;
    const counts = skips.get(platform) ?? [];
    skips.set(platform, counts);
    const same = counts.find((count) => count.reason === reason);
    if (same) same.count += 1;
    else counts.push({ state: 'skipped', reason, count: 1 });
  }
  return skips;
}

/** `fit` computed once per platform and localization (null: the default content), however many pushes share them. */
function fitsOnce<T>(fit: (platform: Platform, locale: string | null) => T): (platform: Platform, locale: string | null) => T {
  const fitted = new Map<string, T>();
  return (platform, locale) => {
    const key = locale === null ? platform : `${platform}:${locale}`;
    if (!fitted.has(key)) fitted.set(key, fit(platform, locale));
    return fitted.get(key)!;
  };
}

/** What a fanout that failed for good leaves: a failed notification, not a queued one forever. */
export async function failFanout(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: FanoutJob): Promise<void> {
  reportNotificationEnd(context.logger, await complete(em.fork(), context.webhooks, job, 'failed'));
}

/**
 * Ends a notification once (completeNotification: the first caller wins), with its
 * `notification.completed` webhook in the same transaction when the application has an endpoint
 * for it. Without one, the update alone: no transaction around it. Answers the notification as it
 * ended (undefined when another caller ended it), which the caller reports once committed.
 */
async function complete(db: EntityManager, webhooks: WebhookOutbox, job: FanoutJob, status: FinishedNotification['status']): Promise<FinishedNotification | undefined> {
  if (!(await webhooks.wants(db, job.applicationId, 'notification.completed'))) return completeNotification(db, job.notificationId, status);
  return db.transactional((tx) => completeAndAnnounce(tx, webhooks, job, status, true));
}

/** complete(), inside the caller's transaction. */
async function completeAndAnnounce(
  tx: EntityManager,
  webhooks: WebhookOutbox,
  job: FanoutJob,
  status: FinishedNotification['status'],
  announce: boolean,
): Promise<FinishedNotification | undefined> {
  const ended = await completeNotification(tx, job.notificationId, status);
  if (ended && announce) await webhooks.emit(tx, job.applicationId, [notificationCompleted(ended)]);
  return ended;
}

/** What a deliver job reads of its notification: what is pushed and until when (not its recipients). */
type BatchNotification = Pick<Notification, 'id' | 'createdAt' | 'scheduledFor' | 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options'>;

/** What an attempt left to record; `countAttempt`: whether recording it counts the attempt (claimPending). */
type Attempt = {
  results: DeliveryResult[];
  invalidations: Invalidation[];
  retry: string[];
  retryAfter: number;
  /** Why the pushes to retry were not taken: reason → how many. */
  retryReasons: Map<string, number>;
  countAttempt: boolean;
};

const noAttempt = (countAttempt: boolean): Attempt => ({ results: [], invalidations: [], retry: [], retryAfter: 0, retryReasons: new Map(), countAttempt });

function settle(notification: BatchNotification, sent: ClaimedDelivery[], outcomes: PushOutcome[], countAttempt: boolean): Attempt {
  const attempt = noAttempt(countAttempt);
  const retry = (deliveryId: string, reason: string, delay: number) => {
    attempt.retry.push(deliveryId);
    attempt.retryAfter = Math.max(attempt.retryAfter, delay);
    attempt.retryReasons.set(reason, (attempt.retryReasons.get(reason) ?? 0) + 1);
  };
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
        else retry(outcome.deliveryId, outcome.reason, delay);
        break;
      }
    }
  }
  // A delivery the provider gave no outcome for is retried like a transient error.
  const answered = new Set(outcomes.map((outcome) => outcome.deliveryId));
  for (const delivery of sent) {
    if (!answered.has(delivery.deliveryId)) retry(delivery.deliveryId, 'unanswered', retryDelaySeconds(delivery.attempts));
  }
  return attempt;
}

/** Deliver: claim the batch's pending deliveries, push them a chunk at a time, record each chunk. */
export async function runDeliver(em: EntityManager, context: JobContext, job: DeliverJob): Promise<void> {
  const db = em.fork();
  // Read only: not managed by the fork (each record() commit would compare it again) and without
  // the recipients (up to 500 user ids), which a batch has no use for.
  const notification = await db.findOne(Notification, { id: job.notificationId }, { exclude: ['userIds'], disableIdentityMap: true });
  if (!notification) return;
  const countAtClaim = countsAttemptBeforePush(notification);
  const { sendable, unsendable } = await claim(db, notification, job, countAtClaim);
  const client = sendable.length > 0 ? await context.clients.get(db, job.applicationId, providerOf[job.platform]) : null;
  if (sendable.length > 0 && !client) {
    for (const delivery of sendable) unsendable.push(ended(delivery.deliveryId, 'skipped', 'no_credentials'));
  }
  if (unsendable.length > 0) await record(db, context, job, notification, { ...noAttempt(!countAtClaim), results: unsendable });
  const stopped = client ? await sendAndRecord(db, context, job, notification, client, sendable, !countAtClaim) : 'sent';
  if (stopped === 'cancelled') await endCancelled(db, context, job);
  else await completeIfDone(db, context, job);
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
  notification: BatchNotification,
  job: DeliverJob,
  countNow: boolean,
): Promise<{ sendable: ClaimedDelivery[]; unsendable: DeliveryResult[] }> {
  const sendable: ClaimedDelivery[] = [];
  const unsendable: DeliveryResult[] = [];
  for (const delivery of await claimPending(db, job.deliveryIds, countNow)) {
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
  notification: BatchNotification,
  client: ProviderClient,
  sendable: ClaimedDelivery[],
  countAttempt: boolean,
): Promise<'sent' | 'cancelled'> {
  // Exactly the content the fanout measured and recorded as the truncation of this platform and
  // each delivery's localization: one object per localization, which the providers build one
  // payload from for all its pushes.
  const content = pushContent(notification);
  const contentOf = fitsOnce((platform, locale): PushContent => fitToPlatform(contentFor(content, locale), platform).content);
  const expiry = expiresAt(notification);
  // Outcomes are recorded a chunk at a time, each before the next chunk is sent: a crash or a
  // database outage re-sends at most the one chunk whose answers were not recorded yet. Each chunk
  // is pushed and recorded holding its notification's pushes against a cancel
  // (domain/cancellation.ts): once it is cancelled, nothing more is pushed, and the cancel ends the
  // deliveries left pending.
  const health: CredentialMarks = { healthy: false };
  for (const part of chunk(sendable, context.recordEvery)) {
    const pushes: Push[] = part.map((delivery) => ({
      deliveryId: delivery.deliveryId,
      notificationId: notification.id,
      providerIdentifier: delivery.providerIdentifier!,
      content: contentOf(job.platform, delivery.locale),
      expiresAt: expiry,
    }));
    const pushed = await db.transactional(async (tx) => {
      if (!(await holdUncancelled(tx, notification.id))) return undefined;
      const outcomes = await sendChunk(tx, context, job, client, pushes, health);
      const attempt = settle(notification, part, outcomes, countAttempt);
      return { attempt, moved: await recordIn(tx, context, job, notification, attempt) };
    });
    if (!pushed) return 'cancelled';
    reportRecorded(job, pushed.attempt, pushed.moved);
  }
  return 'sent';
}

/** A job that found its notification cancelled finishes the cancel, in case the cancel itself was cut short. */
async function endCancelled(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: FanoutJob): Promise<void> {
  reportCancellation(context.logger, await finishCancellation(em, context.webhooks, job.applicationId, job.notificationId));
}

/** Whether this job last marked its credential healthy: later chunks need not write it again. */
type CredentialMarks = { healthy: boolean };

/** One provider round trip, bounded by the deadline; the client's and the credential's health follow it. */
async function sendChunk(
  db: EntityManager,
  context: JobContext,
  job: DeliverJob,
  client: ProviderClient,
  pushes: Push[],
  marks: CredentialMarks,
): Promise<PushOutcome[]> {
  const failAll = (reason: string) => pushes.map((push): PushOutcome => ({ deliveryId: push.deliveryId, kind: 'transient', reason }));
  let outcomes: PushOutcome[];
  const started = performance.now();
  try {
    const answered = await sendWithDeadline(client.provider, pushes, context.sendDeadlineMs);
    providerRequest(job.platform, (performance.now() - started) / 1000);
    if (answered === 'timeout') {
      context.logger.warn({ notificationId: job.notificationId, pushes: pushes.length, deadlineMs: context.sendDeadlineMs }, 'provider send timed out');
      context.clients.report(client, 'broken');
      marks.healthy = false;
      await markCredentialUnreachable(db, client.credentialId);
      return failAll('provider timeout');
    }
    outcomes = answered;
    const reached = outcomes.length === 0 || !outcomes.every((o) => o.kind === 'transient' && unreachable.has(o.reason));
    context.clients.report(client, reached ? 'reached' : 'unreachable');
    if (!reached) {
      marks.healthy = false;
      await markCredentialUnreachable(db, client.credentialId);
    }
  } catch (error) {
    providerRequest(job.platform, (performance.now() - started) / 1000);
    // The adapters map provider errors to outcomes; anything thrown is retried like a 5xx.
    context.logger.error({ err: error, notificationId: job.notificationId }, 'provider send failed');
    return failAll('provider error');
  }
  const refused = outcomes.find((outcome) => outcome.kind === 'credentials');
  if (refused) {
    marks.healthy = false;
    await markCredentialUnhealthy(db, client.credentialId, refused.reason);
    context.logger.error({ applicationId: job.applicationId, provider: providerOf[job.platform], reason: refused.reason }, 'provider refused the credentials');
  } else if (!marks.healthy && outcomes.some((outcome) => outcome.kind === 'accepted')) {
    await markCredentialHealthy(db, client.credentialId);
    marks.healthy = true;
  }
  return outcomes;
}

/**
 * Outcomes, dead devices, the retry of the transient ones (in the notification's lane and group)
 * and the webhooks they make (`delivery.failed`, `installation.invalidated`) commit together.
 */
async function record(db: EntityManager, context: JobContext, job: DeliverJob, notification: BatchNotification, attempt: Attempt): Promise<void> {
  // Outcomes alone are one statement: no transaction to open and commit around it (two round trips).
  const alone = attempt.invalidations.length === 0 && attempt.retry.length === 0 && !(await announcesFailed(db, context, job, attempt));
  const moved = alone
    ? await recordIn(db, context, job, notification, attempt)
    : await db.transactional((tx) => recordIn(tx, context, job, notification, attempt));
  reportRecorded(job, attempt, moved);
}

/** Whether the attempt fails deliveries that the application has a `delivery.failed` endpoint for (asked a few seconds ago). */
async function announcesFailed(db: EntityManager, context: JobContext, job: DeliverJob, attempt: Attempt): Promise<boolean> {
  return attempt.results.some((result) => result.state === 'failed') && (await context.webhooks.wants(db, job.applicationId, 'delivery.failed'));
}

/** Counted once committed: an attempt rolled back recorded nothing. */
function reportRecorded(job: DeliverJob, attempt: Attempt, moved: MovedCount[]): void {
  deliveriesEnded(job.platform, moved);
  deliveriesRetried(job.platform, attempt.retryReasons);
}

/** record(), in the caller's transaction (or, for outcomes alone, as one statement); answers what moved. */
async function recordIn(tx: EntityManager, context: JobContext, job: DeliverJob, notification: BatchNotification, attempt: Attempt): Promise<MovedCount[]> {
  const { webhooks } = context;
  const announceFailed = await announcesFailed(tx, context, job, attempt);
  const announceInvalidated = attempt.invalidations.length > 0 && (await webhooks.wants(tx, job.applicationId, 'installation.invalidated'));
  const { moved, failed } = await recordResults(tx, attempt.results, attempt.countAttempt, announceFailed);
  const invalidated = await invalidateInstallations(tx, attempt.invalidations);
  const events = [...deliveriesFailed(failed), ...(announceInvalidated ? installationsInvalidated(invalidated) : [])];
  if (events.length > 0) await webhooks.emit(tx, job.applicationId, events);
  if (attempt.retry.length > 0) {
    if (attempt.countAttempt) await countAttempts(tx, attempt.retry);
    await context.boss.send(
      queues.deliver,
      { ...job, deliveryIds: attempt.retry } satisfies DeliverJob,
      { startAfter: attempt.retryAfter, ...placement(job.applicationId, jobPriority(notification.options)), db: fromKysely(tx.getKysely()) },
    );
  }
  return moved;
}

/** A deliver job that failed for good (its retries exhausted): its pushes fail, the notification closes. */
export async function failDeliver(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: DeliverJob): Promise<void> {
  const { webhooks } = context;
  const db = em.fork();
  const results = job.deliveryIds.map((deliveryId): DeliveryResult => ({ deliveryId, state: 'failed', reason: 'internal_error', providerMessageId: null }));
  if (await webhooks.wants(db, job.applicationId, 'delivery.failed')) {
    const moved = await db.transactional(async (tx) => {
      const { moved, failed } = await recordResults(tx, results, false, true);
      await webhooks.emit(tx, job.applicationId, deliveriesFailed(failed));
      return moved;
    });
    deliveriesEnded(job.platform, moved);
  } else {
    deliveriesEnded(job.platform, (await recordResults(db, results, false)).moved);
  }
  await completeIfDone(db, context, job);
}

/**
 * Run after the batch's outcomes are committed: whichever batch commits last sees no pending
 * delivery and closes the notification; completeNotification makes a concurrent second call a no-op.
 * So a notification's `delivery.failed` webhooks are all stored before its `notification.completed`.
 */
async function completeIfDone(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: FanoutJob): Promise<void> {
  const progress = await notificationProgress(em, job.notificationId);
  if (progress && progress.pending === 0) reportNotificationEnd(context.logger, await complete(em, context.webhooks, job, finalStatus(progress)));
}

// The two jobs behind a send. Fanout: resolve the target users' installations, write one delivery
// row each and queue deliver batches, all in one transaction. Deliver: push a batch, record the
// outcomes, retry the transient ones later, and close the notification when nothing is pending.
import { performance } from 'node:perf_hooks';
import type { EntityManager } from '@mikro-orm/postgresql';
import { fromKysely, type PgBoss } from 'pg-boss';
import { newId } from '../db/ids.ts';
import { noWait } from './lane-gate.ts';
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
import { markCredentialHealthy, markCredentialUnhealthy, markCredentialUnreachable } from '../db/sql/credentials.ts';
import {
  claimPending,
  countAttempts,
  insertDeliveries,
  readBatch,
  recordResults,
  targetInstallations,
  type Candidate,
  type ClaimedDelivery,
  type DeliveryResult,
  type MovedCount,
  type NewDelivery,
  type PushedNotification,
} from '../db/sql/deliveries.ts';
import { invalidateInstallations, type Invalidation } from '../db/sql/installations.ts';
import {
  completeNotifications,
  holdUncancelled,
  notificationProgress,
  recipientCounts,
  startProcessing,
  type FannedNotification,
  type FinishedNotification,
  unfinishedCancels,
} from '../db/sql/notifications.ts';

/**
 * Pushes to make on one platform for one application: pending deliveries of one notification, or
 * of many small ones fanned out together (a batch of scheduled sends), all in one lane.
 */
export type DeliverJob = {
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
 * Fans out a batch of notifications, in transactions of up to a thousand users: each one's
 * deliveries and deliver jobs, or its end when it has nothing to push. The statements are per
 * transaction, not per notification: a batch of scheduled sends that came due together costs about
 * what one notification costs. Notifications no longer queued (fanned out before, or cancelled) are
 * left alone; a cancel cut short is finished (endCancelled). Between transactions the batch waits
 * its `turn` (a normal batch: while high-priority work runs in this process, lane-gate.ts).
 */
export async function runFanouts(em: EntityManager, context: JobContext, jobs: FanoutJob[], turn: () => Promise<void> = noWait): Promise<void> {
  if (jobs.length === 1) return fanOutTogether(em, context, jobs);
  // A transaction is bounded by the users it fans out to, not the notifications: a hundred
  // one-user notifications go together, two of 500 users each.
  const recipients = await recipientCounts(em.fork(), jobs.map((job) => job.notificationId));
  let group: FanoutJob[] = [];
  let users = 0;
  for (const [i, job] of jobs.entries()) {
    if (group.length > 0 && users + recipients[i] > recipientsPerTransaction) {
      await fanOutTogether(em, context, group);
      [group, users] = [[], 0];
      await turn();
    }
    group.push(job);
    users += recipients[i];
  }
  await fanOutTogether(em, context, group);
}

/** At most this many users' installations are fanned out in one transaction (two notifications of 500): a normal batch waits its turn between them (lane-gate.ts), so what runs when a high-priority send comes ends soon. */
const recipientsPerTransaction = 1_000;

/** runFanouts of jobs that go in one transaction. */
async function fanOutTogether(em: EntityManager, context: JobContext, jobs: FanoutJob[]): Promise<void> {
  const fanned = await em.fork().transactional(async (tx) => {
    // Everything below commits together: a re-run after a crash either sees it all or redoes it all.
    const notifications = await startProcessing(tx, jobs.map((job) => job.notificationId));
    const started = notifications.map((notification) => notification.id);
    const localized = notifications.some((notification) => Object.keys(notification.localizations ?? {}).length > 0);
    const candidates = started.length === 0 ? [] : await targetInstallations(tx, started, localized);
    const candidatesOf = Map.groupBy(candidates, (candidate) => candidate.notificationId);
    const fanouts = notifications.map((notification) => ({
      notification,
      ...fanOut(notification, candidatesOf.get(notification.id) ?? []),
    }));
    await insertDeliveries(tx, fanouts.flatMap((fanout) => fanout.deliveries));
    // A notification with nothing to push ends now.
    const nothingToPush = Map.groupBy(
      fanouts.filter(({ deliveries }) => !deliveries.some((delivery) => delivery.state === 'pending')),
      ({ notification }) => notification.applicationId,
    );
    const finished: FinishedNotification[] = [];
    for (const [applicationId, ended] of nothingToPush) {
      const announce = await context.webhooks.wants(tx, applicationId, 'notification.completed');
      const endings = ended.map(({ notification }): Ending => ({ notificationId: notification.id, status: 'completed' }));
      finished.push(...(await completeAndAnnounce(tx, context.webhooks, applicationId, endings, announce)));
    }
    const deliverJobs = deliverBatches(fanouts, context.batchSize);
    if (deliverJobs.length > 0) await context.boss.insert(queues.deliver, deliverJobs, { db: fromKysely(tx.getKysely()) });
    const notStarted = jobs.filter((job) => !started.includes(job.notificationId));
    return { skips: fanouts.map((fanout) => fanout.skips), finished, notStarted };
  });
  // Counted once committed: a fanout that rolled back did none of it.
  for (const skips of fanned.skips) {
    notificationMoved('processing');
    for (const [platform, counts] of skips) deliveriesEnded(platform, counts);
  }
  for (const ended of fanned.finished) reportNotificationEnd(context.logger, ended);
  // Not queued any more: fanned out before, or cancelled (perhaps by a cancel cut short).
  const unfinished = await unfinishedCancels(em.fork(), fanned.notStarted.map((job) => job.notificationId));
  for (const job of fanned.notStarted.filter((job) => unfinished.includes(job.notificationId))) await endCancelled(em, context, job);
}

/**
 * The fanned-out notifications' pending deliveries in deliver batches by application, lane and
 * platform: many small notifications share a batch, one large one fills batches of its own.
 */
function deliverBatches(
  fanouts: { notification: FannedNotification; deliveries: NewDelivery[] }[],
  batchSize: number,
): { data: DeliverJob; priority: number; group: { id: string } }[] {
  const lanes = new Map<string, { applicationId: string; priority: number; platform: Platform; deliveryIds: string[] }>();
  for (const { notification, deliveries } of fanouts) {
    const { applicationId } = notification;
    const priority = jobPriority(notification.options);
    for (const { platform, deliveryId, state } of deliveries) {
      if (state !== 'pending') continue;
      const key = `${applicationId}:${priority}:${platform}`;
      if (!lanes.has(key)) lanes.set(key, { applicationId, priority, platform, deliveryIds: [] });
      lanes.get(key)!.deliveryIds.push(deliveryId);
    }
  }
  return [...lanes.values()].flatMap(({ applicationId, priority, platform, deliveryIds }) =>
    chunk(deliveryIds, batchSize).map((batch) => ({ data: { applicationId, platform, deliveryIds: batch }, ...placement(applicationId, priority) })),
  );
}

/** One notification's fanout, without I/O: its deliveries to write. */
function fanOut(notification: FannedNotification, candidates: Candidate[]): { deliveries: NewDelivery[]; skips: Map<string, MovedCount[]> } {
  const { id: notificationId, applicationId } = notification;
  const tags = Object.keys(notification.localizations ?? {});
  const content = pushContent(notification);
  const withCredentials = new Set(
    Object.entries(providerOf)
      .filter(([, provider]) => notification.credentialProviders.includes(provider))
      .map(([platform]) => platform),
  );
  const classified = classify(candidates, { dataOnly: isDataOnly(content), platformsWithCredentials: withCredentials });
  // Each device gets its localization (or the default content, null); the push is cut to fit
  // once per platform and localization; the deliver jobs cut it the same way (fitToPlatform is pure).
  const localeOf = tags.length > 0 ? localeMatcher(tags) : () => null;
  const truncationOf = fitsOnce((platform, locale) => fitToPlatform(contentFor(content, locale), platform).truncation);
  const deliveries = classified.map((delivery): NewDelivery => {
    const locale = delivery.state === 'pending' ? localeOf(delivery.deviceLocale) : null;
    return {
      ...delivery,
      applicationId,
      notificationId,
      deliveryId: newId(),
      locale,
      truncation: delivery.state === 'pending' ? truncationOf(delivery.platform, locale) : null,
    };
  });
  return { deliveries, skips: skipsByPlatform(classified) };
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
  const [ended] = await complete(em.fork(), context.webhooks, job.applicationId, [{ notificationId: job.notificationId, status: 'failed' }]);
  reportNotificationEnd(context.logger, ended);
}

type Ending = { notificationId: string; status: FinishedNotification['status'] };

/**
 * Ends notifications of one application once each (completeNotifications: the first caller wins),
 * with their `notification.completed` webhooks in the same transaction when the application has an
 * endpoint for it. Without one, the update alone: no transaction around it. Answers those this call
 * ended, which the caller reports once committed.
 */
async function complete(db: EntityManager, webhooks: WebhookOutbox, applicationId: string, endings: Ending[]): Promise<FinishedNotification[]> {
  if (endings.length === 0) return [];
  if (!(await webhooks.wants(db, applicationId, 'notification.completed'))) return completeNotifications(db, endings);
  return db.transactional((tx) => completeAndAnnounce(tx, webhooks, applicationId, endings, true));
}

/** complete(), inside the caller's transaction. */
async function completeAndAnnounce(
  tx: EntityManager,
  webhooks: WebhookOutbox,
  applicationId: string,
  endings: Ending[],
  announce: boolean,
): Promise<FinishedNotification[]> {
  const ended = await completeNotifications(tx, endings);
  if (ended.length > 0 && announce) await webhooks.emit(tx, applicationId, ended.map(notificationCompleted));
  return ended;
}

/** What a deliver job reads of its notifications: what is pushed and until when (not their recipients). */
type BatchNotifications = ReadonlyMap<string, PushedNotification>;

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

function settle(notifications: BatchNotifications, sent: ClaimedDelivery[], outcomes: PushOutcome[], countAttempt: boolean): Attempt {
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
        if (!mayAttempt(notifications.get(delivery.notificationId)!, delivery.attempts + 1, retryAt)) fail(outcome.deliveryId, 'expired');
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

/**
 * Deliver: claim the batch's pending deliveries (of one notification, or of many small ones a batch
 * of fanouts put together), push them a chunk at a time, record each chunk, and end the
 * notifications that have nothing pending any more.
 */
export async function runDeliver(em: EntityManager, context: JobContext, job: DeliverJob): Promise<void> {
  const db = em.fork();
  const provider = providerOf[job.platform];
  const batch = await readBatch(db, { ...job, provider });
  const notifications: BatchNotifications = new Map(batch.notifications.map((n) => [n.id, n]));
  if (notifications.size === 0) return;
  // Counting at the claim instead of with the outcome still counts each attempt once: a batch with a
  // ttl 0 notification among others counts them all at the claim.
  const countAtClaim = [...notifications.values()].some(countsAttemptBeforePush);
  const pending = countAtClaim ? await claimPending(db, job.deliveryIds) : batch.pending;
  const { sendable, unsendable } = sortClaimed(notifications, pending);
  const client = sendable.length > 0 ? await context.clients.get(db, job.applicationId, provider, batch.credential) : null;
  if (sendable.length > 0 && !client) {
    for (const delivery of sendable) unsendable.push(ended(delivery.deliveryId, 'skipped', 'no_credentials'));
  }
  if (unsendable.length > 0) await record(db, context, job, notifications, { ...noAttempt(!countAtClaim), results: unsendable });
  const health: CredentialMarks = { healthy: !batch.credential?.marked };
  const cancelled = client ? await sendAndRecord(db, context, job, notifications, client, health, sendable, !countAtClaim) : new Set<string>();
  for (const notificationId of cancelled) await endCancelled(db, context, { notificationId, applicationId: job.applicationId });
  await completeIfDone(db, context, job.applicationId, [...notifications.keys()].filter((id) => !cancelled.has(id)));
}

const ended = (deliveryId: string, state: 'skipped' | 'failed', reason: string): DeliveryResult => ({
  deliveryId,
  state,
  reason,
  providerMessageId: null,
});

/** The batch's pending deliveries: those that can still be pushed, and the end of the others. */
function sortClaimed(notifications: BatchNotifications, pending: ClaimedDelivery[]): { sendable: ClaimedDelivery[]; unsendable: DeliveryResult[] } {
  const sendable: ClaimedDelivery[] = [];
  const unsendable: DeliveryResult[] = [];
  for (const delivery of pending) {
    if (!delivery.installationRowId || !delivery.providerIdentifier) unsendable.push(ended(delivery.deliveryId, 'skipped', 'installation_deleted'));
    else if (delivery.installationStatus !== 'active') unsendable.push(ended(delivery.deliveryId, 'skipped', 'installation_invalid'));
    else if (!mayAttempt(notifications.get(delivery.notificationId)!, delivery.attempts)) unsendable.push(ended(delivery.deliveryId, 'failed', 'expired'));
    else sendable.push(delivery);
  }
  return { sendable, unsendable };
}

/** Pushes the sendable deliveries a chunk at a time; answers the notifications found cancelled. */
async function sendAndRecord(
  db: EntityManager,
  context: JobContext,
  job: DeliverJob,
  notifications: BatchNotifications,
  client: ProviderClient,
  health: CredentialMarks,
  sendable: ClaimedDelivery[],
  countAttempt: boolean,
): Promise<Set<string>> {
  // Exactly the content the fanout measured and recorded as the truncation of this platform and
  // each delivery's localization: one object per notification and localization, which the
  // providers build one payload from for all its pushes.
  const contentOf = new Map(
    [...notifications.values()].map((notification) => {
      const content = pushContent(notification);
      return [notification.id, fitsOnce((platform, locale): PushContent => fitToPlatform(contentFor(content, locale), platform).content)];
    }),
  );
  // Outcomes are recorded a chunk at a time, each before the next chunk is sent: a crash or a
  // database outage re-sends at most the one chunk whose answers were not recorded yet. Each chunk
  // is pushed and recorded holding its notifications' pushes against a cancel
  // (domain/cancellation.ts): once one is cancelled, nothing more of it is pushed, and the cancel
  // ends its deliveries left pending.
  const cancelled = new Set<string>();
  for (const part of chunk(sendable, context.recordEvery)) {
    const pushed = await db.transactional(async (tx) => {
      const found = await holdUncancelled(tx, [...new Set(part.map((delivery) => delivery.notificationId))]);
      const live = part.filter((delivery) => !found.has(delivery.notificationId) && !cancelled.has(delivery.notificationId));
      const pushes: Push[] = live.map((delivery) => {
        const notification = notifications.get(delivery.notificationId)!;
        return {
          deliveryId: delivery.deliveryId,
          notificationId: notification.id,
          providerIdentifier: delivery.providerIdentifier!,
          content: contentOf.get(notification.id)!(job.platform, delivery.locale),
          expiresAt: expiresAt(notification),
        };
      });
      const outcomes = pushes.length > 0 ? await sendChunk(tx, context, job, client, pushes, health) : [];
      const attempt = settle(notifications, live, outcomes, countAttempt);
      return { found, attempt, moved: await recordIn(tx, context, job, notifications, attempt) };
    });
    for (const id of pushed.found) cancelled.add(id);
    reportRecorded(job, pushed.attempt, pushed.moved);
  }
  return cancelled;
}

/** A job that found its notification cancelled finishes the cancel, in case the cancel itself was cut short. */
async function endCancelled(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: FanoutJob): Promise<void> {
  reportCancellation(context.logger, await finishCancellation(em, context.webhooks, job.applicationId, job.notificationId));
}

/**
 * Whether the credential is healthy as far as this job knows: unmarked when the batch read it, or
 * marked healthy since. Only a marked one is written when a push is accepted, so a job whose
 * credential is fine makes no round trip for it. A mark another job makes meanwhile is cleared by
 * the next batch that reads it and reaches the provider.
 */
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
      context.logger.warn({ applicationId: job.applicationId, pushes: pushes.length, deadlineMs: context.sendDeadlineMs }, 'provider send timed out');
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
    context.logger.error({ err: error, applicationId: job.applicationId, pushes: pushes.length }, 'provider send failed');
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
 * Outcomes, dead devices, the retry of the transient ones (in the batch's lane and group) and the
 * webhooks they make (`delivery.failed`, `installation.invalidated`) commit together.
 */
async function record(db: EntityManager, context: JobContext, job: DeliverJob, notifications: BatchNotifications, attempt: Attempt): Promise<void> {
  // Outcomes alone are one statement: no transaction to open and commit around it (two round trips).
  const alone = attempt.invalidations.length === 0 && attempt.retry.length === 0 && !(await announcesFailed(db, context, job, attempt));
  const moved = alone
    ? await recordIn(db, context, job, notifications, attempt)
    : await db.transactional((tx) => recordIn(tx, context, job, notifications, attempt));
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

/**
 * The lane of a batch's retry: its notifications'. The fanout puts only notifications of one lane
 * in a batch; were they mixed, the highest would keep none of them behind the others.
 */
function laneOf(notifications: BatchNotifications): number {
  return Math.max(...[...notifications.values()].map((notification) => jobPriority(notification.options)));
}

/** record(), in the caller's transaction (or, for outcomes alone, as one statement); answers what moved. */
async function recordIn(tx: EntityManager, context: JobContext, job: DeliverJob, notifications: BatchNotifications, attempt: Attempt): Promise<MovedCount[]> {
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
      { applicationId: job.applicationId, platform: job.platform, deliveryIds: attempt.retry } satisfies DeliverJob,
      { startAfter: attempt.retryAfter, ...placement(job.applicationId, laneOf(notifications)), db: fromKysely(tx.getKysely()) },
    );
  }
  return moved;
}

/** A deliver job that failed for good (its retries exhausted): its pushes fail, its notifications close. */
export async function failDeliver(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: DeliverJob): Promise<void> {
  const { webhooks } = context;
  const db = em.fork();
  const notificationIds = (await readBatch(db, { ...job, provider: providerOf[job.platform] })).notifications.map((notification) => notification.id);
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
  await completeIfDone(db, context, job.applicationId, notificationIds);
}

/**
 * Run after the batch's outcomes are committed: whichever batch commits last sees no pending
 * delivery and closes the notification; completeNotifications makes a concurrent second call a
 * no-op. So a notification's `delivery.failed` webhooks are all stored before its
 * `notification.completed`.
 */
async function completeIfDone(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, applicationId: string, notificationIds: string[]): Promise<void> {
  if (notificationIds.length === 0) return;
  const endings = [...(await notificationProgress(em, notificationIds))]
    .filter(([, progress]) => progress.pending === 0)
    .map(([notificationId, progress]) => ({ notificationId, status: finalStatus(progress) }));
  for (const finished of await complete(em, context.webhooks, applicationId, endings)) reportNotificationEnd(context.logger, finished);
}

// The deliver job behind a send (the fanout that queues it: fanout-job.ts): push a batch, record the
// outcomes, retry the transient ones later, and close the notification when nothing is pending. A
// throttled notification's pushes go at the slots its pace gives them (paced-sends.ts).
import { performance } from 'node:perf_hooks';
import type { EntityManager } from '@mikro-orm/postgresql';
import { fromKysely } from 'pg-boss';
import { noWait } from './lane-gate.ts';
import {
  deliverChunks,
  ended,
  fittedContents,
  laneOf,
  paceKey,
  noAttempt,
  settle,
  sortClaimed,
  type Attempt,
  type BatchNotifications,
  type SendableDelivery,
} from '../domain/delivery-rules.ts';
import { countsAttemptBeforePush, expiresAt, finalStatus, mayAttempt, pushTimes } from '../domain/fanout.ts';
import { finishCancellation, reportCancellation } from '../domain/cancellation.ts';
import { deliveriesEnded, deliveriesRetried, providerRequest } from '../observability/metrics.ts';
import type { Push, PushOutcome, PushProvider } from '../providers/provider.ts';
import { networkReasons } from '../providers/support.ts';
import type { ProviderClient } from './clients.ts';
import { providerOf } from '../domain/platforms.ts';
import { reportNotificationEnd, type FanoutJob } from '../domain/notifications.ts';
import { deliveriesFailed, installationsInvalidated, notificationCompleted, type WebhookOutbox } from '../domain/webhook-outbox.ts';
import { deliverQueueOf, type DeliverJob, type JobContext } from './job-context.ts';
import { sendPaced, takeSlots, type Slots } from './paced-sends.ts';
import { placement } from './queue.ts';
import { UnopenableSecret, unopenableReason } from '../domain/credentials.ts';
import { markCredentialHealthy, markCredentialUnhealthy, markCredentialUnreachable } from '../db/sql/credentials.ts';
import {
  claimPending,
  countAttempts,
  type CredentialVersion,
  readBatch,
  recordResults,
  type DeliveryResult,
  type MovedCount,
} from '../db/sql/deliveries.ts';
import { invalidateInstallations } from '../db/sql/installations.ts';
import { completeNotifications, holdUncancelled, notificationProgress, type FinishedNotification } from '../db/sql/notifications.ts';

const unreachable = new Set<string>(networkReasons);

/**
 * How long past its deadline a provider's send may take before it counts as hung: the providers
 * give up each unanswered push at the deadline themselves, so only a fault of theirs reaches this.
 */
const hungSendGraceMs = 2000;

/**
 * The provider's answers: each push answered by the deadline keeps its answer, the others are
 * transient `provider timeout`s (providers do this per push). A send still running well past the
 * deadline is a hung client: every push is then a timeout, and the client is rebuilt. Without this
 * backstop a hung connection would hold the batch until the job expires.
 */
async function sendWithDeadline(provider: PushProvider, pushes: Push[], deadlineMs: number): Promise<PushOutcome[] | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const sending = provider.send(pushes, { deadline: new Date(Date.now() + deadlineMs) });
  // Still settles after the backstop; nobody awaits it then.
  sending.catch(() => undefined);
  try {
    return await Promise.race([sending, new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), deadlineMs + hungSendGraceMs)))]);
  } finally {
    clearTimeout(timer);
  }
}


export type Ending = { notificationId: string; status: FinishedNotification['status'] };

/**
 * Ends notifications of one application once each (completeNotifications: the first caller wins),
 * with their `notification.completed` webhooks in the same transaction when the application has an
 * endpoint for it. Without one, the update alone: no transaction around it. Answers those this call
 * ended, which the caller reports once committed.
 */
export async function complete(db: EntityManager, webhooks: WebhookOutbox, applicationId: string, endings: Ending[]): Promise<FinishedNotification[]> {
  if (endings.length === 0) return [];
  if (!(await webhooks.wants(db, applicationId, 'notification.completed'))) return completeNotifications(db, endings);
  return db.transactional((tx) => completeAndAnnounce(tx, webhooks, applicationId, endings, true));
}

/** complete(), inside the caller's transaction. */
export async function completeAndAnnounce(
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

/**
 * Deliver: claim the batch's pending deliveries (of one notification, or of many small ones a batch
 * of fanouts put together), push them a chunk at a time, record each chunk, and end the
 * notifications that have nothing pending any more.
 */
export async function runDeliver(em: EntityManager, context: JobContext, job: DeliverJob, turn: () => Promise<void> = noWait): Promise<void> {
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
  const client = sendable.length > 0 ? await openClient(db, context, job, batch.credential) : null;
  if (sendable.length > 0 && client === 'unopenable') {
    for (const delivery of sendable) unsendable.push(ended(delivery.deliveryId, 'failed', unopenableReason));
  } else if (sendable.length > 0 && !client) {
    for (const delivery of sendable) unsendable.push(ended(delivery.deliveryId, 'skipped', 'no_credentials'));
  }
  // Nothing was pushed for these: their attempts stay as they were.
  if (unsendable.length > 0) await record(db, context, job, notifications, { ...noAttempt(false), results: unsendable });
  const health: CredentialMarks = { healthy: !batch.credential?.marked };
  const { cancelled, accepted } =
    client && client !== 'unopenable'
      ? await sendAndRecord(db, context, job, notifications, client, health, sendable, !countAtClaim, turn)
      : { cancelled: new Set<string>(), accepted: 0 };
  for (const notificationId of cancelled) await endCancelled(db, context, { notificationId, applicationId: job.applicationId });
  await completeIfDone(db, context, job.applicationId, [...notifications.keys()].filter((id) => !cancelled.has(id)));
  // The provider answers again after refusing or failing: pushes waiting out their backoff go now.
  const recovered =
    accepted > 0 && (batch.credential?.marked || context.waitingRetries.has(waitingRetriesKey(job)) || sendable.some((delivery) => delivery.attempts > 1));
  if (recovered) await resumeWaitingRetries(context, job);
}

/**
 * The retry jobs of an application's pushes to one platform share a pg-boss singleton key: after
 * an outage their backoff may be minutes long, and once the provider answers again they are made
 * due at once (pg-boss `update`), instead of each waiting out its step.
 */
const waitingRetriesKey = (job: Pick<DeliverJob, 'applicationId' | 'platform' | 'campaign'>) =>
  `retry:${job.applicationId}:${job.platform}${job.campaign ? ':campaign' : ''}`;

async function resumeWaitingRetries(context: JobContext, job: DeliverJob): Promise<void> {
  context.waitingRetries.delete(waitingRetriesKey(job));
  const { updated } = await context.boss.update(deliverQueueOf(job), undefined, { singletonKey: waitingRetriesKey(job), match: 'all', startAfter: 0 });
  if (updated > 0) context.logger.info({ applicationId: job.applicationId, platform: job.platform, jobs: updated }, 'provider answers again: waiting retries resumed');
}

/**
 * The batch's provider client; null without credentials; 'unopenable' when this worker's key does
 * not open them (stored since it started, with another key, or damaged): the credential is marked
 * unhealthy for that reason, as a worker's start does, and its pushes fail with it.
 */
async function openClient(
  db: EntityManager,
  context: JobContext,
  job: DeliverJob,
  credential: CredentialVersion | null,
): Promise<ProviderClient | null | 'unopenable'> {
  try {
    return await context.clients.get(db, job.applicationId, providerOf[job.platform], credential);
  } catch (error) {
    if (!(error instanceof UnopenableSecret) || !credential) throw error;
    await markCredentialUnhealthy(db, credential.id, unopenableReason);
    // Logged when first found; later batches find the mark.
    if (!credential.marked) context.logger.error({ applicationId: job.applicationId, provider: providerOf[job.platform], reason: error.message }, 'stored credentials cannot be opened');
    return 'unopenable';
  }
}

/**
 * Pushes the sendable deliveries a chunk at a time; answers the notifications found cancelled and
 * the pushes accepted. A throttled notification's chunks first take their slots (takeSlots) and are
 * spread over them (sendPaced); what its pace cannot take soon is handed back to a later job.
 */
async function sendAndRecord(
  db: EntityManager,
  context: JobContext,
  job: DeliverJob,
  notifications: BatchNotifications,
  client: ProviderClient,
  health: CredentialMarks,
  sendable: SendableDelivery[],
  countAttempt: boolean,
  turn: () => Promise<void>,
): Promise<{ cancelled: Set<string>; accepted: number }> {
  const contentOf = fittedContents();
  // Outcomes are recorded a chunk at a time, each before the next chunk is sent: a crash or a
  // database outage re-sends at most the one chunk whose answers were not recorded yet. Each chunk
  // is pushed and recorded holding its notifications' pushes against a cancel
  // (domain/cancellation.ts): once one is cancelled, nothing more of it is pushed, and the cancel
  // ends its deliveries left pending.
  const cancelled = new Set<string>();
  // Throttled notifications whose pushes left in this job went to a later one (takeSlots).
  const handedBack = new Set<string>();
  let accepted = 0;
  const started = performance.now();
  const chunks = deliverChunks(sendable, context.recordEvery);
  for (const [index, part] of chunks.entries()) {
    // A broadcast's batch gives way between its chunks while a send's job runs here (lane-gate.ts).
    if (index > 0) await turn();
    let slots: Slots | null = null;
    if (part.pace) {
      if (cancelled.has(part.pace.notificationId) || handedBack.has(paceKey(part.pace))) continue;
      slots = await takeSlots(db, context, job, notifications, chunks.slice(index), started);
      if (slots === null) {
        handedBack.add(paceKey(part.pace));
        continue;
      }
    }
    const pushed = await db.transactional(async (tx) => {
      const found = await holdUncancelled(tx, [...new Set(part.deliveries.map((delivery) => delivery.notificationId))]);
      const live = part.deliveries.filter((delivery) => !found.has(delivery.notificationId) && !cancelled.has(delivery.notificationId));
      // A paced chunk has waited for its slots: a push whose ttl passed meanwhile expires, as it
      // would at the start of a job, and was not attempted.
      const now = new Date();
      const expired =
        slots === null ? [] : live.filter((delivery) => !mayAttempt(pushTimes(delivery.notification, delivery.scheduledFor), delivery.attempts, now));
      const going = expired.length === 0 ? live : live.filter((delivery) => !expired.includes(delivery));
      const pushes = going.map(({ deliveryId, notification, providerIdentifier, pushKeys, readAt, locale, scheduledFor }): Push => ({
        deliveryId,
        notificationId: notification.id,
        providerIdentifier,
        ...(pushKeys && readAt ? { subscription: { p256dh: pushKeys.p256dh, auth: pushKeys.auth, readAt } } : {}),
        content: contentOf(notification, job.platform, locale),
        expiresAt: expiresAt(pushTimes(notification, scheduledFor)),
      }));
      const outcomes =
        pushes.length === 0
          ? []
          : slots === null
            ? await sendChunk(tx, context, job, client, pushes, health)
            : await sendPaced(pushes, slots, (group) => sendChunk(tx, context, job, client, group, health));
      const attempt = settle(going, outcomes, countAttempt);
      const moved = await recordIn(tx, context, job, notifications, attempt);
      const expiry = { ...noAttempt(false), results: expired.map((delivery) => ended(delivery.deliveryId, 'failed', 'expired')) };
      if (expired.length > 0) moved.push(...(await recordIn(tx, context, job, notifications, expiry)));
      return { found, attempt, moved };
    });
    for (const id of pushed.found) cancelled.add(id);
    reportRecorded(job, pushed.attempt, pushed.moved);
    accepted += pushed.attempt.results.filter((result) => result.state === 'accepted').length;
  }
  return { cancelled, accepted };
}


/** A job that found its notification cancelled finishes the cancel, in case the cancel itself was cut short. */
export async function endCancelled(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: FanoutJob): Promise<void> {
  reportCancellation(context.logger, await finishCancellation(em, context.webhooks, job.applicationId, job.notificationId));
}

/**
 * Whether the credential is healthy as far as this job knows: unmarked when the batch read it, or
 * marked healthy since. Only a marked one is written when a push is accepted, so a job whose
 * credential is fine makes no round trip for it. A mark another job makes meanwhile is cleared by
 * the next batch that reads it and reaches the provider.
 */
export type CredentialMarks = { healthy: boolean };

/** One provider round trip, bounded by the deadline; the client's and the credential's health follow it. */
export async function sendChunk(
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
    const timedOut = answered === 'hung' ? pushes.length : answered.filter((o) => o.kind === 'transient' && o.reason === 'provider timeout').length;
    if (timedOut > 0) {
      context.logger.warn({ applicationId: job.applicationId, pushes: pushes.length, timedOut, deadlineMs: context.sendDeadlineMs }, 'provider did not answer every push in time');
    }
    // Not one answer by the deadline: the connection may be wedged, and a fresh client is the cure
    // (a send that never returned is; a batch whose pushes all timed out is unless another batch
    // on the client was answered meanwhile: clients.ts).
    if (answered === 'hung' || (timedOut === pushes.length && pushes.length > 0)) {
      context.clients.report(client, 'broken', answered === 'hung' ? undefined : started);
      marks.healthy = false;
      await markCredentialUnreachable(db, client.credentialId);
      return answered === 'hung' ? failAll('provider timeout') : answered;
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
    context.waitingRetries.add(waitingRetriesKey(job));
    if (attempt.countAttempt) await countAttempts(tx, attempt.retry);
    await context.boss.send(
      deliverQueueOf(job),
      { applicationId: job.applicationId, platform: job.platform, deliveryIds: attempt.retry, ...(job.campaign ? { campaign: true } : {}) } satisfies DeliverJob,
      {
        startAfter: attempt.retryAfter,
        singletonKey: waitingRetriesKey(job),
        ...placement(job.applicationId, laneOf(notifications)),
        db: fromKysely(tx.getKysely()),
      },
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
export async function completeIfDone(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, applicationId: string, notificationIds: string[]): Promise<void> {
  if (notificationIds.length === 0) return;
  const endings = [...(await notificationProgress(em, notificationIds))]
    .filter(([, progress]) => progress.pending === 0)
    .map(([notificationId, progress]) => ({ notificationId, status: finalStatus(progress) }));
  for (const finished of await complete(em, context.webhooks, applicationId, endings)) reportNotificationEnd(context.logger, finished);
}

// The fanout job behind a send: resolve the target users' installations, write one delivery row each
// and queue deliver batches (jobs.ts), all in one transaction. A send to an audience is handed to its
// walk instead (broadcasts.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { fromKysely, type PgBoss } from 'pg-boss';
import { deliverBatches, fanOut } from '../domain/delivery-rules.ts';
import { localTimeRule } from '../domain/local-time.ts';
import { reportNotificationEnd, type FanoutJob } from '../domain/notifications.ts';
import { insertDeliveries, targetInstallations } from '../db/sql/deliveries.ts';
import { recipientCounts, startProcessing, unfinishedCancels, type FannedNotification, type FinishedNotification } from '../db/sql/notifications.ts';
import { deliveriesEnded, notificationMoved } from '../observability/metrics.ts';
import type { DeliverJob, JobContext } from './job-context.ts';
import { complete, completeAndAnnounce, endCancelled, type Ending } from './jobs.ts';
import { noWait } from './lane-gate.ts';
import { placement, queues } from './queue.ts';

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
    const starting = await startProcessing(tx, jobs.map((job) => job.notificationId));
    const started = starting.map((notification) => notification.id);
    // A send to an audience is not fanned out here: its walk is queued in the campaign lane
    // (worker/broadcasts.ts), committed with its start.
    const broadcasts = starting.filter((notification) => notification.audience);
    const notifications = starting.filter((notification) => !notification.audience);
    if (broadcasts.length > 0) await queueWalks(context.boss, tx, broadcasts);
    const withLocale = notifications.some((notification) => Object.keys(notification.localizations ?? {}).length > 0);
    const withTimezone = notifications.some((notification) => localTimeRule(notification.options) !== null);
    const candidates =
      notifications.length === 0 ? [] : await targetInstallations(tx, notifications.map((notification) => notification.id), { withLocale, withTimezone });
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
    // Pushes due later (a send at each device's local time) wait in the queue as deferred jobs, one
    // set of batches per instant: nothing of them is held anywhere else meanwhile.
    const deliverJobs = deliverBatches(fanouts, context.batchSize).map(({ applicationId, priority, platform, deliveryIds, startAfter }) => ({
      data: { applicationId, platform, deliveryIds } satisfies DeliverJob,
      ...placement(applicationId, priority),
      ...(startAfter ? { startAfter } : {}),
    }));
    if (deliverJobs.length > 0) await context.boss.insert(queues.deliver, deliverJobs, { db: fromKysely(tx.getKysely()) });
    const notStarted = jobs.filter((job) => !started.includes(job.notificationId));
    return { skips: fanouts.map((fanout) => fanout.skips), walks: broadcasts.length, finished, notStarted };
  });
  // Counted once committed: a fanout that rolled back did none of it.
  for (let i = 0; i < fanned.walks; i += 1) notificationMoved('processing');
  for (const skips of fanned.skips) {
    notificationMoved('processing');
    for (const [platform, counts] of skips) deliveriesEnded(platform, counts);
  }
  for (const ended of fanned.finished) reportNotificationEnd(context.logger, ended);
  // Not queued any more: fanned out before, or cancelled (perhaps by a cancel cut short).
  const db = em.fork();
  const unfinished = await unfinishedCancels(db, fanned.notStarted.map((job) => job.notificationId));
  for (const job of fanned.notStarted.filter((job) => unfinished.includes(job.notificationId))) await endCancelled(db, context, job);
}

/** Queues the walks of broadcasts that have just started, in the caller's transaction. */
async function queueWalks(boss: PgBoss, tx: EntityManager, broadcasts: FannedNotification[]): Promise<void> {
  const walks = broadcasts.map(({ id, applicationId }) => ({
    data: { notificationId: id, applicationId } satisfies FanoutJob,
    ...placement(applicationId, 0),
  }));
  await boss.insert(queues.broadcast, walks, { db: fromKysely(tx.getKysely()) });
}

/** What a fanout that failed for good leaves: a failed notification, not a queued one forever. */
export async function failFanout(em: EntityManager, context: Pick<JobContext, 'webhooks' | 'logger'>, job: FanoutJob): Promise<void> {
  const [ended] = await complete(em.fork(), context.webhooks, job.applicationId, [{ notificationId: job.notificationId, status: 'failed' }]);
  reportNotificationEnd(context.logger, ended);
}

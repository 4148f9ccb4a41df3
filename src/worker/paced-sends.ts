// A throttled notification's pushes (domain/throttle.ts): a chunk takes its slots of the pace shared
// by every worker and is spread over them; what the pace cannot take soon is handed back to a job of
// its own rather than waiting in a worker.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EntityManager } from '@mikro-orm/postgresql';
import { laneOf, paceKey, type BatchNotifications, type DeliverChunk } from '../domain/delivery-rules.ts';
import { handBackDelayMs, pacedSends, reservationLookaheadMs, slotSpacingMs, throttledSliceMs } from '../domain/throttle.ts';
import { reserveSlots } from '../db/sql/throttles.ts';
import type { Push, PushOutcome } from '../providers/provider.ts';
import { deliverQueueOf, type DeliverJob, type JobContext } from './job-context.ts';
import { placement } from './queue.ts';

/** A chunk's reserved slots: the first at `startAt` (performance.now() time), then one every `spacingMs`. */
export type Slots = { startAt: number; spacingMs: number };

/**
 * A throttled chunk's turn (`rest` is it and the chunks after it): its slots reserved and waited
 * for; or null when its pace is further ahead than the lookahead, or this job has paced for its
 * slice: then the notification's pushes left in this job are handed back, as a job deferred until
 * its pace has room, and this job goes on with the others' chunks or ends. No worker waits for a
 * pace longer than the lookahead, and a pace of minutes is pushed by a job every few seconds, not
 * by one job for its length.
 */
export async function takeSlots(
  db: EntityManager,
  context: JobContext,
  job: DeliverJob,
  notifications: BatchNotifications,
  rest: DeliverChunk[],
  started: number,
): Promise<Slots | null> {
  const pace = rest[0].pace!;
  const spacingMs = slotSpacingMs(pace.perMinute);
  const left = () => rest.filter((part) => part.pace && paceKey(part.pace) === paceKey(pace)).flatMap((part) => part.deliveries.map((d) => d.deliveryId));
  if (performance.now() - started > throttledSliceMs) {
    await handBack(context, job, notifications, left(), 0);
    return null;
  }
  const reservation = await reserveSlots(db, {
    notificationId: pace.notificationId,
    dueAt: pace.dueAt,
    applicationId: job.applicationId,
    count: rest[0].deliveries.length,
    spacingMs,
    lookaheadMs: reservationLookaheadMs,
  });
  if ('freeInMs' in reservation) {
    await handBack(context, job, notifications, left(), handBackDelayMs(reservation.freeInMs));
    return null;
  }
  const startAt = performance.now() + reservation.startsInMs;
  if (reservation.startsInMs > 0) await sleep(reservation.startsInMs);
  return { startAt, spacingMs };
}

/**
 * A throttled notification's pushes this job leaves to a later one, in the same queue, lane and
 * group, due after `delayMs` (relative to the database's clock, as pg-boss reads a delay). Not a
 * retry: its attempts are not counted, and it carries no retry key, so that a provider that answers
 * again (resumeWaitingRetries) does not bring it forward. A process that dies before this job is
 * marked done runs the job again: the pushes then go to two jobs, and a delivery is pushed at
 * least once, as after any crash.
 */
async function handBack(context: JobContext, job: DeliverJob, notifications: BatchNotifications, deliveryIds: string[], delayMs: number): Promise<void> {
  if (deliveryIds.length === 0) return;
  await context.boss.send(
    deliverQueueOf(job),
    { applicationId: job.applicationId, platform: job.platform, deliveryIds, ...(job.campaign ? { campaign: true } : {}) } satisfies DeliverJob,
    { ...(delayMs > 0 ? { startAfter: delayMs / 1000 } : {}), ...placement(job.applicationId, laneOf(notifications)) },
  );
  context.logger.debug({ applicationId: job.applicationId, platform: job.platform, deliveries: deliveryIds.length, delayMs: Math.round(delayMs) }, 'throttled pushes handed back');
}

/**
 * A reserved chunk's pushes, each at its slot (throttle.ts pacedSends): a group goes when its time
 * comes, without waiting for the answers of the groups before it, so that a slow provider delays
 * answers, never the pace. The times count from the first slot, not from when the chunk's
 * transaction got its hold, so that a slow hold delays only the first push. Answers every push's
 * outcome once all are answered.
 */
export async function sendPaced(pushes: Push[], slots: Slots, send: (group: Push[]) => Promise<PushOutcome[]>): Promise<PushOutcome[]> {
  const sending: Promise<PushOutcome[]>[] = [];
  for (const group of pacedSends(pushes.length, slots.spacingMs)) {
    const wait = slots.startAt + group.offsetMs - performance.now();
    if (wait > 0) await sleep(wait);
    const answers = send(pushes.slice(group.from, group.to));
    // Awaited below; a failure must not go unhandled while the next group waits for its time.
    answers.catch(() => undefined);
    sending.push(answers);
  }
  return (await Promise.all(sending)).flat();
}

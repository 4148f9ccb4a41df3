// A broadcast: the fanout of a send to an audience, streamed. Its walk reads the matching
// installations in provider identifier order, a batch at a time; each batch's deliveries, its
// deliver jobs and the checkpoint (the last identifier walked) commit together, so pushes start
// with the first batch, nothing is held in memory but one batch, and a walk cut short (kill -9, a
// lost connection) resumes at its checkpoint, re-walking at most the batch that did not commit
// (which the (notification, installation) uniqueness keeps from being recorded twice).
// A walk job runs a slice of the walk and queues the next one: the campaign lane's workers go
// round the applications' broadcasts instead of one walk holding a worker for minutes.
// A send at each device's local time (`options.local_time`) is walked in waves: its first walk job
// plans them (one per instant its installations are due, from their distinct time zones) and
// queues one walk job per wave, deferred to its instant; each wave is walked like a whole walk,
// with its own checkpoint, over the installations of its time zones. Nothing of a waiting wave is
// in memory: it is a row and a deferred job.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EntityManager } from '@mikro-orm/postgresql';
import { fromKysely } from 'pg-boss';
import { newId } from '../db/ids.ts';
import { countAudience } from '../db/sql/audiences.ts';
import {
  advanceWalk,
  advanceWave,
  audienceTimezones,
  insertWaves,
  lockWalkStep,
  readWave,
  setAudienceSize,
  countWalk,
  walkAudience,
  walkProgress,
  wavesPlanned,
  type WalkStep,
} from '../db/sql/broadcasts.ts';
import { insertDeliveries } from '../db/sql/deliveries.ts';
import { unfinishedCancels } from '../db/sql/notifications.ts';
import { deliverBatches, fanOut } from '../domain/delivery-rules.ts';
import { localTimeRule, planWaves, type LocalTimeRule } from '../domain/local-time.ts';
import type { FanoutJob } from '../domain/notifications.ts';
import { deliveriesEnded } from '../observability/metrics.ts';
import type { DeliverJob, JobContext } from './job-context.ts';
import { completeIfDone, endCancelled } from './jobs.ts';
import { noWait } from './lane-gate.ts';
import { placement, queues } from './queue.ts';
import { jobPriority } from '../domain/fanout.ts';
import { throttledWalkWindow, throttlePerMinute, walkDeferralMs } from '../domain/throttle.ts';

/** A walk job: a broadcast's walk, or (`wave`: its due instant, ISO) one wave of a local-time broadcast's. */
export type WalkJob = FanoutJob & { wave?: string };

/**
 * How a walk goes: installations per batch (one transaction each), how long one job walks before
 * it queues the next slice, and how many of the broadcast's deliveries may wait to be pushed before
 * the walk waits for them (a throttled broadcast's: fewer, domain/throttle.ts throttledWalkWindow).
 */
export type WalkSettings = { batch: number; sliceMs: number; window: number };

/**
 * A batch a transaction: its deliveries are a few deliver jobs, and a cancel waits on its row lock
 * for at most one batch. The window: pushes of a few seconds at the providers' pace, enough to keep
 * every campaign deliver worker busy; beyond it the walk waits, so a broadcast's pending deliveries
 * (what a cancel must skip in one statement, what a deliver queue holds) stay bounded whatever its
 * audience, and the walk never runs far ahead of what the providers take.
 */
export const walkSettings: WalkSettings = { batch: 1_000, sliceMs: 15_000, window: 20_000 };

/** How often a walk held by its window looks at its progress again. */
const windowPollMs = 50;

export async function runBroadcast(
  em: EntityManager,
  context: JobContext,
  job: WalkJob,
  turn: () => Promise<void> = noWait,
  settings: WalkSettings = walkSettings,
): Promise<void> {
  const started = performance.now();
  const db = em.fork();
  const id = job.notificationId;
  const wave = job.wave === undefined ? null : new Date(job.wave);
  const walkName = wave ? `broadcast wave ${wave.toISOString()}` : 'broadcast walk';
  let walkedHere = 0;
  let ended = false;
  let counted = false;
  for (;;) {
    const room = await roomToWalk(db, id, settings, started);
    if (room === 'stopped') break;
    if (room === 'slice over') {
      await queueNextSlice(context, job);
      context.logger.info({ notificationId: id, walked: walkedHere }, 'broadcast walk slice ended; next slice queued');
      return;
    }
    if (typeof room === 'object') {
      // A throttled broadcast's window is full for a while: its next slice comes back when the
      // pace should have made room, and no worker waits for it meanwhile.
      await queueNextSlice(context, job, room.deferMs);
      context.logger.debug({ notificationId: id, walked: walkedHere, deferMs: room.deferMs }, 'throttled broadcast walk waits for its pace; next slice deferred');
      return;
    }
    await turn();
    const batch = await em.fork().transactional((tx) => walkBatch(tx, context, job, { wave, walkName, firstOfJob: walkedHere === 0 }, settings));
    if (!batch) break;
    if ('planned' in batch) {
      // No wave (nothing matched): the walk has ended, and nobody else would end the notification.
      if (batch.planned === 0) await completeIfDone(db, context, job.applicationId, [id]);
      return;
    }
    if (batch.uncounted && !counted) {
      // target_users: the count /audiences/count gives, taken as the walk starts (once: a walk
      // resumed finds it written), with what the walk has to read. Once its first batch has
      // committed, so that the first pushes do not wait for a count of the whole audience.
      counted = true;
      const audience = batch.uncounted;
      const size = await em.fork().transactional(async (tx) => {
        const { users } = await countAudience(tx, job.applicationId, audience);
        const installations = batch.walkCounted ? null : await countWalk(tx, job.applicationId, audience);
        await setAudienceSize(tx, id, { users, installations });
        return { users, installations };
      });
      context.logger.info({ notificationId: id, targetUsers: size.users, installations: size.installations }, 'broadcast audience counted');
    }
    walkedHere += batch.walked;
    for (const [platform, counts] of batch.skips) deliveriesEnded(platform, counts);
    if (batch.ended) {
      ended = batch.walkEnded;
      context.logger.info({ notificationId: id, walked: batch.total, walkedByThisJob: walkedHere }, `${walkName} ended`);
      // Another wave is still to walk: the notification stays processing until the last one ends.
      if (!ended) return;
      break;
    }
  }
  if (ended) {
    // Its pushes may all have been recorded before the walk ended: then nobody else would end it.
    await completeIfDone(db, context, job.applicationId, [id]);
    return;
  }
  // Stopped: cancelled (perhaps by a cancel cut short, which this finishes), or ended meanwhile.
  if ((await unfinishedCancels(db, [id])).length > 0) await endCancelled(db, context, job);
}

/**
 * One batch of a walk, under the notification's row lock: the next installations after the
 * checkpoint, their deliveries and deliver jobs, and the checkpoint moved past them; or, for a
 * local-time broadcast's first job, its waves planned. Null when there is nothing to walk
 * (cancelled, or the wave is gone).
 */
async function walkBatch(
  tx: EntityManager,
  context: JobContext,
  job: WalkJob,
  { wave, walkName, firstOfJob }: { wave: Date | null; walkName: string; firstOfJob: boolean },
  settings: WalkSettings,
) {
  const id = job.notificationId;
  const locked = await lockWalkStep(tx, id);
  if (!locked?.audience) return null;
  const rule = localTimeRule(locked.options);
  // A local-time broadcast's first walk job plans its waves (once: a re-run finds them) and ends.
  if (rule && !wave) return (await wavesPlanned(tx, id)) ? null : { planned: await queueWaves(tx, context, job, locked, rule) };
  const waveStep = wave ? await readWave(tx, id, wave) : undefined;
  if (wave && !waveStep) return null;
  const step = waveStep ? { ...locked, walkAfter: waveStep.walkAfter, walked: waveStep.walked } : locked;
  if (firstOfJob) {
    if (step.walked === 0 && step.walkAfter === null) context.logger.info({ notificationId: id }, `${walkName} started`);
    else context.logger.info({ notificationId: id, walked: step.walked }, `${walkName} resumed at its checkpoint`);
  }
  const localized = Object.keys(step.localizations ?? {}).length > 0;
  const walked = await walkAudience(tx, { ...step, withLocale: localized, wave: waveStep }, settings.batch);
  const notification = { ...step, id };
  // A wave's deliveries are due at its instant (null: at the send's start, where it began).
  const start = (step.scheduledFor ?? step.createdAt).getTime();
  const dueAt = wave && wave.getTime() !== start ? wave : null;
  const fanout = fanOut(notification, walked.candidates, () => dueAt);
  await insertDeliveries(tx, fanout.deliveries, { walk: true });
  const deliverJobs = deliverBatches([{ notification, deliveries: fanout.deliveries }], context.batchSize).map(({ applicationId, platform, deliveryIds }) => ({
    data: { applicationId, platform, deliveryIds, campaign: true } satisfies DeliverJob,
    ...placement(applicationId, jobPriority(step.options)),
  }));
  if (deliverJobs.length > 0) await context.boss.insert(queues.campaignDeliver, deliverJobs, { db: fromKysely(tx.getKysely()) });
  const advance = { last: walked.last, walked: walked.candidates.length, ended: walked.ended };
  // A wave's end ends the walk only when it is the last wave to end.
  const walkEnded = wave ? await advanceWave(tx, id, wave, advance) : (await advanceWalk(tx, id, advance), walked.ended);
  return {
    walked: walked.candidates.length,
    ended: walked.ended,
    walkEnded,
    skips: fanout.skips,
    total: step.walked + walked.candidates.length,
    uncounted: step.targetUsers === 0 ? step.audience : null,
    // A local-time broadcast's waves counted what it has to walk when they were planned.
    walkCounted: Boolean(rule),
  };
}

/**
 * Plans a local-time broadcast's waves in its first walk job's transaction (the notification's row
 * held): one aggregate finds the distinct `device.timezone` values of the installations it reaches
 * now, each maps to the instant it is due (planWaves: invalid or none, the fallback zone's), and
 * each instant becomes a wave, stored with its walk job, queued deferred to it. Installations whose
 * time zone takes a value none had then match no wave: who is reached is decided as the broadcast
 * starts. No wave (nothing matched) ends the walk. Answers how many waves were planned.
 */
async function queueWaves(tx: EntityManager, context: JobContext, job: FanoutJob, step: WalkStep, rule: LocalTimeRule): Promise<number> {
  const id = job.notificationId;
  const values = await audienceTimezones(tx, step.applicationId, step.audience);
  const start = step.scheduledFor ?? step.createdAt;
  const byZone = new Map(values.map((value) => [value.timezone, value.installations]));
  const waves = planWaves(values.map((value) => value.timezone), rule, start).map((wave) => ({
    ...wave,
    jobId: newId(),
    installations: [...wave.timezones, ...(wave.coversNull ? [null] : [])].reduce((sum, zone) => sum + (byZone.get(zone) ?? 0), 0),
  }));
  if (waves.length === 0) {
    await advanceWalk(tx, id, { last: null, walked: 0, ended: true });
    context.logger.info({ notificationId: id }, 'broadcast at local time: no installation matched, walk ended');
    return 0;
  }
  await insertWaves(tx, id, step.applicationId, waves);
  const now = Date.now();
  const walks = waves.map((wave) => ({
    id: wave.jobId,
    data: { notificationId: id, applicationId: job.applicationId, wave: wave.dueAt.toISOString() } satisfies WalkJob,
    ...placement(job.applicationId, 0),
    ...(wave.dueAt.getTime() > now ? { startAfter: wave.dueAt } : {}),
  }));
  await context.boss.insert(queues.broadcast, walks, { db: fromKysely(tx.getKysely()) });
  context.logger.info(
    {
      notificationId: id,
      waves: waves.map((wave) => ({
        dueAt: wave.dueAt.toISOString(),
        timezones: wave.timezones.length + (wave.coversNull ? 1 : 0),
        installations: wave.installations,
      })),
    },
    'broadcast at local time: waves planned',
  );
  return waves.length;
}

/**
 * Whether the walk may write its next batch: not while the broadcast's pending deliveries fill its
 * window (it waits for the pushes), 'stopped' once the notification is not processing any more, and
 * 'slice over' when this job has walked its time. A throttled broadcast's window is a couple of
 * minutes of its pace (throttle.ts throttledWalkWindow), and when it is full the walk does not wait
 * in its worker: the answer is how long until the pace should have made room (`deferMs`).
 */
async function roomToWalk(
  db: EntityManager,
  id: string,
  settings: WalkSettings,
  started: number,
): Promise<'walk' | 'stopped' | 'slice over' | { deferMs: number }> {
  for (;;) {
    const progress = await walkProgress(db, id);
    if (!progress || progress.status !== 'processing') return 'stopped';
    if (performance.now() - started > settings.sliceMs) return 'slice over';
    const perMinute = throttlePerMinute({ throttle_per_minute: progress.throttlePerMinute });
    const window = perMinute === null ? settings.window : throttledWalkWindow(perMinute, settings.batch, settings.window);
    if (progress.pending < window) return 'walk';
    if (perMinute !== null) return { deferMs: walkDeferralMs(progress.pending, window, perMinute) };
    await sleep(windowPollMs);
  }
}

/**
 * The walk's next slice, queued once this one has committed its last batch (due after `deferMs`
 * when given). Should this process die before its job is marked done, pg-boss runs the job again
 * and two slices walk: they take the notification's row in turn for each batch and read the
 * checkpoint under it, so neither walks what the other did.
 */
async function queueNextSlice(context: JobContext, job: WalkJob, deferMs = 0): Promise<void> {
  await context.boss.send(queues.broadcast, job satisfies WalkJob, { ...placement(job.applicationId, 0), ...(deferMs > 0 ? { startAfter: deferMs / 1000 } : {}) });
}

// pg-boss lives in the same database as the entities, so a notification and its fanout job
// commit in one transaction. Queues notify on insert (LISTEN/NOTIFY), so an idle worker wakes at
// once instead of at its next poll.
import { fromKysely, PgBoss, type Queue } from 'pg-boss';
import { boundedConnections, defaultBounds, type DatabaseBounds } from '../db/bounds.ts';
import type { OutageWatch } from '../db/outage.ts';
import { PreparingPoolClient } from '../db/preparing-client.ts';
import type { FanoutQueue } from '../domain/notifications.ts';
import type { TagSummaryQueue } from '../domain/tag-summaries.ts';
import type { EnqueueWebhookJobs } from '../domain/webhook-outbox.ts';
import type { Logger } from '../logging/logger.ts';
import type { QueueDepth } from '../observability/metrics.ts';

export type TagSummaryJob = { applicationId: string };

export const queues = {
  fanout: 'fanout',
  /** Fanouts of scheduled sends: deferred to their send_at, taken in batches (workers.ts). */
  scheduledFanout: 'fanout_scheduled',
  deliver: 'deliver',
  /** The campaign lane (worker/broadcasts.ts): broadcasts' walks, a slice of a walk a job. */
  broadcast: 'broadcast',
  /** The campaign lane's pushes: a broadcast's deliver jobs and their retries, apart from transactional sends'. */
  campaignDeliver: 'deliver_campaign',
  fanoutFailed: 'fanout_failed',
  deliverFailed: 'deliver_failed',
  webhook: 'webhook',
  webhookFailed: 'webhook_failed',
  /** Tag summaries to compute (worker/tag-summaries.ts): at most one waiting and one running per application. */
  tagSummary: 'tag_summary',
} as const;

/**
 * See PreparingClient: a fetch's generic plan is as good as a custom one (it probes the queue's
 * index by name and state either way) and costs no planning per call. Added to the URL's own
 * startup options, if any: pg reads the URL's over its config's.
 */
function withGenericPlans(connectionString: string): string {
  const url = new URL(connectionString);
  url.searchParams.set('options', [url.searchParams.get('options'), '-c plan_cache_mode=force_generic_plan'].filter(Boolean).join(' '));
  return url.toString();
}

export async function startBoss(
  connectionString: string,
  logger: Logger,
  options: {
    worker: boolean;
    schema: string;
    outage?: OutageWatch;
    /**
     * Its pool's (db/bounds.ts): the workers' where it fetches jobs and maintains its tables; the
     * API's in a process that only serves the API, where a send may look its queue up on it.
     */
    bounds?: DatabaseBounds;
  },
): Promise<PgBoss> {
  // pg-boss passes what its options do not name on to its pg pool: `Client`, and the bounds.
  const poolOptions = { Client: PreparingPoolClient, ...boundedConnections(options.bounds ?? defaultBounds) };
  const boss = new PgBoss({
    ...poolOptions,
    connectionString: withGenericPlans(connectionString),
    schema: options.schema,
    max: options.worker ? 10 : 3,
    // Only workers supervise (expire, retry, archive) and listen; an API process just enqueues.
    supervise: options.worker,
    schedule: options.worker,
    useListenNotify: options.worker,
    // A killed worker's job is retried once its heartbeat is 10 s stale; look every 2 s.
    superviseIntervalSeconds: 2,
    monitorIntervalSeconds: 2,
    // Finished jobs past their queue's deleteAfterSeconds (maintenance.ts) go in one DELETE per
    // pass: hourly, that is an hour of jobs, not a day's at once.
    maintenanceIntervalSeconds: 3600,
  });
  // An unhandled 'error' event would exit the process. During an outage every poll fails: one line.
  boss.on('error', (error) => {
    if (!options.outage?.report(error)) logger.error({ err: error }, 'job queue error');
  });
  await boss.start();
  await declareQueues(boss);
  return boss;
}

/** Every queue with its retry, expiry and dead-letter options, created or brought up to date. */
async function declareQueues(boss: PgBoss): Promise<void> {
  // createQueue leaves an existing queue as it was; updateQueue brings it to these options.
  const ensureQueue = async (name: string, options: Omit<Queue, 'name' | 'policy'>) => {
    await boss.createQueue(name, options);
    await boss.updateQueue(name, options);
  };
  for (const deadLetter of [queues.fanoutFailed, queues.deliverFailed, queues.webhookFailed]) {
    await ensureQueue(deadLetter, { retryLimit: 3, retryDelay: 5 });
  }
  const supervised = { heartbeatSeconds: 10, notify: true };
  const fanoutQueue = {
    ...supervised,
    retryDelay: 1,
    retryBackoff: true,
    retryDelayMax: 30,
    retryLimit: 5,
    deadLetter: queues.fanoutFailed,
    expireInSeconds: 300,
  };
  await ensureQueue(queues.fanout, fanoutQueue);
  await ensureQueue(queues.scheduledFanout, fanoutQueue);
  // A walk job runs a slice of a broadcast (seconds) and queues the next; a failed one resumes at
  // the walk's checkpoint. Out of retries, the notification fails like a fanout that did.
  await ensureQueue(queues.broadcast, fanoutQueue);
  // Pushes have their own retry schedule (jobs.ts): a deliver job's retry only covers a crash or an
  // outage that cut it short, so it comes a second later and never backs off (backing off left
  // what an outage interrupted waiting up to 16 s after the database was back). Twenty failures
  // in a row are a bug, for the dead letters.
  const deliverQueue = {
    ...supervised,
    retryDelay: 1,
    retryBackoff: false,
    retryLimit: 20,
    deadLetter: queues.deliverFailed,
    expireInSeconds: 120,
  };
  await ensureQueue(queues.deliver, deliverQueue);
  await ensureQueue(queues.campaignDeliver, deliverQueue);
  // Webhook requests have their own schedule too (worker/webhooks.ts): a job's retry covers a crash
  // or an outage. A job sends up to 100 requests, ten at a time, each within its timeout (at most
  // 60 s): it may run for minutes before pg-boss counts it as lost.
  await ensureQueue(queues.webhook, {
    ...supervised,
    retryDelay: 1,
    retryBackoff: false,
    retryLimit: 20,
    deadLetter: queues.webhookFailed,
    expireInSeconds: 900,
  });
  // Created by every process: an API process asks for a summary (tagSummaryQueue) even where no
  // worker has run yet. `stately` with the application as singleton key: a request while one waits
  // is the same request. A failed computation is not retried: the sweep finds it due again.
  await boss.createQueue(queues.tagSummary, { policy: 'stately', retryLimit: 0, expireInSeconds: 600 });
}

/**
 * Where a job of a notification waits: in its priority lane (fanout.ts jobPriority), and in its
 * application's pg-boss group, by which the workers keep one application's burst from holding up
 * another's sends (workers.ts fairShare). Every fanout and deliver job, retries included, is placed
 * with it; pg-boss's own retries keep the job's row, so its group too.
 */
export function placement(applicationId: string, priority: number): { priority: number; group: { id: string } } {
  return { priority, group: { id: applicationId } };
}

/**
 * Where a webhook job (and its retries) waits: in its endpoint's pg-boss group, so that the workers'
 * fair share (workers.ts fairShare) keeps one slow endpoint from holding every webhook worker.
 */
export function webhookPlacement(endpointId: string): { group: { id: string } } {
  return { group: { id: endpointId } };
}

/** Queues webhook jobs in the caller's transaction (the outbox's: domain/webhook-outbox.ts). */
export function webhookEnqueuer(boss: PgBoss): EnqueueWebhookJobs {
  return async (tx, jobs) => {
    await boss.insert(queues.webhook, jobs.map((data) => ({ data, ...webhookPlacement(data.endpointId) })), { db: fromKysely(tx.getKysely()) });
  };
}

/**
 * The job's id is the notification's: a notification has one fanout, whatever retries a send. A
 * scheduled send's job is deferred to its time (pg-boss `startAfter`), in the same transaction;
 * a cancel before then marks it cancelled, so that it does not wait in the queue (and in its
 * `deferred` count) until a time that may be years away; so are the deferred waves of a broadcast
 * at local time (worker/broadcasts.ts).
 */
export function fanoutQueue(boss: PgBoss): FanoutQueue {
  return {
    async enqueue(tx, job, { priority, startAfter }) {
      await boss.send(startAfter ? queues.scheduledFanout : queues.fanout, job, {
        id: job.notificationId,
        ...placement(job.applicationId, priority),
        ...(startAfter ? { startAfter } : {}),
        db: tx,
      });
    },
    async dropScheduled(tx, notificationId) {
      await boss.cancel(queues.scheduledFanout, notificationId, { db: fromKysely(tx) });
    },
    async dropDeferredWalks(tx, jobIds) {
      if (jobIds.length > 0) await boss.cancel(queues.broadcast, jobIds, { db: fromKysely(tx) });
    },
  };
}

/** Asks a worker to compute an application's tag summary (domain/tag-summaries.ts); a request already waiting absorbs it. */
export function tagSummaryQueue(boss: PgBoss): TagSummaryQueue {
  return {
    async request(applicationId) {
      await boss.send(queues.tagSummary, { applicationId } satisfies TagSummaryJob, { singletonKey: applicationId });
    },
  };
}

/**
 * Each queue's jobs by state, as pg-boss keeps them in its queue table (its monitor recounts them
 * every couple of seconds): one small read, never a count over the jobs.
 */
export async function queueDepths(boss: PgBoss): Promise<QueueDepth[]> {
  const found = await boss.getQueues(Object.values(queues));
  return found.map((queue) => ({ queue: queue.name, ready: queue.readyCount, deferred: queue.deferredCount, active: queue.activeCount }));
}

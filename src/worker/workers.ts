// The worker role: consumes fanout, deliver and webhook jobs (and their dead letters) until stopped.
// What it registers is one table (registrations); each mechanism around the handlers lives in its
// own module: leases (leases.ts), lanes (lane-gate.ts), the wrapper every job runs in (job-runs.ts),
// the wake-ups pg-boss does not make (wakeups.ts), fairness (fairShare below), and the pause
// during a database outage (pause and resume below).
import type { JobWithMetadata, PgBoss, WorkOptions } from 'pg-boss';
import type { DatabaseBounds } from '../db/bounds.ts';
import type { Orm } from '../db/orm.ts';
import type { OutageWatch } from '../db/outage.ts';
import { LaneGate } from './lane-gate.ts';
import { startLeases } from './leases.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderClients } from './clients.ts';
import { trackJobRuns, type JobRuns } from './job-runs.ts';
import { failFanout, runFanouts } from './fanout-job.ts';
import type { DeliverJob, JobContext } from './job-context.ts';
import { failDeliver, runDeliver } from './jobs.ts';
import { runBroadcast, type WalkJob } from './broadcasts.ts';
import { highPriority } from '../domain/fanout.ts';
import type { FanoutJob } from '../domain/notifications.ts';
import { queues } from './queue.ts';
import type { WebhookJob, WebhookOutbox } from '../domain/webhook-outbox.ts';
import { fetchAgainAtOnce, wakeIdleWorkerEvery } from './wakeups.ts';
import { failWebhook, runWebhook, type WebhookContext } from './webhooks.ts';

export type WorkerOptions = {
  /** The workers' units of work, on a pool with the workers' bounds. */
  orm: Orm;
  /** The workers' database bounds (db/bounds.ts), for the job leases (default: defaultBounds). */
  bounds?: DatabaseBounds;
  boss: PgBoss;
  clients: ProviderClients;
  logger: Logger;
  /** Deliver jobs this process runs at once for one application (one more for another: fairShare). */
  concurrency: number;
  batchSize: number;
  sendDeadlineSeconds: number;
  /** pg-boss's schema (HERALD_QUEUE_SCHEMA): whose job leases are this deployment's. */
  queueSchema: string;
  /** Pushes per provider round trip, recorded before the next round. */
  chunkSize: number;
  /** Errors that mean "the database is down" go here instead of one log line per failed job. */
  outage?: OutageWatch;
  webhooks: WebhookWorkerOptions;
  /**
   * How often an idle worker looks for jobs no NOTIFY announced: retries and deferred jobs coming
   * due (HERALD_QUEUE_POLL_SECONDS; at least pg-boss's 0.5).
   */
  pollSeconds: number;
};

export type WebhookWorkerOptions = Omit<WebhookContext, 'boss' | 'logger'> & {
  /** Where the jobs' own webhooks go (`delivery.failed`...). */
  outbox: WebhookOutbox;
  /** Webhook jobs this process runs at once for one endpoint (one more for the others: fairShare). */
  concurrency: number;
};

/** The registered workers: paused during a database outage (no claiming), resumed after it. */
export type Workers = {
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Fanout, deliver and webhook jobs whose handler is still running (at shutdown: handed back if > 0). */
  readonly inFlight: number;
  /** After the queue has stopped: closes the leases. */
  stop(): Promise<void>;
};

/**
 * Fairness between applications: the workers of a queue, `concurrency` + 1 of them, of which one
 * application's jobs may hold at most `concurrency` in this process. Every fanout and deliver job has
 * its application as its pg-boss group (queue.ts placement); pg-boss counts this process's running
 * jobs per group and leaves a group at that limit out of its fetches (`localGroupConcurrency`), so
 * the one worker more is always free for another application's job, which it takes at once, however
 * long the backlog ahead of it. An application alone still has `concurrency` workers, as before: a
 * cap below the worker count would idle workers whenever one application is alone. Per process, not
 * across processes (pg-boss's `groupConcurrency`): a limit for all the processes together would hold
 * one application to one process's share however many run. docs/DESIGN.md (fairness) has the limits.
 */
export function fairShare(concurrency: number): { localConcurrency: number; localGroupConcurrency: number } {
  return { localConcurrency: concurrency + 1, localGroupConcurrency: concurrency };
}

/**
 * Fanout jobs a batch worker (the fanout queue's backlog worker, the scheduled fanouts' workers)
 * fetches and runs at once (fanout-job.ts runFanouts, in transactions of up to a thousand users): a
 * transaction costs a handful of statements however many notifications it holds, so a thousand
 * small notifications start in four batches instead of a thousand transactions, fetches and leases.
 */
const fanoutBatch = 250;

/** How often an idle fanout worker looks for scheduled fanouts that have become due. */
const dueJobWakeMs = 250;

/** One pg-boss worker: the queue it fetches from, and how it registers (its fetch options and handler). */
type Registration = { queue: string; work(boss: PgBoss): Promise<string> };

/** A worker of `queue`; its jobs come with when each was due and started (the job wait metric). */
function worker<T>(queue: string, options: WorkOptions, handler: (jobs: JobWithMetadata<T>[]) => Promise<void>): Registration {
  const withMetadata: WorkOptions & { includeMetadata: true } = { ...options, includeMetadata: true };
  return { queue, work: (boss) => boss.work<T, void, typeof withMetadata>(queue, withMetadata, handler) };
}

/**
 * Every worker this process registers, in the order it registers them: queue, fetch options,
 * handler. Fanout, deliver and webhook jobs run in `runs` (lease, lane, log: job-runs.ts); the dead
 * letters' handlers end what failed for good.
 */
function registrations(options: WorkerOptions, context: JobContext, webhookContext: WebhookContext, runs: JobRuns): Registration[] {
  const { orm, boss, logger } = options;
  // The polling interval is only a backstop: NOTIFY wakes the workers when a job is inserted. The
  // faster poll is pg-boss's while NOTIFY is unavailable.
  const polling = { pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: options.pollSeconds };
  const fanout = runs.handler<FanoutJob>(queues.fanout, (jobs) => runFanouts(orm.em, context, jobs));
  const fanoutBatches = (queue: string) =>
    runs.handler<FanoutJob>(queue, (jobs, turn) => {
      // A full batch: more may be waiting, and another worker need not wait for this one to end.
      if (jobs.length === fanoutBatch) fetchAgainAtOnce(boss, queue);
      return runFanouts(orm.em, context, jobs, turn);
    });
  const deliver = runs.handler<DeliverJob>(queues.deliver, ([data]) => runDeliver(orm.em, context, data));
  const walk = runs.handler<WalkJob>(queues.broadcast, ([data], turn) => runBroadcast(orm.em, context, data, turn));
  const campaignDeliver = runs.handler<DeliverJob>(queues.campaignDeliver, ([data], turn) => runDeliver(orm.em, context, data, turn));
  const webhook = runs.handler<WebhookJob>(queues.webhook, ([data]) => runWebhook(orm.em, webhookContext, data));
  const failedForGood =
    <T>(message: string, said: (data: T) => object, end: (data: T) => Promise<void>) =>
    async ([job]: JobWithMetadata<T>[]) => {
      logger.error(said(job.data), message);
      await end(job.data);
    };
  return [
    worker(queues.fanout, { ...polling, ...fairShare(2) }, fanout),
    // A burst of sends (a thousand one-user notifications at once): the workers above take one job
    // a fetch, a lease and a transaction each; this one takes what waits in batches, as the
    // scheduled fanouts are taken. It sets no group limit, so pg-boss does not count its jobs
    // against their application: the fair workers keep their one worker more for the others.
    worker(queues.fanout, { ...polling, batchSize: fanoutBatch }, fanoutBatches(queues.fanout)),
    // Scheduled fanouts come due together (a campaign at 9:00): two workers take them in batches,
    // one transaction a batch, in the order they are due. Not per application: pg-boss's group
    // limits count jobs, and a batch larger than the limit would be handed back but for its share.
    worker(queues.scheduledFanout, { ...polling, localConcurrency: 2, batchSize: fanoutBatch }, fanoutBatches(queues.scheduledFanout)),
    worker(queues.deliver, { ...polling, ...fairShare(options.concurrency) }, deliver),
    // The campaign lane (worker/broadcasts.ts): broadcasts' walks and pushes in queues of their
    // own, so that a broadcast's backlog never stands before a send's jobs, with their own workers
    // (which wait at their turns while a send's job runs here: lane-gate.ts). Fair per application
    // as the others: one walk of an application at a time per process, the other worker for
    // another application's; its pushes at most `concurrency` jobs, one worker more for another's.
    worker(queues.broadcast, { ...polling, ...fairShare(1) }, walk),
    worker(queues.campaignDeliver, { ...polling, ...fairShare(options.concurrency) }, campaignDeliver),
    // The high-priority lane's own worker per queue: priority orders what waits, but a high-priority
    // job would still wait for a busy worker to finish its batch (up to seconds under a fanout).
    // This one takes only lane jobs, so one starts as soon as it is queued.
    worker(queues.fanout, { ...polling, minPriority: highPriority }, fanout),
    worker(queues.deliver, { ...polling, minPriority: highPriority }, deliver),
    worker(
      queues.fanoutFailed,
      polling,
      failedForGood<FanoutJob>('fanout failed for good', (job) => ({ notificationId: job.notificationId }), (job) => failFanout(orm.em, context, job)),
    ),
    worker(
      queues.deliverFailed,
      polling,
      failedForGood<DeliverJob>(
        'delivery batch failed for good',
        (job) => ({ applicationId: job.applicationId, deliveries: job.deliveryIds.length }),
        (job) => failDeliver(orm.em, context, job),
      ),
    ),
    // Webhook requests have workers of their own: a slow endpoint never holds a deliver worker.
    worker(queues.webhook, { ...polling, ...fairShare(options.webhooks.concurrency) }, webhook),
    worker(
      queues.webhookFailed,
      polling,
      failedForGood<WebhookJob>(
        'webhook job failed for good',
        (job) => ({ endpointId: job.endpointId, deliveries: job.deliveryIds.length }),
        (job) => failWebhook(orm.em, job),
      ),
    ),
  ];
}

export async function startWorkers(options: WorkerOptions): Promise<Workers> {
  const { orm, boss, logger } = options;
  const context: JobContext = {
    boss,
    webhooks: options.webhooks.outbox,
    clients: options.clients,
    logger,
    batchSize: options.batchSize,
    sendDeadlineMs: options.sendDeadlineSeconds * 1000,
    recordEvery: options.chunkSize,
    waitingRetries: new Set(),
  };
  const url = orm.config.get('clientUrl');
  if (!url) throw new Error('the ORM has no clientUrl: the job leases need their own connections');
  const stopWaking = wakeIdleWorkerEvery(boss, queues.scheduledFanout, dueJobWakeMs);
  // Which job this process runs is leased (leases.ts): if the process dies, the others hand its
  // jobs back within seconds instead of after pg-boss's heartbeat.
  const leases = await startLeases({ url, boss, queueSchema: options.queueSchema, logger, bounds: options.bounds });
  // Fanout and deliver jobs run in lanes (lane-gate.ts): normal ones wait at their start while a
  // high-priority one runs in this process. Webhook jobs are outside them.
  const campaignQueues = new Set<string>([queues.broadcast, queues.campaignDeliver]);
  const laneQueues = new Set<string>([queues.fanout, queues.scheduledFanout, queues.deliver, ...campaignQueues]);
  const runs = trackJobRuns({ boss, leases, gate: new LaneGate(), laneQueues, campaignQueues, outage: options.outage, logger });
  const workers = registrations(options, context, { ...options.webhooks, boss, logger }, runs);
  const register = async () => {
    for (const registration of workers) await registration.work(boss);
  };
  await register();
  logger.info({ concurrency: options.concurrency, batchSize: options.batchSize }, 'workers started');
  let paused = false;
  return {
    async pause() {
      if (paused) return;
      paused = true;
      // Jobs in flight finish or fail on their own; their heartbeat lapses and another attempt follows.
      const queuesWorked = new Set(workers.map((registration) => registration.queue));
      await Promise.all([...queuesWorked].map((queue) => boss.offWork(queue, { wait: false })));
    },
    async resume() {
      if (!paused) return;
      paused = false;
      await runs.handBackOrphans();
      await register();
    },
    get inFlight() {
      return runs.running.size;
    },
    stop: () => {
      stopWaking();
      return leases.stop();
    },
  };
}

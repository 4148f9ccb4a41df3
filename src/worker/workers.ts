// The worker role: consumes fanout, deliver and webhook jobs (and their dead letters) until stopped.
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Orm } from '../db/orm.ts';
import type { OutageWatch } from '../db/outage.ts';
import { LaneGate, noWait } from './lane-gate.ts';
import { startLeases } from './leases.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderClients } from './clients.ts';
import { failDeliver, failFanout, runDeliver, runFanouts, type DeliverJob, type JobContext } from './jobs.ts';
import { highPriority } from '../domain/fanout.ts';
import type { FanoutJob } from '../domain/notifications.ts';
import { queues } from './queue.ts';
import type { WebhookJob, WebhookOutbox } from '../domain/webhook-outbox.ts';
import { failWebhook, runWebhook, type WebhookContext } from './webhooks.ts';
import { jobStarted } from '../observability/metrics.ts';

export type WorkerOptions = {
  orm: Orm;
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

const workerQueues = [queues.fanout, queues.scheduledFanout, queues.deliver, queues.fanoutFailed, queues.deliverFailed, queues.webhook, queues.webhookFailed];

/**
 * Fairness between applications: the workers of a queue, `concurrency` + 1 of them, of which one
 * application's jobs may hold at most `concurrency` in this process. Every fanout and deliver job has
 * its application as its pg-boss group (queue.ts placement); pg-boss counts this process's running
 * jobs per group and leaves a group at that limit out of its fetches (`localGroupConcurrency`), so
 * the one worker more is always free for another application's job, which it takes at once, however
 * long the backlog ahead of it. An application alone still has `concurrency` workers, as before: a
 * cap below the worker count would idle workers whenever one application is alone. Per process, not
 * across processes (pg-boss's `groupConcurrency`): a limit for all the processes together would hold
 * one application to one process's share however many run. DESIGN.md §3 has the limits.
 */
export function fairShare(concurrency: number): { localConcurrency: number; localGroupConcurrency: number } {
  return { localConcurrency: concurrency + 1, localGroupConcurrency: concurrency };
}

/**
 * Fanout jobs a batch worker (the fanout queue's backlog worker, the scheduled fanouts' workers)
 * fetches and runs at once (jobs.ts runFanouts, in transactions of up to a thousand users): a
 * transaction costs a handful of statements however many notifications it holds, so a thousand
 * small notifications start in four batches instead of a thousand transactions, fetches and leases.
 */
const fanoutBatch = 250;

/** How often an idle fanout worker looks for scheduled fanouts that have become due. */
const dueJobWakeMs = 250;

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
  };
  // The polling interval is only a backstop: NOTIFY wakes the workers when a job is inserted.
  const polling = { pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 2 };
  // With when each job was due and started (the job wait metric).
  const withTimes = { ...polling, includeMetadata: true } as const;

  // After a job, pg-boss waits out the polling interval before its next fetch unless a NOTIFY came
  // meanwhile; a burst of jobs inserted at once notifies only once, so each worker would idle up to
  // 2 s between them. A worker that has just run a job fetches again at once instead (notifying a
  // worker that is running a job only skips its next wait); an empty fetch ends the streak. Idle
  // workers fetch then too: one whose job pg-boss put back (fetched by two workers at once, it was
  // one too many for its application: fairShare) sleeps out the interval, though another
  // application's job may be waiting for it; a job ending is when that changes.
  const fetchAgainAtOnce = (queue: string) => {
    for (const worker of boss.getWipData()) {
      if (worker.name === queue) boss.notifyWorker(worker.id);
    }
  };

  // Scheduled sends: a deferred job sends no NOTIFY when it becomes due, and pg-boss polls at most
  // every 0.5 s (every 2 s while NOTIFY is on). So one idle scheduled-fanout worker fetches every
  // 250 ms: a scheduled fanout starts within about that of its send_at, and once a full batch is
  // found, the other worker is woken (fetchAgainAtOnce) for the rest due then.
  const wakeForDueJobs = setInterval(() => {
    const idle = boss
      .getWipData()
      .find((worker) => worker.name === queues.scheduledFanout && (worker.lastJobStartedOn ?? 0) <= (worker.lastJobEndedOn ?? 0));
    if (idle) boss.notifyWorker(idle.id);
  }, dueJobWakeMs);
  wakeForDueJobs.unref();

  // Which job this process runs is leased (leases.ts): if the process dies, the others hand its
  // jobs back within seconds instead of after pg-boss's 10 s heartbeat.
  const leases = await startLeases({ url: orm.config.get('clientUrl')!, boss, queueSchema: options.queueSchema, logger });
  const running = new Set<string>();
  // A job whose lease could not be taken (the database went away at that moment) has no lease to be
  // handed back by: remembered here, job id → queue, until the database answers again.
  const unleased = new Map<string, string>();
  // pg-boss records a handler's error on the job and retries it; the log says it happened (an
  // outage is said once, by the watch).
  const webhookContext: WebhookContext = { ...options.webhooks, boss, logger };
  // Fanout and deliver jobs run in lanes (lane-gate.ts): normal ones wait at their start while a
  // high-priority one runs in this process. Webhook jobs are outside them.
  const gate = new LaneGate();
  const laneQueues = new Set<string>([queues.fanout, queues.scheduledFanout, queues.deliver]);
  const inLane = (jobs: { priority: number }[], run: (turn: () => Promise<void>) => Promise<void>) => {
    if (jobs.some((job) => job.priority >= highPriority)) return gate.high(() => run(noWait));
    // A normal batch of fanouts waits its turn again between its transactions (runFanouts).
    const turn = () => gate.turn();
    return turn().then(() => run(turn));
  };
  // Jobs are fetched one at a time, except fanouts by the backlog worker and scheduled fanouts
  // (fanoutBatch): a batch is leased, run and released together, and fails (and is retried) together.
  const logged = <T extends { notificationId?: string; endpointId?: string; applicationId?: string }>(
    queue: string,
    run: (data: T[], turn: () => Promise<void>) => Promise<void>,
  ) =>
    async (jobs: JobWithMetadata<T>[]) => {
      for (const job of jobs) {
        // Waiting counts from when the job was due: a retry's or a deferred job's delay is by design.
        jobStarted(queue, (job.startedOn.getTime() - job.startAfter.getTime()) / 1000);
        running.add(job.id);
      }
      const ids = jobs.map((job) => job.id);
      try {
        await leases.take(ids, queue).catch((error: unknown) => {
          for (const id of ids) unleased.set(id, queue);
          throw error;
        });
        // A retry of one that could be leased is found by its lease again.
        for (const id of ids) unleased.delete(id);
        const data = jobs.map((job) => job.data);
        await (laneQueues.has(queue) ? inLane(jobs, (turn) => run(data, turn)) : run(data, noWait));
      } catch (error) {
        if (!options.outage?.report(error)) {
          const { notificationId, endpointId, applicationId } = jobs[0].data;
          logger.error({ err: error, queue, jobId: jobs[0].id, jobs: jobs.length, notificationId, endpointId, applicationId }, 'job failed; it will be retried');
        }
        throw error;
      } finally {
        for (const id of ids) running.delete(id);
        await leases.release(ids).catch(() => undefined);
        fetchAgainAtOnce(queue);
      }
    };
  const fanout = logged<FanoutJob>(queues.fanout, (jobs) => runFanouts(orm.em, context, jobs));
  const fanoutBatches = (queue: string) =>
    logged<FanoutJob>(queue, (jobs, turn) => {
      // A full batch: more may be waiting, and another worker need not wait for this one to end.
      if (jobs.length === fanoutBatch) fetchAgainAtOnce(queue);
      return runFanouts(orm.em, context, jobs, turn);
    });
  const fanoutBacklog = fanoutBatches(queues.fanout);
  const scheduledFanout = fanoutBatches(queues.scheduledFanout);
  const deliver = logged<DeliverJob>(queues.deliver, ([data]) => runDeliver(orm.em, context, data));
  const webhook = logged<WebhookJob>(queues.webhook, ([data]) => runWebhook(orm.em, webhookContext, data));
  const register = async () => {
    await boss.work(queues.fanout, { ...withTimes, ...fairShare(2) }, fanout);
    // A burst of sends (a thousand one-user notifications at once): the workers above take one job
    // a fetch, a lease and a transaction each; this one takes what waits in batches, as the
    // scheduled fanouts are taken. It sets no group limit, so pg-boss does not count its jobs
    // against their application: the fair workers keep their one worker more for the others.
    await boss.work(queues.fanout, { ...withTimes, batchSize: fanoutBatch }, fanoutBacklog);
    // Scheduled fanouts come due together (a campaign at 9:00): two workers take them in batches,
    // one transaction a batch, in the order they are due. Not per application: pg-boss's group
    // limits count jobs, and a batch larger than the limit would be handed back but for its share.
    await boss.work(queues.scheduledFanout, { ...withTimes, localConcurrency: 2, batchSize: fanoutBatch }, scheduledFanout);
    await boss.work(queues.deliver, { ...withTimes, ...fairShare(options.concurrency) }, deliver);
    // The high-priority lane's own worker per queue: priority orders what waits, but a high-priority
    // job would still wait for a busy worker to finish its batch (up to seconds under a fanout).
    // This one takes only lane jobs, so one starts as soon as it is queued.
    await boss.work(queues.fanout, { ...withTimes, minPriority: highPriority }, fanout);
    await boss.work(queues.deliver, { ...withTimes, minPriority: highPriority }, deliver);
    await boss.work<FanoutJob>(queues.fanoutFailed, polling, async ([job]) => {
      logger.error({ notificationId: job.data.notificationId }, 'fanout failed for good');
      await failFanout(orm.em, context, job.data);
    });
    await boss.work<DeliverJob>(queues.deliverFailed, polling, async ([job]) => {
      logger.error({ applicationId: job.data.applicationId, deliveries: job.data.deliveryIds.length }, 'delivery batch failed for good');
      await failDeliver(orm.em, context, job.data);
    });
    // Webhook requests have workers of their own: a slow endpoint never holds a deliver worker.
    await boss.work(queues.webhook, { ...withTimes, ...fairShare(options.webhooks.concurrency) }, webhook);
    await boss.work<WebhookJob>(queues.webhookFailed, polling, async ([job]) => {
      logger.error({ endpointId: job.data.endpointId, deliveries: job.data.deliveryIds.length }, 'webhook job failed for good');
      await failWebhook(orm.em, job.data);
    });
  };
  await register();
  logger.info({ concurrency: options.concurrency, batchSize: options.batchSize }, 'workers started');
  let paused = false;
  return {
    async pause() {
      if (paused) return;
      paused = true;
      // Jobs in flight finish or fail on their own; their heartbeat lapses and another attempt follows.
      await Promise.all(workerQueues.map((queue) => boss.offWork(queue, { wait: false })));
    },
    async resume() {
      if (!paused) return;
      paused = false;
      await leases
        .handBackOrphans(running, unleased)
        .then((jobs) => {
          unleased.clear();
          if (jobs > 0) logger.warn({ jobs }, 'jobs cut short by the database outage handed back');
        })
        .catch((error) => logger.error({ err: error }, 'handing back the jobs cut by the outage failed'));
      await register();
    },
    get inFlight() {
      return running.size;
    },
    stop: () => {
      clearInterval(wakeForDueJobs);
      return leases.stop();
    },
  };
}

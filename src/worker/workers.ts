// The worker role: consumes fanout and deliver jobs (and their dead letters) until stopped.
import type { PgBoss } from 'pg-boss';
import type { Orm } from '../db/orm.ts';
import type { OutageWatch } from '../db/outage.ts';
import { startLeases } from './leases.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderClients } from './clients.ts';
import { failDeliver, failFanout, runDeliver, runFanout, type DeliverJob, type JobContext } from './jobs.ts';
import type { FanoutJob } from '../domain/notifications.ts';
import { queues } from './queue.ts';

export type WorkerOptions = {
  orm: Orm;
  boss: PgBoss;
  clients: ProviderClients;
  logger: Logger;
  /** Deliver jobs run at once by this process. */
  concurrency: number;
  batchSize: number;
  sendDeadlineSeconds: number;
  /** pg-boss's schema (HERALD_QUEUE_SCHEMA): whose job leases are this deployment's. */
  queueSchema: string;
  /** Pushes per provider round trip, recorded before the next round. */
  chunkSize: number;
  /** Errors that mean "the database is down" go here instead of one log line per failed job. */
  outage?: OutageWatch;
};

/** The registered workers: paused during a database outage (no claiming), resumed after it. */
export type Workers = {
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Fanout and deliver jobs whose handler is still running (at shutdown: handed back if > 0). */
  readonly inFlight: number;
  /** After the queue has stopped: closes the leases. */
  stop(): Promise<void>;
};

const workerQueues = [queues.fanout, queues.deliver, queues.fanoutFailed, queues.deliverFailed];

export async function startWorkers(options: WorkerOptions): Promise<Workers> {
  const { orm, boss, logger } = options;
  const context: JobContext = {
    boss,
    clients: options.clients,
    logger,
    batchSize: options.batchSize,
    sendDeadlineMs: options.sendDeadlineSeconds * 1000,
    recordEvery: options.chunkSize,
  };
  // The polling interval is only a backstop: NOTIFY wakes the workers when a job is inserted.
  const polling = { pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 2 };

  // After a job, pg-boss waits out the polling interval before its next fetch unless a NOTIFY came
  // meanwhile; a burst of jobs inserted at once notifies only once, so each worker would idle up to
  // 2 s between them. A worker that has just run a job fetches again at once instead (notifying a
  // worker that is running a job only skips its next wait); an empty fetch ends the streak.
  const fetchAgainAtOnce = (queue: string) => {
    for (const worker of boss.getWipData()) {
      if (worker.name === queue && worker.count > 0) boss.notifyWorker(worker.id);
    }
  };

  // Which job this process runs is leased (leases.ts): if the process dies, the others hand its
  // jobs back within seconds instead of after pg-boss's 10 s heartbeat.
  const leases = await startLeases({ url: orm.config.get('clientUrl')!, boss, queueSchema: options.queueSchema, logger });
  const running = new Set<string>();
  // A job whose lease could not be taken (the database went away at that moment) has no lease to be
  // handed back by: remembered here, job id → queue, until the database answers again.
  const unleased = new Map<string, string>();
  // pg-boss records a handler's error on the job and retries it; the log says it happened (an
  // outage is said once, by the watch).
  const logged = <T extends { notificationId: string }>(queue: string, run: (data: T) => Promise<void>) =>
    async ([job]: { id: string; data: T }[]) => {
      running.add(job.id);
      try {
        await leases.take(job.id, queue).catch((error: unknown) => {
          unleased.set(job.id, queue);
          throw error;
        });
        // A retry of it that could be leased is found by its lease again.
        unleased.delete(job.id);
        await run(job.data);
      } catch (error) {
        if (!options.outage?.report(error)) {
          logger.error({ err: error, queue, jobId: job.id, notificationId: job.data.notificationId }, 'job failed; it will be retried');
        }
        throw error;
      } finally {
        running.delete(job.id);
        await leases.release(job.id).catch(() => undefined);
        fetchAgainAtOnce(queue);
      }
    };
  const register = async () => {
    await boss.work<FanoutJob>(queues.fanout, { ...polling, localConcurrency: 2 }, logged(queues.fanout, (data) => runFanout(orm.em, context, data)));
    await boss.work<DeliverJob>(
      queues.deliver,
      { ...polling, localConcurrency: options.concurrency },
      logged(queues.deliver, (data) => runDeliver(orm.em, context, data)),
    );
    await boss.work<FanoutJob>(queues.fanoutFailed, polling, async ([job]) => {
      logger.error({ notificationId: job.data.notificationId }, 'fanout failed for good');
      await failFanout(orm.em, job.data);
    });
    await boss.work<DeliverJob>(queues.deliverFailed, polling, async ([job]) => {
      logger.error({ notificationId: job.data.notificationId, deliveries: job.data.deliveryIds.length }, 'delivery batch failed for good');
      await failDeliver(orm.em, job.data);
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
        .then(() => unleased.clear())
        .catch((error) => logger.error({ err: error }, 'handing back the jobs cut by the outage failed'));
      await register();
    },
    get inFlight() {
      return running.size;
    },
    stop: () => leases.stop(),
  };
}

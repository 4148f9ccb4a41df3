// The worker role: consumes fanout and deliver jobs (and their dead letters) until stopped.
import type { PgBoss } from 'pg-boss';
import type { Orm } from '../db/orm.ts';
import type { OutageWatch } from '../db/outage.ts';
import type { Leases } from './leases.ts';
import type { Logger } from '../logger.ts';
import type { ProviderClients } from './clients.ts';
import { failDeliver, failFanout, runDeliver, runFanout, type DeliverJob, type JobContext } from './jobs.ts';
import { queues, type FanoutJob } from './queue.ts';

export type WorkerOptions = {
  orm: Orm;
  boss: PgBoss;
  clients: ProviderClients;
  logger: Logger;
  /** Deliver jobs run at once by this process. */
  concurrency: number;
  batchSize: number;
  sendDeadlineSeconds: number;
  /** Pushes per provider round trip, recorded before the next round. */
  chunkSize: number;
  /** Which job this process runs, so that its death hands them back at once (leases.ts). */
  leases?: Leases;
  /** Errors that mean "the database is down" go here instead of one log line per failed job. */
  outage?: OutageWatch;
};

/** The registered workers: paused during a database outage (no claiming), resumed after it. */
export type Workers = {
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Fanout and deliver jobs whose handler is still running (at shutdown: handed back if > 0). */
  readonly inFlight: number;
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

  // pg-boss records a handler's error on the job and retries it; the log says it happened.
  let inFlight = 0;
  // Jobs whose handler failed because the database went away: pg-boss could not record the failure
  // then, so they would wait for their heartbeat to lapse (10 s) before a retry. Failed on resume.
  const cutByOutage = new Map<string, string>();
  const logged = <T extends { notificationId: string }>(queue: string, run: (data: T) => Promise<void>) =>
    async ([job]: { id: string; data: T }[]) => {
      inFlight += 1;
      try {
        await options.leases?.take(job.id, queue);
        await run(job.data);
      } catch (error) {
        if (options.outage?.report(error)) cutByOutage.set(job.id, queue);
        else {
          logger.error({ err: error, queue, jobId: job.id, notificationId: job.data.notificationId }, 'job failed; it will be retried');
        }
        throw error;
      } finally {
        await options.leases?.release(job.id).catch(() => undefined);
        inFlight -= 1;
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
      for (const [jobId, queue] of cutByOutage) {
        cutByOutage.delete(jobId);
        // Only a job still marked active (its failure unrecorded); one already retried is left alone.
        const job = await boss.getJobById(queue, jobId).catch(() => null);
        if (job?.state === 'active') await boss.fail(queue, jobId, { message: 'the database went away while it ran' }).catch(() => undefined);
      }
      await register();
    },
    get inFlight() {
      return inFlight;
    },
  };
}

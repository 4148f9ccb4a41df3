// pg-boss lives in the same database as the entities, so a notification and its fanout job
// commit in one transaction. Queues notify on insert (LISTEN/NOTIFY), so an idle worker wakes at
// once instead of at its next poll.
import { fromKysely, PgBoss, type Queue } from 'pg-boss';
import type { OutageWatch } from '../db/outage.ts';
import type { EnqueueFanout } from '../domain/notifications.ts';
import type { Logger } from '../logging/logger.ts';

export const queues = {
  fanout: 'fanout',
  deliver: 'deliver',
  fanoutFailed: 'fanout_failed',
  deliverFailed: 'deliver_failed',
} as const;

export async function startBoss(
  connectionString: string,
  logger: Logger,
  options: { worker: boolean; schema: string; outage?: OutageWatch },
): Promise<PgBoss> {
  const boss = new PgBoss({
    connectionString,
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
    // pass: hourly, that is an hour of jobs (~0.15 s at 2,000 deliver jobs), not a day's at once.
    maintenanceIntervalSeconds: 3600,
  });
  // An unhandled 'error' event would exit the process. During an outage every poll fails: one line.
  boss.on('error', (error) => {
    if (!options.outage?.report(error)) logger.error({ err: error }, 'job queue error');
  });
  await boss.start();
  // createQueue leaves an existing queue as it was; updateQueue brings it to these options.
  const ensureQueue = async (name: string, options: Omit<Queue, 'name' | 'policy'>) => {
    await boss.createQueue(name, options);
    await boss.updateQueue(name, options);
  };
  for (const deadLetter of [queues.fanoutFailed, queues.deliverFailed]) {
    await ensureQueue(deadLetter, { retryLimit: 3, retryDelay: 5 });
  }
  const supervised = { heartbeatSeconds: 10, notify: true };
  await ensureQueue(queues.fanout, {
    ...supervised,
    retryDelay: 1,
    retryBackoff: true,
    retryDelayMax: 30,
    retryLimit: 5,
    deadLetter: queues.fanoutFailed,
    expireInSeconds: 300,
  });
  // Pushes have their own retry schedule (jobs.ts): a deliver job's retry only covers a crash or an
  // outage that cut it short, so it comes a second later and never backs off (backing off left
  // what an outage interrupted waiting up to 16 s after the database was back). Twenty failures
  // in a row are a bug, for the dead letters.
  await ensureQueue(queues.deliver, {
    ...supervised,
    retryDelay: 1,
    retryBackoff: false,
    retryLimit: 20,
    deadLetter: queues.deliverFailed,
    expireInSeconds: 120,
  });
  return boss;
}

/** The job's id is the notification's: a notification has one fanout, whatever retries a send. */
export function fanoutEnqueuer(boss: PgBoss): EnqueueFanout {
  return async (tx, job, priority) => {
    await boss.send(queues.fanout, job, { id: job.notificationId, priority, db: fromKysely(tx.getKysely()) });
  };
}

// pg-boss lives in the same database as the entities, so a notification and its fanout job
// commit in one transaction.
import { fromKysely, PgBoss } from 'pg-boss';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';

export const queues = { fanout: 'fanout' } as const;
export type FanoutJob = { notificationId: string; applicationId: string };

export async function startBoss(connectionString: string, logger: Logger, options: { worker: boolean }): Promise<PgBoss> {
  const boss = new PgBoss({
    connectionString,
    schema: 'pgboss',
    max: 5,
    // Only workers supervise (expire, retry, archive); an API process just enqueues.
    supervise: options.worker,
    schedule: options.worker,
    superviseIntervalSeconds: 5,
    monitorIntervalSeconds: 5,
  });
  // An unhandled 'error' event would exit the process.
  boss.on('error', (error) => logger.error({ err: error }, 'job queue error'));
  await boss.start();
  await boss.createQueue(queues.fanout, {
    retryLimit: 5,
    retryDelay: 2,
    retryBackoff: true,
    retryDelayMax: 60,
    expireInSeconds: 300,
    heartbeatSeconds: 10,
  });
  return boss;
}

/** Enqueues within the caller's transaction: a rollback drops the job too. */
export async function enqueueFanout(boss: PgBoss, tx: EntityManager, job: FanoutJob): Promise<void> {
  await boss.send(queues.fanout, job, { id: job.notificationId, db: fromKysely(tx.getKysely()) });
}

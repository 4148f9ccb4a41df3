// Periodic housekeeping, run by whichever worker pg-boss hands the scheduled job to.
import type { PgBoss } from 'pg-boss';
import type { Orm } from '../db/orm.ts';
import { deleteExpiredIdempotencyKeys } from '../domain/notifications.ts';
import type { Logger } from '../logger.ts';

const queue = 'maintenance';

export async function startMaintenance(boss: PgBoss, orm: Orm, logger: Logger): Promise<void> {
  await boss.createQueue(queue, { retryLimit: 0 });
  await boss.schedule(queue, '*/15 * * * *');
  await boss.work(queue, async () => {
    const deleted = await deleteExpiredIdempotencyKeys(orm.em.fork());
    logger.info({ deleted }, 'expired idempotency keys deleted');
  });
}

// Periodic housekeeping, run by whichever worker pg-boss hands the scheduled job to: retention
// (domain/retention.ts) and the fold of the kept audience totals (db/sql/audiences.ts) every 15
// minutes, and how long pg-boss keeps its finished jobs.
import type { PgBoss } from 'pg-boss';
import type { Orm } from '../db/orm.ts';
import { foldAudienceTotals } from '../db/sql/audiences.ts';
import { deleteExpired, type Removed, type RetentionOptions } from '../domain/retention.ts';
import type { Logger } from '../logging/logger.ts';
import { queues } from './queue.ts';

const queue = 'maintenance';

/**
 * Rows per deleting statement: each one takes tens of milliseconds (`make bench-retention`), so a
 * send that needs one of the same rows (an expired key it takes over) waits no longer than that.
 */
export const retentionBatchSize = 2000;

/**
 * Each run stops starting statements after this: at tens of thousands of rows a second that is
 * millions of rows a run, 96 runs a day; a larger backlog (the first run on a database that never
 * had retention) is carried on by the next runs. A worker stopping meanwhile waits for the run up
 * to its graceful timeout, then the job's signal ends it between two statements.
 */
export const retentionBudgetMs = 60_000;

/**
 * pg-boss deletes a finished (completed, failed or cancelled) job this long after it finished:
 * its default week, or the retention when that is shorter. Jobs are operational traces (what ran,
 * when, how often it was retried), not history: the notifications and deliveries are.
 */
export function finishedJobSeconds(retentionDays: number): number {
  return Math.min(retentionDays, 7) * 86_400;
}

export type MaintenanceOptions = { retentionDays: number };

export async function startMaintenance(boss: PgBoss, orm: Orm, logger: Logger, options: MaintenanceOptions): Promise<void> {
  const deleteAfterSeconds = finishedJobSeconds(options.retentionDays);
  await boss.createQueue(queue, { retryLimit: 0, deleteAfterSeconds });
  // A job takes its queue's setting when it is inserted: new jobs keep to it, older ones to theirs.
  for (const name of [...Object.values(queues), queue]) await boss.updateQueue(name, { deleteAfterSeconds });
  await boss.schedule(queue, '*/15 * * * *');
  await boss.work(queue, async ([job]) => {
    await runMaintenance(orm, logger, { retentionDays: options.retentionDays, signal: job.signal });
  });
}

/** One housekeeping run (what the scheduled job does). */
export async function runMaintenance(
  orm: Orm,
  logger: Logger,
  options: Pick<RetentionOptions, 'retentionDays' | 'signal' | 'onBatch'> & Partial<Pick<RetentionOptions, 'batchSize' | 'budgetMs'>>,
): Promise<Removed> {
  const started = performance.now();
  const removed = await deleteExpired(orm.em.fork(), {
    batchSize: retentionBatchSize,
    budgetMs: retentionBudgetMs,
    ...options,
  });
  const seconds = Math.round(performance.now() - started) / 1000;
  logger.info({ ...removed, seconds, retentionDays: options.retentionDays }, removed.done ? 'retention: expired rows deleted' : 'retention: budget spent, the next run carries on');
  // What an `all: true` count sums grows by a row per change of whom it counts; folded here, it
  // stays a few rows an application.
  const folded = await foldAudienceTotals(orm.em.fork());
  logger.info({ folded }, 'audience totals folded');
  return removed;
}

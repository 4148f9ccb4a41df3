// Tag summaries (domain/tag-summaries.ts), kept by the workers: a sweep every minute (one pg-boss
// schedule, run by one worker) queues a job per application whose summary is due, and a worker
// computes each one. Housekeeping like retention: outside the lanes, leases and fair shares of
// the send jobs, one at a time per process.
import type { PgBoss } from 'pg-boss';
import type { Orm } from '../db/orm.ts';
import { refreshTagSummary, summariesDue, tagSummarySettings } from '../domain/tag-summaries.ts';
import type { Logger } from '../logging/logger.ts';
import { queues, tagSummaryQueue, type TagSummaryJob } from './queue.ts';

const sweepQueue = 'tag_summary_sweep';

export async function startTagSummaries(boss: PgBoss, orm: Orm, logger: Logger): Promise<void> {
  await boss.createQueue(sweepQueue, { retryLimit: 0, expireInSeconds: 60 });
  await boss.schedule(sweepQueue, tagSummarySettings.sweepCron);
  const requests = tagSummaryQueue(boss);
  await boss.work(sweepQueue, async () => {
    for (const applicationId of await summariesDue(orm.em.fork())) await requests.request(applicationId);
  });
  await boss.work<TagSummaryJob>(queues.tagSummary, async ([job]) => {
    await computeSummary(orm, logger, job.data.applicationId);
  });
}

/** One application's computation (what a job does), logged with how long it took. */
export async function computeSummary(orm: Orm, logger: Logger, applicationId: string): Promise<void> {
  const started = performance.now();
  const summary = await refreshTagSummary(orm.em.fork(), applicationId, tagSummarySettings.statementSeconds);
  const ms = Math.round(performance.now() - started);
  logger.info({ applicationId, keys: summary.keys.length, ms }, 'tag summary computed');
}

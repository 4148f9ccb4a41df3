// What every fetched job goes through around its handler: the wait metric; its lease (leases.ts),
// so that the other processes hand it back within seconds if this one dies; its lane
// (lane-gate.ts); on failure one log line (an outage is said once, by the watch) and the error back
// to pg-boss, which records it on the job and retries it; then its lease released and its queue
// fetched again at once (wakeups.ts).
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { OutageWatch } from '../db/outage.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { Logger } from '../logging/logger.ts';
import { jobStarted } from '../observability/metrics.ts';
import { noWait, runInLane, type LaneGate } from './lane-gate.ts';
import type { Leases } from './leases.ts';
import { fetchAgainAtOnce } from './wakeups.ts';

/** What a job's log line names of it, when its data has it. */
type JobData = { notificationId?: string; endpointId?: string; applicationId?: string };

/** A handler of one fetch's jobs (one, or a batch), given their data and the turn of its lane. */
export type JobRun<T> = (data: T[], turn: () => Promise<void>) => Promise<void>;

export type JobRuns = {
  /** The pg-boss handler that runs `run` for a fetch of `queue`, with all of the above around it. */
  handler<T extends JobData>(queue: string, run: JobRun<T>): (jobs: JobWithMetadata<T>[]) => Promise<void>;
  /** Jobs whose handler is still running. */
  readonly running: ReadonlySet<string>;
  /**
   * After a database outage: hands back the jobs it cut short (leases.ts handBackOrphans), and
   * forgets those it could not lease. Logs what it did; never throws.
   */
  handBackOrphans(): Promise<void>;
};

export function trackJobRuns(options: {
  boss: PgBoss;
  leases: Leases;
  gate: LaneGate;
  /** The queues whose jobs run in lanes; the others' run at once. */
  laneQueues: ReadonlySet<string>;
  /** Those of them that are the campaign lane's (broadcasts), which waits behind the others. */
  campaignQueues?: ReadonlySet<string>;
  outage?: OutageWatch;
  logger: Logger;
}): JobRuns {
  const { boss, leases, gate, logger } = options;
  const running = new Set<string>();
  // A job whose lease could not be taken (the database went away at that moment) has no lease to be
  // handed back by: remembered here, job id → queue, until the database answers again.
  const unleased = new Map<string, string>();

  const lease = async (ids: string[], queue: string) => {
    try {
      await leases.take(ids, queue);
    } catch (error) {
      for (const id of ids) unleased.set(id, queue);
      throw error;
    }
    // A retry of one that could be leased is found by its lease again.
    for (const id of ids) unleased.delete(id);
  };

  // A lease left behind is harmless: the sweep hands back only the jobs of a dead process that are
  // still active, and an outage's hand-back drops this process's leases on jobs it no longer runs.
  const release = (ids: string[], queue: string) =>
    leases.release(ids).catch((error: unknown) => {
      if (!isDatabaseUnavailable(error)) logger.warn({ err: error, queue, jobs: ids.length }, 'job leases not released');
    });

  const reportFailure = <T extends JobData>(queue: string, jobs: JobWithMetadata<T>[], error: unknown) => {
    if (options.outage?.report(error)) return;
    const { notificationId, endpointId, applicationId } = jobs[0].data;
    logger.error({ err: error, queue, jobId: jobs[0].id, jobs: jobs.length, notificationId, endpointId, applicationId }, 'job failed; it will be retried');
  };

  return {
    handler: <T extends JobData>(queue: string, run: JobRun<T>) =>
      async (jobs: JobWithMetadata<T>[]) => {
        for (const job of jobs) {
          // Waiting counts from when the job was due: a retry's or a deferred job's delay is by design.
          jobStarted(queue, (job.startedOn.getTime() - job.startAfter.getTime()) / 1000);
          running.add(job.id);
        }
        const ids = jobs.map((job) => job.id);
        try {
          await lease(ids, queue);
          const data = jobs.map((job) => job.data);
          const lane = options.campaignQueues?.has(queue) ? 'campaign' : 'transactional';
          await (options.laneQueues.has(queue) ? runInLane(gate, jobs, (turn) => run(data, turn), lane) : run(data, noWait));
        } catch (error) {
          reportFailure(queue, jobs, error);
          throw error;
        } finally {
          for (const id of ids) running.delete(id);
          await release(ids, queue);
          fetchAgainAtOnce(boss, queue);
        }
      },
    running,
    async handBackOrphans() {
      try {
        const jobs = await leases.handBackOrphans(running, unleased);
        unleased.clear();
        if (jobs > 0) logger.warn({ jobs }, 'jobs cut short by the database outage handed back');
      } catch (error) {
        logger.error({ err: error }, 'handing back the jobs cut by the outage failed');
      }
    },
  };
}

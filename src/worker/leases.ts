// Job leases: which worker process runs which job. pg-boss notices a dead worker only when its
// job's heartbeat is stale (10 s at least) plus a supervision pass; a process that dies (kill -9,
// out of memory) also loses its Postgres session, and with it the advisory lock it held. Every
// worker sweeps once a second for leases whose holder's lock is gone and hands those jobs back,
// so another worker retries them within a few seconds.
import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PgBoss } from 'pg-boss';
import { clientSideBounds, defaultBounds, type DatabaseBounds } from '../db/bounds.ts';
import { openStatementPool } from '../db/pools.ts';
import { PreparingClient } from '../db/preparing-client.ts';
import { compiled } from '../db/sql/execute.ts';
import { dropLeases, holdersWithoutLock, releaseLeases, takeLeases, tryHolderLock, type TakenLease } from '../db/sql/leases.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { Logger } from '../logging/logger.ts';

export type Leases = {
  /** Leases the jobs of one fetch (all of one queue) together. */
  take(jobIds: string[], queue: string): Promise<void>;
  release(jobIds: string[]): Promise<void>;
  /**
   * After a database outage: this process's leases on jobs it no longer runs, and the jobs it
   * started but could not lease (`unleased`: job id → queue). Their handlers failed while pg-boss
   * could not record it (nor the lease be taken or released), so they are handed back now rather
   * than after their heartbeat lapses. Resolves to how many were handed back.
   */
  handBackOrphans(running: ReadonlySet<string>, unleased: ReadonlyMap<string, string>): Promise<number>;
  stop(): Promise<void>;
};

/** The first key of every holder's advisory lock (the second is the holder). */
const lockNamespace = 72_540_302;
const sweepEveryMs = 1000;
/**
 * A holder must be missing this long before its jobs go: a live worker whose lock session was cut
 * (terminated connections, a database restart) takes its lock again well within it.
 */
const missingForMs = 2000;
/** How long a stopping process waits for its lock session's goodbye. */
const endWaitMs = 1000;

/**
 * The holder's advisory lock, on a session that lives as long as the process: `hold` takes it when
 * no session holds it (at the start, and again after the session was cut), `end` lets it go.
 * Opening the session and taking the lock are bounded on the client's side only: a server-side
 * bound (a statement or idle timeout) that ended the session would release the lock while this
 * process still pushes its jobs, and the other workers would hand them back to be pushed again.
 */
function holderLock(url: string, holder: number, bounds: DatabaseBounds, logger: Logger): { hold(): Promise<void>; end(): Promise<void> } {
  let lock: PreparingClient | null = null;
  let ended = false;
  return {
    async hold() {
      if (ended || lock) return;
      const client = new PreparingClient({ connectionString: url, ...clientSideBounds(bounds) });
      // A cut session ends, and the next hold takes the lock again; its error has no one to tell.
      client.on('error', () => undefined);
      client.on('end', () => {
        if (lock === client) lock = null;
      });
      try {
        await client.connect();
        const lockStatement = compiled(tryHolderLock(lockNamespace, holder));
        const { rows } = await client.query<{ taken: boolean }>(lockStatement.text, lockStatement.values);
        if (rows[0].taken) {
          lock = client;
          return;
        }
        // A session of this holder cut on the client's side still holds it on the server's: it
        // still protects this process's leases until the server ends it.
      } catch (error) {
        // Without the lock the others would take this process for dead. An outage is the watch's to say.
        if (!ended && !isDatabaseUnavailable(error)) logger.error({ err: error, holder }, 'job lease lock not taken; the next sweep tries again');
      }
      // Not taken: the session has nothing to hold, and how its end goes changes nothing.
      await client.end().catch(() => undefined);
    },
    async end() {
      ended = true;
      // At shutdown: the session's end releases the lock whatever its answer. A session on a link
      // that carries nothing (a stall) would never answer its goodbye: the process's exit closes it.
      const ending = lock?.end().catch(() => undefined);
      await Promise.race([ending, sleep(endWaitMs, undefined, { ref: false })]);
    },
  };
}

/**
 * The jobs of these deleted leases that are still active fail, so pg-boss retries them, at once:
 * the job did nothing wrong, its process died or its database went away. Answers how many.
 */
async function handBack(boss: PgBoss, leases: TakenLease[], reason: string): Promise<number> {
  let handedBack = 0;
  for (const job of leases) {
    // A job pg-boss has already settled (completed, retried) is left alone.
    const current = await boss.getJobById(job.queue, job.job_id);
    if (current?.state !== 'active') continue;
    await boss.fail(job.queue, job.job_id, { message: reason });
    await boss.update(job.queue, undefined, { id: job.job_id, startAfter: new Date() });
    handedBack += 1;
  }
  return handedBack;
}

export async function startLeases(options: {
  url: string;
  boss: PgBoss;
  queueSchema: string;
  logger: Logger;
  /** The workers' database bounds (db/bounds.ts). */
  bounds?: DatabaseBounds;
}): Promise<Leases> {
  const { boss, logger, queueSchema } = options;
  const holder = randomInt(1, 2 ** 31 - 1);
  const { db, close } = openStatementPool(options.url, 2, options.bounds);
  const lock = holderLock(options.url, holder, options.bounds ?? defaultBounds, logger);
  await lock.hold();

  const missingSince = new Map<number, number>();
  const sweep = async () => {
    await lock.hold();
    const now = Date.now();
    const missing = new Set(await holdersWithoutLock(db, lockNamespace, queueSchema));
    for (const known of missingSince.keys()) if (!missing.has(known)) missingSince.delete(known);
    for (const gone of missing) {
      const since = missingSince.get(gone) ?? now;
      missingSince.set(gone, since);
      if (now - since < missingForMs) continue;
      const jobs = await handBack(boss, await dropLeases(db, queueSchema, gone), 'its worker process died');
      if (jobs > 0) logger.warn({ holder: gone, jobs }, 'jobs of a worker that died handed back');
      missingSince.delete(gone);
    }
  };
  let sweeping = Promise.resolve();
  const timer = setInterval(() => {
    // During a database outage the sweep fails like everything else; the outage watch reports it.
    sweeping = sweeping.then(sweep).catch((error: unknown) => {
      if (!isDatabaseUnavailable(error)) logger.error({ err: error }, 'job lease sweep failed; it runs again in a second');
    });
  }, sweepEveryMs);
  timer.unref();

  return {
    async take(jobIds, queue) {
      await takeLeases(db, { jobIds, queueSchema, queue, holder });
    },
    async release(jobIds) {
      await releaseLeases(db, jobIds, holder);
    },
    async handBackOrphans(running, unleased) {
      const leased = await dropLeases(db, queueSchema, holder, [...running]);
      // A job retried since and running here again is not handed back.
      const notLeased = [...unleased].filter(([jobId]) => !running.has(jobId)).map(([job_id, queue]) => ({ job_id, queue }));
      return handBack(boss, [...leased, ...notLeased], 'the database went away while it ran');
    },
    async stop() {
      clearInterval(timer);
      await sweeping;
      await lock.end();
      // At shutdown, as the lock's: a pool that fails to close has nothing left to do.
      await close().catch(() => undefined);
    },
  };
}

// Job leases: which worker process runs which job. pg-boss notices a dead worker only when its
// job's heartbeat is stale (10 s at least) plus a supervision pass; a process that dies (kill -9,
// out of memory) also loses its Postgres session, and with it the advisory lock it held. Every
// worker sweeps once a second for leases whose holder's lock is gone and hands those jobs back,
// so another worker retries them within a few seconds.
import { randomInt } from 'node:crypto';
import pg from 'pg';
import type { PgBoss } from 'pg-boss';
import type { Logger } from '../logging/logger.ts';

export type Leases = {
  take(jobId: string, queue: string): Promise<void>;
  release(jobId: string): Promise<void>;
  /**
   * After a database outage: this process's leases on jobs it no longer runs. Their handlers failed
   * while pg-boss could not record it (nor the lease be released), so they are handed back now
   * rather than after their heartbeat lapses.
   */
  handBackOrphans(running: ReadonlySet<string>): Promise<void>;
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

export async function startLeases(options: { url: string; boss: PgBoss; queueSchema: string; logger: Logger }): Promise<Leases> {
  const { boss, logger, queueSchema } = options;
  const holder = randomInt(1, 2 ** 31 - 1);
  const pool = new pg.Pool({ connectionString: options.url, max: 2 });
  pool.on('error', () => undefined);
  let lock: pg.Client | null = null;
  let stopped = false;

  // The session that holds the lock lives as long as the process; when it is cut, it is taken again.
  const hold = async (): Promise<void> => {
    if (stopped || lock) return;
    const client = new pg.Client({ connectionString: options.url });
    client.on('error', () => undefined);
    client.on('end', () => {
      if (lock === client) lock = null;
    });
    try {
      await client.connect();
      await client.query('select pg_advisory_lock($1, $2)', [lockNamespace, holder]);
      lock = client;
    } catch {
      await client.end().catch(() => undefined);
    }
  };
  await hold();

  // Deletes the leases `where` selects; the jobs still active among them fail, so pg-boss retries
  // them, at once: the job did nothing wrong, its process died or its database went away.
  const handBack = async (where: string, params: unknown[], reason: string): Promise<number> => {
    const { rows } = await pool.query<{ job_id: string; queue: string }>(
      `delete from job_leases where queue_schema = $1 and ${where} returning job_id, queue`,
      [queueSchema, ...params],
    );
    for (const job of rows) {
      // A job pg-boss has already settled (completed, retried) is left alone.
      const current = await boss.getJobById(job.queue, job.job_id);
      if (current?.state !== 'active') continue;
      await boss.fail(job.queue, job.job_id, { message: reason });
      await boss.update(job.queue, undefined, { id: job.job_id, startAfter: new Date() });
    }
    return rows.length;
  };

  const missingSince = new Map<number, number>();
  const sweep = async () => {
    await hold();
    const { rows } = await pool.query<{ holder: number }>(
      `select distinct holder from job_leases
        where queue_schema = $2 and holder not in (select objid::bigint from pg_locks
                              where locktype = 'advisory' and classid = $1 and objsubid = 2 and granted)`,
      [lockNamespace, queueSchema],
    );
    const now = Date.now();
    const missing = new Set(rows.map((row) => row.holder));
    for (const known of missingSince.keys()) if (!missing.has(known)) missingSince.delete(known);
    for (const gone of missing) {
      const since = missingSince.get(gone) ?? now;
      missingSince.set(gone, since);
      if (now - since < missingForMs) continue;
      const jobs = await handBack('holder = $2', [gone], 'its worker process died');
      if (jobs > 0) logger.warn({ holder: gone, jobs }, 'jobs of a worker that died handed back');
      missingSince.delete(gone);
    }
  };
  let sweeping = Promise.resolve();
  const timer = setInterval(() => {
    // During a database outage the sweep fails like everything else; the outage watch reports it.
    sweeping = sweeping.then(sweep).catch(() => undefined);
  }, sweepEveryMs);
  timer.unref();

  return {
    async take(jobId, queue) {
      await pool.query(
        `insert into job_leases (job_id, queue_schema, queue, holder) values ($1, $2, $3, $4)
         on conflict (job_id) do update set holder = excluded.holder, taken_at = now()`,
        [jobId, queueSchema, queue, holder],
      );
    },
    async release(jobId) {
      await pool.query('delete from job_leases where job_id = $1 and holder = $2', [jobId, holder]);
    },
    async handBackOrphans(running) {
      await handBack('holder = $2 and job_id <> all($3::uuid[])', [holder, [...running]], 'the database went away while it ran');
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await sweeping;
      await lock?.end().catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
}

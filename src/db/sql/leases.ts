// Job leases (worker/leases.ts): which process holds which job, so that a dead one's jobs run again.
import { sql } from 'kysely';
import { arrayLiteral } from '../array-literal.ts';
import { type Db, rows, run } from './execute.ts';

/**
 * Session-level: held as long as the holder's dedicated connection lives. Tried, not waited for: a
 * session of this holder that was cut on the client's side may still hold it on the server's, and
 * then still protects its leases; the next sweep tries again.
 */
export const tryHolderLock = (namespace: number, holder: number) => sql<{ taken: boolean }>`select pg_try_advisory_lock(${namespace}, ${holder}) as taken`;

/** Leases a worker's fetch (one job, or a batch of scheduled fanouts) in one statement. */
export async function takeLeases(db: Db, lease: { jobIds: string[]; queueSchema: string; queue: string; holder: number }): Promise<void> {
  await run(
    db,
    sql`
      insert into job_leases (job_id, queue_schema, queue, holder)
      select job_id, ${lease.queueSchema}, ${lease.queue}, ${lease.holder} from unnest(${arrayLiteral(lease.jobIds)}::uuid[]) as job_id
      on conflict (job_id) do update set holder = excluded.holder, taken_at = now()`,
  );
}

export async function releaseLeases(db: Db, jobIds: string[], holder: number): Promise<void> {
  await run(db, sql`delete from job_leases where job_id = any(${arrayLiteral(jobIds)}::uuid[]) and holder = ${holder}`);
}

/** Holders with leases whose advisory lock nobody holds: their process is gone (or reconnecting). */
export async function holdersWithoutLock(db: Db, namespace: number, queueSchema: string): Promise<number[]> {
  const found = await rows(
    db,
    sql<{ holder: number }>`
      select distinct holder from job_leases
       where queue_schema = ${queueSchema}
         and holder not in (select objid::bigint from pg_locks
                             where locktype = 'advisory' and classid = ${namespace} and objsubid = 2 and granted)`,
  );
  return found.map((row) => Number(row.holder));
}

export type TakenLease = { job_id: string; queue: string };

/** Deletes a holder's leases (all of them, or those on jobs other than `except`) and returns them. */
export async function dropLeases(db: Db, queueSchema: string, holder: number, except?: string[]): Promise<TakenLease[]> {
  const exceptThese = except === undefined ? sql`` : sql`and job_id <> all(${arrayLiteral(except)}::uuid[])`;
  return rows(
    db,
    sql<TakenLease>`delete from job_leases where queue_schema = ${queueSchema} and holder = ${holder} ${exceptThese} returning job_id, queue`,
  );
}

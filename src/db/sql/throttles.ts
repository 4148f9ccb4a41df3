// Throttled notifications (`options.throttle_per_minute`): the next free slot of a notification's
// pushes, kept in one row that every worker process reserves from (domain/throttle.ts has the rule).
import { sql } from 'kysely';
import { type Db, rows } from './execute.ts';

/** A reservation's answer: slots from `startsInMs` from now, or none, the next free one `freeInMs` from now. */
export type Reservation = { startsInMs: number } | { freeInMs: number };

/**
 * Reserves `count` slots `spacingMs` apart for the notification's pushes, in one statement: from the
 * next free slot, or from now when that has passed (a pace never catches up on time it lost), and
 * only when it is within the lookahead (domain/throttle.ts reserve). The row is made by the first
 * reservation. A concurrent reservation waits for the row and then reserves after it, so two
 * workers never get the same slots. Times are the database's clock as the statement runs (not its
 * start: a wait for the row would make that stale), answered relative to the moment it answers, so
 * that the workers' clocks do not matter. Not in a transaction: the row is locked for one
 * statement only. When nothing was reserved, the free slot is read from the statement's snapshot,
 * which a concurrent reservation may have moved since: the job handed back then comes back early and
 * looks again.
 */
export async function reserveSlots(
  db: Db,
  pace: { notificationId: string; dueAt: Date | null; applicationId: string; count: number; spacingMs: number; lookaheadMs: number },
): Promise<Reservation> {
  const span = pace.count * pace.spacingMs;
  // With local_time, each due instant has its pace; '-infinity': the send's start.
  const dueAt = pace.dueAt === null ? sql`'-infinity'::timestamptz` : sql`${pace.dueAt}::timestamptz`;
  const [found] = await rows(
    db,
    sql<{ startsInMs: number | null; freeInMs: number | null }>`
      with reserved as (
        insert into notification_throttles as t (notification_id, due_at, application_id, next_slot)
        values (${pace.notificationId}, ${dueAt}, ${pace.applicationId}, clock_timestamp() + ${span}::float8 * interval '1 millisecond')
        on conflict (notification_id, due_at) do update
           set next_slot = greatest(t.next_slot, clock_timestamp()) + ${span}::float8 * interval '1 millisecond'
         where t.next_slot <= clock_timestamp() + ${pace.lookaheadMs}::float8 * interval '1 millisecond'
        returning t.next_slot
      )
      select (select extract(epoch from r.next_slot - clock_timestamp()) * 1000 - ${span}::float8 from reserved r)::float8 as "startsInMs",
             (select extract(epoch from t.next_slot - clock_timestamp()) * 1000
                from notification_throttles t
               where t.notification_id = ${pace.notificationId} and t.due_at = ${dueAt})::float8 as "freeInMs"`,
  );
  if (found.startsInMs !== null) return { startsInMs: Math.max(0, found.startsInMs) };
  return { freeInMs: Math.max(0, found.freeInMs ?? 0) };
}

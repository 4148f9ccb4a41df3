// The hourly rollup (GET /api/v1/stats/hourly): sends and delivery outcomes per application and UTC
// hour. Written only as a part of the statements that already move a notification's counters (the
// send's insert, the fanout's insert, a batch's outcomes, a cancel's skips, an event's first
// `opened`), never by a statement of its own: a request or a batch costs no round trip more.
import { sql, type RawBuilder } from 'kysely';
import { type Db, asDate, rows } from './execute.ts';

/**
 * Rows per application-hour: each statement adds to the one of its connection (its backend's pid
 * modulo this), so that transactions on different connections seldom wait for each other's. A
 * send holds its row until its COMMIT, a round trip (and the quota's) after its store: with one
 * row per application-hour, one application's concurrent sends queued on it (docs/DESIGN.md,
 * "Hourly statistics, as built"). A read adds an hour's rows up: at most this many per hour.
 */
export const slotsPerHour = 16;

/**
 * The body of a data-modifying `with` that adds counts to the application-hours of the moment the
 * statement's transaction began (UTC hours). `counts` is a select of (application_id, sends,
 * accepted, failed, skipped, opens), at most one row per application, and none when there is
 * nothing to add: a statement that moved nothing must not take a row's lock. Rows are taken in
 * application order, so that a statement touching several applications (a batch of fanouts) takes
 * them in the order any other does. Callers aggregate what the notifications' counters' update
 * returned, so the hour's row is taken after every notification row the statement moves: the lock
 * order everywhere (delivery rows, the notification's, then the hour's). Taken before, a batch's
 * outcomes holding the hour and waiting for the notification would deadlock with a broadcast's
 * walk, which holds the notification's row for its batch.
 */
export function addToHours(counts: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`
    insert into hourly_statistics as h (application_id, hour, slot, sends, accepted, failed, skipped, opens)
    select c.application_id, date_trunc('hour', now(), 'UTC'), pg_backend_pid() % ${slotsPerHour},
           c.sends, c.accepted, c.failed, c.skipped, c.opens
      from (${counts}) as c(application_id, sends, accepted, failed, skipped, opens)
     order by c.application_id
    on conflict (application_id, hour, slot) do update
      set sends = h.sends + excluded.sends, accepted = h.accepted + excluded.accepted, failed = h.failed + excluded.failed,
          skipped = h.skipped + excluded.skipped, opens = h.opens + excluded.opens`;
}

export type HourRow = { hour: Date; sends: number; accepted: number; failed: number; skipped: number; opens: number };

/**
 * The application's stored hours in [from, to), oldest first, each hour's rows added up; hours with
 * nothing counted have none. Reads at most 745 hours' rows through the primary key.
 */
export async function hourRows(db: Db, applicationId: string, range: { from: Date; to: Date }): Promise<HourRow[]> {
  const found = await rows(
    db,
    sql<HourRow>`
      select hour, sum(sends)::int as sends, sum(accepted)::int as accepted, sum(failed)::int as failed,
             sum(skipped)::int as skipped, sum(opens)::int as opens
        from hourly_statistics
       where application_id = ${applicationId} and hour >= ${range.from} and hour < ${range.to}
       group by hour order by hour`,
  );
  return found.map((row) => ({ ...row, hour: asDate(row.hour) }));
}

/** Retention: up to `limit` rows of hours older than the horizon, of any application. Answers how many went. */
export async function deleteExpiredHours(db: Db, retentionDays: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from hourly_statistics where (application_id, hour, slot) in (
          select application_id, hour, slot from hourly_statistics where hour < now() - make_interval(days => ${retentionDays}) limit ${limit})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

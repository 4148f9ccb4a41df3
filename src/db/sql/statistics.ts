// The hourly rollup (GET /api/v1/stats/hourly): sends and delivery outcomes per application and UTC
// hour. Written only as a part of the statements that already move a notification's counters (the
// send's insert, the fanout's insert, a batch's outcomes, a cancel's skips, an event's first
// `opened`), never by a statement of its own: a request or a batch costs no round trip more.
import { sql, type RawBuilder } from 'kysely';
import { type Db, asDate, rows } from './execute.ts';

/** The UTC hour a counter moved in: the hour of its transaction's start, as `completed_at` is written. */
export const currentHour = sql`date_trunc('hour', now(), 'UTC')`;

/**
 * The body of a data-modifying `with` that adds counts to application-hours. `counts` is a select
 * of (application_id, hour, sends, accepted, failed, skipped, opens), at most one row per
 * application, and none when there is nothing to add: a statement that moved nothing must not take
 * the row's lock, which every statement of the application's hour waits on (one row per
 * application-hour: docs/DESIGN.md). Rows in application order, so that a statement touching
 * several applications (a batch of fanouts) takes their rows in the order any other does. The
 * select aggregates what the notifications' counters' update returned, so the hour's row is taken
 * after every notification row the statement moves: the lock order everywhere (delivery rows, the
 * notification's, then the hour's). Taken before, a batch's outcomes holding the hour and waiting
 * for the notification would deadlock with a broadcast's walk, which holds the notification's row
 * for its batch.
 */
export function addToHours(counts: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`
    insert into hourly_statistics as h (application_id, hour, sends, accepted, failed, skipped, opens)
    ${counts}
    on conflict (application_id, hour) do update
      set sends = h.sends + excluded.sends, accepted = h.accepted + excluded.accepted, failed = h.failed + excluded.failed,
          skipped = h.skipped + excluded.skipped, opens = h.opens + excluded.opens`;
}

export type HourRow = { hour: Date; sends: number; accepted: number; failed: number; skipped: number; opens: number };

/** The application's stored hours in [from, to), oldest first; hours with nothing counted have no row. */
export async function hourRows(db: Db, applicationId: string, range: { from: Date; to: Date }): Promise<HourRow[]> {
  const found = await rows(
    db,
    sql<HourRow>`
      select hour, sends, accepted, failed, skipped, opens from hourly_statistics
       where application_id = ${applicationId} and hour >= ${range.from} and hour < ${range.to}
       order by hour`,
  );
  return found.map((row) => ({ ...row, hour: asDate(row.hour) }));
}

/** Retention: up to `limit` hours older than the horizon, of any application. Answers how many went. */
export async function deleteExpiredHours(db: Db, retentionDays: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from hourly_statistics where (application_id, hour) in (
          select application_id, hour from hourly_statistics where hour < now() - make_interval(days => ${retentionDays}) limit ${limit})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

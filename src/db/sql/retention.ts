// Retention: what has been kept past its horizon, deleted in short batches.
import { sql } from 'kysely';
import { arrayLiteral } from '../array-literal.ts';
import { type Db, rows } from './execute.ts';

/**
 * The notifications that ended longest ago, before the horizon (at most `reading`), as many as make
 * about a batch of deliveries: each weighs its deliveries (its `installations` counter; its target
 * users before its fanout wrote any), so they are taken until those add up to a batch (at least
 * one). The deliveries of one pick then take a few statements, none of which walks back over the
 * index entries of many notifications already emptied; a notification of more than a batch (a
 * broadcast's million) is a pick of its own, deleted in id order (deleteDeliveriesOf). The
 * completed_at index gives them in order.
 */
export async function pickExpired(db: Db, options: { retentionDays: number; batchSize: number; reading: number }): Promise<string[]> {
  const picked = await rows(
    db,
    sql<{ id: string }>`
      select id from (
        select id, sum(greatest(cardinality(user_ids), installations_count)) over (order by completed_at rows unbounded preceding)
                   - greatest(cardinality(user_ids), installations_count) as before
          from notifications
         where completed_at < now() - make_interval(days => ${options.retentionDays})
         order by completed_at
         limit ${options.reading}
      ) picked
      where before < ${options.batchSize}`,
  );
  return picked.map((row) => row.id);
}

/**
 * Up to a batch of these notifications' deliveries, with their events (their foreign key cascades
 * too, but this way they are deleted as a set and counted). The ids are passed on as one array so
 * that both deletes probe their index, whatever the planner guesses of a CTE's size. One
 * notification (a pick of its own: more than a batch) is deleted in id order after `after`, the
 * last id the previous statement deleted: a scan from its start would step over the index entries
 * of every row deleted before (dead until vacuum), longer each statement through a million.
 */
export async function deleteDeliveriesOf(
  db: Db,
  notificationIds: string[],
  batchSize: number,
  after: string | null = null,
): Promise<{ deliveries: number; events: number; last: string | null }> {
  const doomed =
    notificationIds.length === 1
      ? sql`select id from deliveries where notification_id = ${notificationIds[0]} ${after === null ? sql`` : sql`and id > ${after}`} order by id limit ${batchSize}`
      : sql`select id from deliveries where notification_id = any(${arrayLiteral(notificationIds)}::uuid[]) limit ${batchSize}`;
  const [counts] = await rows(
    db,
    sql<{ deliveries: number; events: number; last: string | null }>`
      with doomed as (
        select array(${doomed}) as ids
      ), events as (
        delete from delivery_events where delivery_id = any((select ids from doomed)::uuid[]) returning 1
      ), gone as (
        delete from deliveries where id = any((select ids from doomed)::uuid[]) returning 1
      )
      select (select count(*) from gone)::int as deliveries, (select count(*) from events)::int as events,
             (select id::text from unnest((select ids from doomed)::uuid[]) as id order by id desc limit 1) as last`,
  );
  return counts;
}

/**
 * The notifications themselves and any key still naming one. Only those with no delivery left
 * (the budget ran out before all were deleted): deliveries have no foreign key to cascade through,
 * and a notification is never deleted before them. For one notification whose deliveries were
 * deleted in id order up to `after`, only deliveries after it are looked for: those before it are
 * gone, and walking their index entries (dead until vacuum: a million for a broadcast) would take
 * seconds of reads beside the sends.
 */
export async function deleteNotifications(
  db: Db,
  notificationIds: string[],
  after: string | null = null,
): Promise<{ notifications: number; idempotencyKeys: number }> {
  const left = notificationIds.length === 1 && after !== null ? sql`and d.id > ${after}` : sql``;
  const [counts] = await rows(
    db,
    sql<{ notifications: number; idempotencyKeys: number }>`
      with doomed as (
        select n.id from notifications n
         where n.id = any(${arrayLiteral(notificationIds)}::uuid[])
           and not exists (select 1 from deliveries d where d.notification_id = n.id ${left})
      ), keys as (
        delete from idempotency_keys k using doomed where k.notification_id = doomed.id returning 1
      ), gone as (
        delete from notifications n using doomed where n.id = doomed.id returning 1
      )
      select (select count(*) from gone)::int as notifications, (select count(*) from keys)::int as "idempotencyKeys"`,
  );
  return counts;
}

/**
 * Keys past the window no longer protect anything; claiming one takes it over anyway. At most
 * `limit` of them (retention deletes in short batches). The outer `created_at` condition is checked
 * again on a key a concurrent send has just taken over (which renews it): that one stays.
 */
export async function deleteExpiredKeys(db: Db, windowHours: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from idempotency_keys
         where id in (select id from idempotency_keys where created_at < now() - make_interval(hours => ${windowHours}) limit ${limit})
           and created_at < now() - make_interval(hours => ${windowHours})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

/**
 * Retention: up to `limit` finished webhook deliveries of events created before the horizon. A
 * delivery still pending stays (a retry window longer than the retention), and so does its event.
 */
export async function deleteExpiredWebhookDeliveries(db: Db, retentionDays: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from webhook_deliveries where id in (
          select d.id from webhook_events e join webhook_deliveries d on d.event_id = e.id
           where e.created_at < now() - make_interval(days => ${retentionDays}) and d.state <> 'pending'
           order by e.created_at limit ${limit})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

/** Retention, after the deliveries: up to `limit` webhook events created before the horizon that have none left. */
export async function deleteExpiredWebhookEvents(db: Db, retentionDays: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from webhook_events where id in (
          select e.id from webhook_events e
           where e.created_at < now() - make_interval(days => ${retentionDays})
             and not exists (select 1 from webhook_deliveries d where d.event_id = e.id)
           order by e.created_at limit ${limit})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

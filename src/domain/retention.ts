// Retention: finished notifications older than the horizon are deleted with what hangs on them
// (deliveries, their events, the notification's idempotency key), and expired idempotency keys go
// too. A batch at a time: each statement is its own short transaction that deletes at most
// `batchSize` rows, so no row lock a send or an event could wait on is held for long, and a run
// stops at its time budget; the next run carries on where it stopped.
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from 'kysely';
import { deleteExpiredIdempotencyKeys } from './notifications.ts';

/** Statuses a notification never leaves: nothing is pending, nothing will be written to it again. */
export const finishedStatuses = ['completed', 'partial', 'failed'] as const;

export type RetentionOptions = {
  retentionDays: number;
  /** The most rows one statement deletes. */
  batchSize: number;
  /** No statement starts after this many milliseconds. */
  budgetMs: number;
  /** Stops the run between two statements (a worker shutting down). */
  signal?: AbortSignal;
  /** Told of every deleting statement: what it deleted and how long it took. */
  onBatch?: (batch: RetentionBatch) => void;
};

export type RetentionBatch = { table: 'idempotency_keys' | 'deliveries' | 'notifications'; rows: number; ms: number };

export type Removed = {
  notifications: number;
  deliveries: number;
  events: number;
  idempotencyKeys: number;
  /** False when the budget (or the signal) ended the run before everything due was deleted. */
  done: boolean;
};

type Db = ReturnType<EntityManager['getKysely']>;

export async function deleteExpired(em: EntityManager, options: RetentionOptions): Promise<Removed> {
  const db: Db = em.getKysely();
  const started = performance.now();
  const removed: Removed = { notifications: 0, deliveries: 0, events: 0, idempotencyKeys: 0, done: false };
  const inTime = () => performance.now() - started < options.budgetMs && !options.signal?.aborted;
  const timed = async <T>(table: RetentionBatch['table'], run: () => Promise<T>, rows: (result: T) => number) => {
    const batchStarted = performance.now();
    const result = await run();
    options.onBatch?.({ table, rows: rows(result), ms: performance.now() - batchStarted });
    return result;
  };

  for (;;) {
    if (!inTime()) return removed;
    const keys = await timed('idempotency_keys', () => deleteExpiredIdempotencyKeys(em, options.batchSize), (count) => count);
    removed.idempotencyKeys += keys;
    if (keys < options.batchSize) break;
  }

  // How many notifications a pick reads (it reads each one's user list): twice what the last pick
  // took, doubling while a pick takes all it read; at most a batch.
  let reading = 64;
  for (;;) {
    if (!inTime()) return removed;
    const ids = await pickExpired(db, options.retentionDays, options.batchSize, Math.min(reading, options.batchSize));
    if (ids.length === 0) break;
    reading = ids.length >= reading ? reading * 2 : Math.max(ids.length * 2, 16);
    for (;;) {
      if (!inTime()) return removed;
      const gone = await timed('deliveries', () => deleteDeliveriesOf(db, ids, options.batchSize), (result) => result.deliveries);
      removed.deliveries += gone.deliveries;
      removed.events += gone.events;
      // A finished notification gets no new deliveries: fewer than a batch means none are left.
      if (gone.deliveries < options.batchSize) break;
    }
    if (!inTime()) return removed;
    const gone = await timed('notifications', () => deleteNotifications(db, ids), (result) => result.notifications);
    removed.notifications += gone.notifications;
    removed.idempotencyKeys += gone.idempotencyKeys;
    // Cannot happen while finished notifications get no new deliveries; if it did, the same pick
    // would come back at once: stop rather than spin until the budget ends.
    if (gone.notifications === 0) return removed;
  }
  removed.done = true;
  return removed;
}

/**
 * The oldest finished notifications past the horizon (at most `reading`), as many as make about a
 * batch of deliveries: a notification has about one delivery per target user's installation, so
 * they are taken until their target users add up to a batch (at least one). The deliveries of one
 * pick then take a few statements, none of which walks back over the index entries of many
 * notifications already emptied. The created_at index gives them in order.
 */
async function pickExpired(db: Db, retentionDays: number, batchSize: number, reading: number): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    select id from (
      select id, sum(cardinality(user_ids)) over (order by created_at rows unbounded preceding) - cardinality(user_ids) as before
        from notifications
       where created_at < now() - make_interval(days => ${retentionDays})
         and status in (${sql.join(finishedStatuses)})
       order by created_at
       limit ${reading}
    ) picked
    where before < ${batchSize}
  `.execute(db);
  return rows.map((row) => row.id);
}

/**
 * Up to a batch of these notifications' deliveries, with their events (their foreign key cascades
 * too, but this way they are deleted as a set and counted). The ids are passed on as one array so
 * that both deletes probe their index, whatever the planner guesses of a CTE's size.
 */
async function deleteDeliveriesOf(db: Db, notificationIds: string[], batchSize: number): Promise<{ deliveries: number; events: number }> {
  const { rows } = await sql<{ deliveries: number; events: number }>`
    with doomed as (
      select array(select id from deliveries where notification_id = any(${notificationIds}::uuid[]) limit ${batchSize}) as ids
    ), events as (
      delete from delivery_events where delivery_id = any((select ids from doomed)::uuid[]) returning 1
    ), gone as (
      delete from deliveries where id = any((select ids from doomed)::uuid[]) returning 1
    )
    select (select count(*) from gone)::int as deliveries, (select count(*) from events)::int as events
  `.execute(db);
  return rows[0];
}

/**
 * The notifications themselves and any key still naming one. Only those with no delivery left: a
 * notification that still has some (the budget ran out) would take them all with it in one
 * statement through the cascade.
 */
async function deleteNotifications(db: Db, notificationIds: string[]): Promise<{ notifications: number; idempotencyKeys: number }> {
  const { rows } = await sql<{ notifications: number; idempotencyKeys: number }>`
    with doomed as (
      select n.id from notifications n
       where n.id = any(${notificationIds}::uuid[])
         and not exists (select 1 from deliveries d where d.notification_id = n.id)
    ), keys as (
      delete from idempotency_keys k using doomed where k.notification_id = doomed.id returning 1
    ), gone as (
      delete from notifications n using doomed where n.id = doomed.id returning 1
    )
    select (select count(*) from gone)::int as notifications, (select count(*) from keys)::int as "idempotencyKeys"
  `.execute(db);
  return rows[0];
}

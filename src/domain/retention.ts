// Retention: notifications that ended (completed, partial, failed, or cancelled and finished: their
// completed_at is set, nothing is pending, no push will be made) longer ago than the horizon are
// deleted with what hangs on them (deliveries, their events, the notification's idempotency key),
// and expired idempotency keys, webhook events (with their finished deliveries) and the hourly
// rollup's hours go too. Counted from the end, not the creation: a send scheduled months ahead
// keeps its statistics as long as one sent at once. A batch at a time: each statement is its own
// short transaction that deletes at most `batchSize` rows, so no row lock a send or an event could
// wait on is held for long, and a run stops at its time budget; the next run carries on where it
// stopped.
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  deleteDeliveriesOf,
  deleteExpiredWebhookDeliveries,
  deleteExpiredWebhookEvents,
  deleteNotifications,
  pickExpired,
} from '../db/sql/retention.ts';
import { deleteExpiredHours } from '../db/sql/statistics.ts';
import { deleteExpiredIdempotencyKeys } from './notifications.ts';

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

export type RetentionBatch = {
  table: 'idempotency_keys' | 'deliveries' | 'notifications' | 'webhook_deliveries' | 'webhook_events' | 'hourly_statistics';
  rows: number;
  ms: number;
};

export type Removed = {
  notifications: number;
  deliveries: number;
  events: number;
  idempotencyKeys: number;
  webhookEvents: number;
  webhookDeliveries: number;
  /** Hours of the hourly rollup (GET /api/v1/stats/hourly), of any application. */
  hours: number;
  /** False when the budget (or the signal) ended the run before everything due was deleted. */
  done: boolean;
};

export async function deleteExpired(em: EntityManager, options: RetentionOptions): Promise<Removed> {
  const started = performance.now();
  const removed: Removed = { notifications: 0, deliveries: 0, events: 0, idempotencyKeys: 0, webhookEvents: 0, webhookDeliveries: 0, hours: 0, done: false };
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

  // The hourly rollup's hours past the horizon: the notifications they counted are gone or going.
  for (;;) {
    if (!inTime()) return removed;
    const gone = await timed('hourly_statistics', () => deleteExpiredHours(em, options.retentionDays, options.batchSize), (count) => count);
    removed.hours += gone;
    if (gone < options.batchSize) break;
  }

  // Webhook events past the horizon, once their deliveries are done: deliveries first, then the
  // events left without any, a batch at a time.
  for (;;) {
    if (!inTime()) return removed;
    const gone = await timed('webhook_deliveries', () => deleteExpiredWebhookDeliveries(em, options.retentionDays, options.batchSize), (count) => count);
    removed.webhookDeliveries += gone;
    if (gone < options.batchSize) break;
  }
  for (;;) {
    if (!inTime()) return removed;
    const gone = await timed('webhook_events', () => deleteExpiredWebhookEvents(em, options.retentionDays, options.batchSize), (count) => count);
    removed.webhookEvents += gone;
    if (gone < options.batchSize) break;
  }

  // How many notifications a pick reads (it reads each one's user list): twice what the last pick
  // took, doubling while a pick takes all it read; at most a batch.
  let reading = 64;
  for (;;) {
    if (!inTime()) return removed;
    const ids = await pickExpired(em, {
      retentionDays: options.retentionDays,
      batchSize: options.batchSize,
      reading: Math.min(reading, options.batchSize),
    });
    if (ids.length === 0) break;
    reading = ids.length >= reading ? reading * 2 : Math.max(ids.length * 2, 16);
    let after: string | null = null;
    for (;;) {
      if (!inTime()) return removed;
      const gone = await timed('deliveries', () => deleteDeliveriesOf(em, ids, options.batchSize, after), (result) => result.deliveries);
      // The last statement of an exact multiple of a batch deletes none and names no id.
      after = gone.last ?? after;
      removed.deliveries += gone.deliveries;
      removed.events += gone.events;
      // A finished notification gets no new deliveries: fewer than a batch means none are left.
      if (gone.deliveries < options.batchSize) break;
    }
    if (!inTime()) return removed;
    const gone = await timed('notifications', () => deleteNotifications(em, ids, after), (result) => result.notifications);
    removed.notifications += gone.notifications;
    removed.idempotencyKeys += gone.idempotencyKeys;
    // Cannot happen while finished notifications get no new deliveries; if it did, the same pick
    // would come back at once: stop rather than spin until the budget ends.
    if (gone.notifications === 0) return removed;
  }
  removed.done = true;
  return removed;
}

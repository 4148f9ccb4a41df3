// Database helpers for tests: delivery rows in a given state without running a fanout, and small
// queries on the tables and on the job queue. Everything goes to the real database.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { arrayLiteral } from '../../src/db/array-literal.ts';
import type { Orm } from '../../src/db/orm.ts';
import { insertDeliveries, recordResults } from '../../src/db/sql/deliveries.ts';
import { rows, type Db } from '../../src/db/sql/execute.ts';
import type { Harness } from './harness.ts';

export type DeliveryState = 'pending' | 'accepted' | 'failed' | 'skipped';

export type DeliveryInput = {
  applicationId: string;
  notificationId: string;
  /** The installation's row (installations.id); null as after the installation was deleted. */
  installationRowId: string | null;
  /** The client's installation identifier (installations.installation_id). */
  clientInstallationId: string;
  userId: string | null;
  platform?: 'ios' | 'android';
  state?: DeliveryState;
  reason?: string | null;
  attempts?: number;
};

/**
 * One delivery in the given state, written by the statements the worker uses (so the
 * notification's counters move with it), with its attempts set after. Returns its id.
 */
export async function insertDelivery(orm: Orm, delivery: DeliveryInput): Promise<string> {
  const id = randomUUID();
  const state = delivery.state ?? 'accepted';
  const em = orm.em.fork();
  await insertDeliveries(em, [
    {
      applicationId: delivery.applicationId,
      notificationId: delivery.notificationId,
      deliveryId: id,
      rowId: delivery.installationRowId as string,
      installationId: delivery.clientInstallationId,
      userId: delivery.userId as string,
      platform: delivery.platform ?? 'ios',
      providerIdentifier: 'unused',
      permission: 'authorized',
      lastSeenAt: new Date(),
      deviceLocale: null,
      state: state === 'skipped' ? 'skipped' : 'pending',
      reason: state === 'skipped' ? (delivery.reason ?? null) : null,
      locale: null,
      truncation: null,
    },
  ]);
  if (state !== 'pending' && state !== 'skipped') {
    await recordResults(em, [{ deliveryId: id, state, reason: delivery.reason ?? null, providerMessageId: null }], false);
  }
  await em.execute('update deliveries set attempts = ? where id = ?', [delivery.attempts ?? (state === 'skipped' ? 0 : 1), id]);
  return id;
}

/** The single integer a `select count(*)::int as count ...` answers. */
export async function countRows(orm: Orm, sql: string, params: unknown[] = []): Promise<number> {
  const [row] = await orm.em.fork().execute<{ count: number }[]>(sql, params);
  return Number(row.count);
}

export function countNotifications(orm: Orm, applicationId: string): Promise<number> {
  return countRows(orm, 'select count(*)::int as count from notifications where application_id = ?', [applicationId]);
}

export function countFanoutJobs(harness: Pick<Harness, 'orm' | 'queueSchema'>, applicationId: string): Promise<number> {
  return countRows(
    harness.orm,
    `select count(*)::int as count from ${harness.queueSchema}.job where name = 'fanout' and data->>'applicationId' = ?`,
    [applicationId],
  );
}

export function countEvents(orm: Orm, applicationId: string, eventId?: string): Promise<number> {
  return eventId === undefined
    ? countRows(orm, 'select count(*)::int as count from delivery_events where application_id = ?', [applicationId])
    : countRows(orm, 'select count(*)::int as count from delivery_events where application_id = ? and event_id = ?', [
        applicationId,
        eventId,
      ]);
}

export type FanoutJobRow = { id: string; name: string; state: string; data: Record<string, unknown>; xmin: string };

export async function fanoutJob(harness: Pick<Harness, 'orm' | 'queueSchema'>, id: string): Promise<FanoutJobRow | undefined> {
  const [job] = await harness.orm.em
    .fork()
    .execute<FanoutJobRow[]>(`select id::text, name, state::text, data, xmin::text from ${harness.queueSchema}.job where id = ?`, [id]);
  return job;
}

/** The id of the transaction that wrote a row (Postgres' xmin). */
export async function writingTransaction(orm: Orm, table: 'notifications' | 'idempotency_keys', where: string, params: unknown[]): Promise<string> {
  const [row] = await orm.em.fork().execute<{ xmin: string }[]>(`select xmin::text from ${table} where ${where}`, params);
  return row.xmin;
}

/** Ages an idempotency key, as if it had been used that many hours ago. */
export async function ageIdempotencyKey(orm: Orm, applicationId: string, key: string, hours: number): Promise<void> {
  await orm.em
    .fork()
    .execute(
      'update idempotency_keys set created_at = created_at - make_interval(hours => ?) where application_id = ? and key = ?',
      [hours, applicationId, key],
    );
}

/** Dates a recorded event's received_at, which the database sets from its own clock. */
export async function setEventReceivedAt(orm: Orm, applicationId: string, eventId: string, at: Date): Promise<void> {
  await orm.em.fork().execute('update delivery_events set received_at = ? where application_id = ? and event_id = ?', [
    at,
    applicationId,
    eventId,
  ]);
}

export async function setInstallationLastSeen(orm: Orm, installationRowId: string, at: Date): Promise<void> {
  await orm.em.fork().execute('update installations set last_seen_at = ? where id = ?', [at, installationRowId]);
}

/** A notification's statistics before anything happened to it. */
export const zeroStatistics = { users: 0, installations: 0, accepted: 0, received: 0, displayed: 0, opened: 0, failed: 0, skipped: 0 };

export type DeliveryCounts = {
  notificationId: string;
  users: number;
  installations: number;
  pending: number;
  accepted: number;
  failed: number;
  skipped: number;
  received: number;
  displayed: number;
  opened: number;
};

/**
 * A notification's deliveries counted from the rows, by state and by first event: what the
 * counters on the notification (kept by insertDeliveries, recordResults and reportEvent) must
 * always equal; tests and benchmarks check them with it. Notifications without deliveries are absent.
 * `users`: distinct users, an installation without a user (only a broadcast reaches those) counting as one.
 */
export async function deliveryCounts(db: Db, notificationIds: string[]): Promise<DeliveryCounts[]> {
  if (notificationIds.length === 0) return [];
  return rows(
    db,
    sql<DeliveryCounts>`
      select notification_id as "notificationId",
             (count(distinct user_id) + count(*) filter (where user_id is null))::int as users,
             count(*)::int as installations,
             (count(*) filter (where state = 'pending'))::int as pending,
             (count(*) filter (where state = 'accepted'))::int as accepted,
             (count(*) filter (where state = 'failed'))::int as failed,
             (count(*) filter (where state = 'skipped'))::int as skipped,
             count(received_at)::int as received,
             count(displayed_at)::int as displayed,
             count(opened_at)::int as opened
        from deliveries
       where notification_id = any(${arrayLiteral(notificationIds)}::uuid[])
       group by notification_id`,
  );
}

/**
 * A notification's statistics counted from its delivery rows (deliveryCounts), in the
 * API's shape: what the counters on the notification must equal.
 */
export async function recountedStatistics(orm: Orm, notificationId: string) {
  const [row] = await deliveryCounts(orm.em.fork(), [notificationId]);
  if (!row) return { ...zeroStatistics };
  const { notificationId: _id, pending: _pending, ...statistics } = row;
  return statistics;
}

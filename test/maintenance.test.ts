import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { loadConfig } from '../src/service/config.ts';
import { deleteExpiredIdempotencyKeys } from '../src/domain/notifications.ts';
import { deleteNotifications } from '../src/db/sql/retention.ts';
import { deleteExpired, type RetentionBatch, type RetentionOptions } from '../src/domain/retention.ts';
import { queues } from '../src/worker/queue.ts';
import { finishedJobSeconds, startMaintenance } from '../src/worker/maintenance.ts';
import { countRows } from './support/deliveries.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { waitFor } from './support/receiver.ts';

let harness: Harness;
beforeAll(async () => {
  // Its own job-queue schema: the maintenance worker started below takes only this file's jobs.
  harness = await startHarness({ queueSchema: 'maintenance_test' });
});
afterAll(() => harness.close());

type Seed = {
  status: 'queued' | 'processing' | 'completed' | 'partial' | 'failed' | 'cancelled';
  ageDays: number;
  /** Days since it ended (its completed_at); null: not ended. Ended statuses default to `ageDays`. */
  endedDaysAgo?: number | null;
  deliveries?: number;
  /** Events per delivery (at most 4, one of each type). */
  events?: number;
  /** An Idempotency-Key naming the notification, used this many days ago. */
  keyAgeDays?: number;
};

/** A notification as the fanout leaves it, created `ageDays` ago, with one user per delivery. */
async function seed(applicationId: string, notification: Seed): Promise<string> {
  const em = harness.orm.em.fork();
  const id = randomUUID();
  const deliveries = notification.deliveries ?? 0;
  const ends = ['completed', 'partial', 'failed', 'cancelled'].includes(notification.status);
  const endedDaysAgo = notification.endedDaysAgo === undefined ? (ends ? notification.ageDays : null) : notification.endedDaysAgo;
  await em.execute(
    `insert into notifications (id, application_id, status, title, data, options, user_ids, created_at, completed_at)
     select ?, ?, ?, 'old news', '{}', '{}', array(select 'user-' || n from generate_series(1, ?) n),
            now() - ?::float8 * interval '1 day', now() - ?::float8 * interval '1 day'`,
    [id, applicationId, notification.status, deliveries, notification.ageDays, endedDaysAgo],
  );
  await em.execute(
    `insert into deliveries (id, application_id, notification_id, client_installation_id, user_id, platform, state, attempts, created_at)
     select gen_random_uuid(), ?, ?, 'phone-' || n, 'user-' || n, 'ios', 'accepted', 1, now() - ?::float8 * interval '1 day'
       from generate_series(1, ?) n`,
    [applicationId, id, notification.ageDays, deliveries],
  );
  await em.execute(
    `insert into delivery_events (id, application_id, event_id, delivery_id, client_installation_id, type, occurred_at, received_at)
     select gen_random_uuid(), d.application_id, gen_random_uuid(), d.id, d.client_installation_id, t.type, d.created_at, d.created_at
       from deliveries d, unnest((array['received', 'displayed', 'opened', 'dismissed'])[1:?]) as t(type)
      where d.notification_id = ?`,
    [notification.events ?? 0, id],
  );
  if (notification.keyAgeDays !== undefined) {
    await em.execute(
      `insert into idempotency_keys (id, application_id, key, request_hash, notification_id, created_at)
       values (gen_random_uuid(), ?, ?, 'hash', ?, now() - ?::float8 * interval '1 day')`,
      [applicationId, `key-${id}`, id, notification.keyAgeDays],
    );
  }
  return id;
}

/** What is left of the application: notification ids, and how many deliveries, events and keys. */
async function remaining(applicationId: string) {
  const count = (table: string) => countRows(harness.orm, `select count(*)::int as count from ${table} where application_id = ?`, [applicationId]);
  const rows = await harness.orm.em
    .fork()
    .execute<{ id: string }[]>('select id from notifications where application_id = ? order by id', [applicationId]);
  return {
    notifications: rows.map((row) => row.id).sort(),
    deliveries: await count('deliveries'),
    events: await count('delivery_events'),
    keys: await count('idempotency_keys'),
  };
}

const retention = (options: Partial<RetentionOptions> = {}) =>
  deleteExpired(harness.orm.em.fork(), { retentionDays: 30, batchSize: 1000, budgetMs: 60_000, ...options });

test('idempotency keys older than 24 hours are deleted, younger ones kept', async () => {
  const application = await harness.newApplication();
  const token = await application.token(['notifications:send']);
  const send = (key: string) =>
    request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${token}`)
      .set('Idempotency-Key', key)
      .send({ recipients: { user_ids: ['u1'] }, notification: { title: 'hi' } })
      .expect(202);
  await send('old');
  await send('fresh');
  const em = harness.orm.em.fork();
  await em.execute(
    `update idempotency_keys set created_at = now() - interval '24 hours 1 minute' where application_id = ? and key = 'old'`,
    [application.id],
  );

  await deleteExpiredIdempotencyKeys(harness.orm.em.fork(), 100);

  const keys = await em.execute<{ key: string }[]>('select key from idempotency_keys where application_id = ?', [
    application.id,
  ]);
  expect(keys.map((row) => row.key)).toEqual(['fresh']);
});

test('notifications that ended before the retention go with their deliveries, events and keys; recent and unfinished ones stay', async () => {
  const application = await harness.newApplication();
  const seeded = { deliveries: 3, events: 2 };
  // A key is as old as its notification: it expired long ago and goes as an expired key.
  await seed(application.id, { ...seeded, status: 'completed', ageDays: 31, keyAgeDays: 31 });
  await seed(application.id, { ...seeded, status: 'partial', ageDays: 31 });
  // Whatever key still names a deleted notification goes with it.
  await seed(application.id, { ...seeded, status: 'failed', ageDays: 31, keyAgeDays: 0 });
  // A cancelled one ends too, once its cancel is finished.
  await seed(application.id, { status: 'cancelled', ageDays: 31 });
  const kept = [
    await seed(application.id, { ...seeded, status: 'completed', ageDays: 29 }),
    await seed(application.id, { ...seeded, status: 'failed', ageDays: 29.9 }),
    await seed(application.id, { ...seeded, status: 'completed', ageDays: 0.5, keyAgeDays: 0.5 }),
    // Not finished, however old: something may still be written to it.
    await seed(application.id, { ...seeded, status: 'processing', ageDays: 40 }),
    await seed(application.id, { status: 'queued', ageDays: 40 }),
    // Cancelled, its cancel cut short (its next job finishes it): not ended yet.
    await seed(application.id, { ...seeded, status: 'cancelled', ageDays: 40, endedDaysAgo: null }),
  ];

  const removed = await retention();

  expect(removed).toMatchObject({ notifications: 4, deliveries: 9, events: 18, done: true });
  expect(removed.idempotencyKeys).toBeGreaterThanOrEqual(2);
  expect(await remaining(application.id)).toEqual({ notifications: kept.sort(), deliveries: 15, events: 30, keys: 1 });
});

test('the retention is counted in days from the end: a send scheduled a year ahead that ended yesterday stays', async () => {
  const application = await harness.newApplication();
  await seed(application.id, { status: 'completed', ageDays: 7.5, deliveries: 1 });
  const fresh = await seed(application.id, { status: 'completed', ageDays: 6.5, deliveries: 1 });
  const scheduledLongAgo = await seed(application.id, { status: 'completed', ageDays: 366, endedDaysAgo: 1, deliveries: 1 });

  await retention({ retentionDays: 7 });

  expect((await remaining(application.id)).notifications).toEqual([fresh, scheduledLongAgo].sort());
});

test('more rows than one batch are all deleted, no statement deleting more than a batch', async () => {
  const application = await harness.newApplication();
  // 4 × 7 = 28 deliveries, 56 events, in batches of 5.
  for (let index = 0; index < 4; index++) await seed(application.id, { status: 'completed', ageDays: 45, deliveries: 7, events: 2 });
  for (let index = 0; index < 12; index++) await seed(application.id, { status: 'partial', ageDays: 45, deliveries: 1 });
  const batches: RetentionBatch[] = [];

  const removed = await retention({ batchSize: 5, onBatch: (batch) => batches.push(batch) });

  expect(removed).toMatchObject({ notifications: 16, deliveries: 40, events: 56, done: true });
  expect(await remaining(application.id)).toEqual({ notifications: [], deliveries: 0, events: 0, keys: 0 });
  for (const batch of batches) expect(batch.rows).toBeLessThanOrEqual(5);
  const deliveryBatches = batches.filter((batch) => batch.table === 'deliveries' && batch.rows > 0);
  expect(deliveryBatches.length).toBeGreaterThanOrEqual(8);
  // The twelve one-delivery notifications are taken about five at a time, not one per statement.
  expect(batches.filter((batch) => batch.table === 'notifications').length).toBeLessThan(16);
});

test('a notification of an exact multiple of a batch goes once its last delivery is deleted', async () => {
  const application = await harness.newApplication();
  // 10 deliveries in batches of 5: the third statement deletes none and names no last id.
  const id = await seed(application.id, { status: 'completed', ageDays: 45, deliveries: 10, events: 1 });

  const removed = await retention({ batchSize: 5 });

  expect(removed).toMatchObject({ deliveries: 10, done: true });
  expect(await remaining(application.id)).toEqual({ notifications: [], deliveries: 0, events: 0, keys: 0 });
  expect((await harness.orm.em.fork().execute('select 1 from notifications where id = ?', [id])).length).toBe(0);
});

test('a notification with a delivery left after the last one deleted stays until a run deletes it', async () => {
  const application = await harness.newApplication();
  const id = await seed(application.id, { status: 'completed', ageDays: 45, deliveries: 3 });
  const [first] = await harness.orm.em
    .fork()
    .execute<{ id: string }[]>('select id::text from deliveries where notification_id = ? order by id limit 1', [id]);

  expect(await deleteNotifications(harness.orm.em.fork(), [id], first.id)).toEqual({ notifications: 0, idempotencyKeys: 0 });
  expect(await remaining(application.id)).toMatchObject({ notifications: [id], deliveries: 3 });
  // A run deletes the deliveries first, and then the notification.
  expect(await retention()).toMatchObject({ notifications: 1, deliveries: 3, done: true });
});

test('a run stops at its time budget or when its worker stops, and the next one carries on', async () => {
  const application = await harness.newApplication();
  await seed(application.id, { status: 'completed', ageDays: 60, deliveries: 2 });

  expect(await retention({ budgetMs: 0 })).toMatchObject({ notifications: 0, deliveries: 0, done: false });
  expect(await retention({ signal: AbortSignal.abort() })).toMatchObject({ notifications: 0, done: false });
  expect((await remaining(application.id)).deliveries).toBe(2);

  expect(await retention()).toMatchObject({ notifications: 1, deliveries: 2, done: true });
});

test('the scheduled job runs retention with the configured days; pg-boss keeps finished jobs a week at most', async () => {
  expect(finishedJobSeconds(30)).toBe(7 * 86_400);
  expect(finishedJobSeconds(2)).toBe(2 * 86_400);
  const application = await harness.newApplication();
  const old = await seed(application.id, { status: 'completed', ageDays: 3, deliveries: 2, events: 1 });
  const fresh = await seed(application.id, { status: 'completed', ageDays: 1, deliveries: 2 });

  await startMaintenance(harness.boss, harness.orm, harness.logger, { retentionDays: 2 });
  for (const name of [...Object.values(queues), 'maintenance']) {
    expect((await harness.boss.getQueue(name))?.deleteAfterSeconds).toBe(2 * 86_400);
  }
  // What the schedule inserts every 15 minutes.
  await harness.boss.send('maintenance', {});
  await waitFor(() => remaining(application.id), (left) => !left.notifications.includes(old), 10_000);

  expect(await remaining(application.id)).toEqual({ notifications: [fresh], deliveries: 2, events: 0, keys: 0 });

  // A job finished three days ago is gone at pg-boss's next maintenance pass; one finished a day ago stays.
  const finished = async (days: number) => {
    const id = (await harness.boss.send(queues.deliverFailed, { days }))!;
    await harness.orm.em
      .fork()
      .execute(`update maintenance_test.job set state = 'completed', completed_on = now() - make_interval(days => ?) where id = ?`, [days, id]);
    return id;
  };
  const [threeDays, oneDay] = [await finished(3), await finished(1)];
  await harness.boss.supervise(queues.deliverFailed);
  expect(await harness.boss.getJobById(queues.deliverFailed, threeDays)).toBeNull();
  expect(await harness.boss.getJobById(queues.deliverFailed, oneDay)).not.toBeNull();
});

test('HERALD_RETENTION_DAYS is a whole number of days, at least 1; 30 when unset', () => {
  expect(loadConfig({}).HERALD_RETENTION_DAYS).toBe(30);
  expect(loadConfig({ HERALD_RETENTION_DAYS: '1' }).HERALD_RETENTION_DAYS).toBe(1);
  for (const value of ['0', '-1', '1.5', 'thirty']) {
    expect(() => loadConfig({ HERALD_RETENTION_DAYS: value })).toThrow(/HERALD_RETENTION_DAYS/);
  }
});

test("the hourly rollup's hours older than the retention go, a batch at a time; younger ones stay", async () => {
  const application = await harness.newApplication();
  const em = harness.orm.em.fork();
  // 5 hours past the 30 days, 3 within.
  await em.execute(
    `insert into hourly_statistics (application_id, hour, sends)
     select ?, date_trunc('hour', now(), 'UTC') - make_interval(hours => h), 1 from unnest(array[1, 24, 719, 721, 722, 800, 900, 2000]) h`,
    [application.id],
  );
  const batches: RetentionBatch[] = [];
  const removed = await retention({ batchSize: 2, onBatch: (batch) => batches.push(batch) });
  expect(removed.hours).toBeGreaterThanOrEqual(5);
  expect(batches.filter((batch) => batch.table === 'hourly_statistics').every((batch) => batch.rows <= 2)).toBe(true);
  const left = await em.execute<{ hours: number }[]>(
    `select extract(epoch from date_trunc('hour', now(), 'UTC') - hour)::int / 3600 as hours from hourly_statistics where application_id = ? order by hour desc`,
    [application.id],
  );
  expect(left.map((row) => row.hours)).toEqual([1, 24, 719]);
});

// Upgrading a database that already holds data: the migration that adds the statistics counters
// fills them from the delivery rows, so a notification sent before the upgrade reads the same
// statistics after it; credentials already accepted stay healthy; and the index of a user's
// deliveries, which an operator may have built ahead with CREATE INDEX CONCURRENTLY, ends valid.
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { openOrm, type Orm } from '../src/db/orm.ts';
import { findNotificationRow } from '../src/db/sql/notifications.ts';
import { recountedStatistics } from './support/deliveries.ts';
import { databaseUrl } from './support/harness.ts';
import { createDatabase } from './support/seed.ts';

let orm: Orm;
let drop: () => Promise<void>;

beforeAll(async () => {
  const database = await createDatabase(databaseUrl(), `herald_upgrade_${randomBytes(4).toString('hex')}`);
  drop = database.drop;
  orm = await openOrm(database.url, 2);
});
afterAll(async () => {
  await orm.close();
  await drop();
});

test('the statistics counters added by an upgrade equal a count of the deliveries already there', async () => {
  // The schema as it was before the counters.
  await orm.migrator.up({ to: 'Migration20261124130000' });
  const em = orm.em.fork();
  const applicationId = randomUUID();
  await em.execute(`insert into applications (id, name, created_at) values (?, 'before the upgrade', now())`, [applicationId]);
  const notification = async (userIds: string[]) => {
    const id = randomUUID();
    await em.execute(
      `insert into notifications (id, application_id, status, title, data, options, user_ids, created_at, completed_at)
       values (?, ?, 'partial', 'Hi', '{}', '{}', ?, now(), now())`,
      [id, applicationId, `{${userIds.join(',')}}`],
    );
    return id;
  };
  const sent = await notification(['u1', 'u2', 'u3', 'u4']);
  const empty = await notification(['nobody']);
  const delivery = async (userId: string, platform: string, state: string, events: { received?: boolean; displayed?: boolean; opened?: boolean } = {}) => {
    await em.execute(
      `insert into deliveries (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform,
                               state, attempts, created_at, received_at, displayed_at, opened_at)
       values (?, ?, ?, null, ?, ?, ?, ?, 1, now(), ?, ?, ?)`,
      [
        randomUUID(), applicationId, sent, `${userId}-${platform}`, userId, platform, state,
        events.received ? new Date() : null, events.displayed ? new Date() : null, events.opened ? new Date() : null,
      ],
    );
  };
  await delivery('u1', 'ios', 'accepted', { received: true, opened: true });
  await delivery('u1', 'android', 'failed');
  await delivery('u2', 'ios', 'skipped');
  await delivery('u3', 'ios', 'accepted', { received: true, displayed: true });
  await delivery('u3', 'android', 'pending');

  await orm.migrator.up();

  const counters = async (id: string) => {
    const row = (await findNotificationRow(orm.em.fork(), applicationId, id))!;
    return {
      users: row.usersCount,
      installations: row.installationsCount,
      accepted: row.acceptedCount,
      received: row.receivedCount,
      displayed: row.displayedCount,
      opened: row.openedCount,
      failed: row.failedCount,
      skipped: row.skippedCount,
    };
  };
  expect(await counters(sent)).toEqual({ users: 3, installations: 5, accepted: 2, received: 2, displayed: 1, opened: 1, failed: 1, skipped: 1 });
  expect(await counters(sent)).toEqual(await recountedStatistics(orm, sent));
  expect(await counters(empty)).toEqual(await recountedStatistics(orm, empty));
});

test('the upgrade that adds `unverified` keeps healthy the credentials a provider has accepted pushes of since they were set', async () => {
  const { url, drop: dropDatabase } = await createDatabase(databaseUrl(), `herald_verified_${randomBytes(4).toString('hex')}`);
  const before = await openOrm(url, 2);
  try {
    await before.migrator.up({ to: 'Migration20261129100000' });
    const em = before.em.fork();
    const applicationId = randomUUID();
    await em.execute(`insert into applications (id, name, created_at) values (?, 'before the upgrade', now())`, [applicationId]);
    const credential = async (provider: string, updatedAt: string) => {
      const id = randomUUID();
      await em.execute(
        `insert into provider_credentials (id, application_id, provider, settings, secret, created_at, updated_at) values (?, ?, ?, '{}', 'v2.x.y.z', now(), ?)`,
        [id, applicationId, provider, updatedAt],
      );
      return id;
    };
    const apns = await credential('apns', '2026-01-01T00:00:00Z');
    // Set again after the last push FCM accepted: not those credentials.
    const fcm = await credential('fcm', '2026-03-01T00:00:00Z');
    const notificationId = randomUUID();
    await em.execute(`insert into notifications (id, application_id, status, title, data, options, user_ids, created_at) values (?, ?, 'completed', 'Hi', '{}', '{}', '{u1}', now())`, [
      notificationId,
      applicationId,
    ]);
    for (const [platform, state, completedAt] of [
      ['ios', 'accepted', '2026-02-01T00:00:00Z'],
      ['ios', 'failed', '2026-02-02T00:00:00Z'],
      ['android', 'accepted', '2026-02-01T00:00:00Z'],
    ]) {
      await em.execute(
        `insert into deliveries (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform, state, attempts, created_at, completed_at)
         values (?, ?, ?, null, ?, 'u1', ?, ?, 1, now(), ?)`,
        [randomUUID(), applicationId, notificationId, randomUUID(), platform, state, completedAt],
      );
    }
    await before.migrator.up({ to: 'Migration20261201090000' });
    const verified = await em.execute<{ id: string; verified_at: string | null }[]>(`select id, verified_at from provider_credentials`);
    expect(Object.fromEntries(verified.map((row) => [row.id, row.verified_at && new Date(row.verified_at).toISOString()]))).toEqual({
      [apns]: '2026-02-01T00:00:00.000Z',
      [fcm]: null,
    });
  } finally {
    await before.close();
    await dropDatabase();
  }
});

describe("the index of a user's deliveries", () => {
  const index = 'deliveries_application_id_user_id_id_index';

  /** A database migrated up to the one before the index, with two deliveries of one user, and a session outside any transaction. */
  async function beforeTheIndex() {
    const database = await createDatabase(databaseUrl(), `herald_user_index_${randomBytes(4).toString('hex')}`);
    const before = await openOrm(database.url, 2);
    await before.migrator.up({ to: 'Migration20261201090000' });
    const session = new pg.Client({ connectionString: database.url });
    await session.connect();
    const applicationId = randomUUID();
    const notificationId = randomUUID();
    await session.query(`insert into applications (id, name, created_at) values ($1, 'before the upgrade', now())`, [applicationId]);
    await session.query(`insert into notifications (id, application_id, status, title, data, options, user_ids, created_at) values ($1, $2, 'completed', 'Hi', '{}', '{}', '{u1}', now())`, [
      notificationId,
      applicationId,
    ]);
    for (const installation of ['phone', 'tablet']) {
      await session.query(
        `insert into deliveries (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform, state, attempts, created_at)
         values ($1, $2, $3, null, $4, 'u1', 'ios', 'accepted', 1, now())`,
        [randomUUID(), applicationId, notificationId, installation],
      );
    }
    const found = async () =>
      (
        await session.query<{ oid: number; valid: boolean; unique: boolean; definition: string }>(
          `select c.oid::int, i.indisvalid as valid, i.indisunique as unique, pg_get_indexdef(c.oid) as definition
             from pg_class c join pg_index i on i.indexrelid = c.oid where c.relname = $1`,
          [index],
        )
      ).rows;
    return {
      orm: before,
      session,
      found,
      async close() {
        await session.end();
        await before.close();
        await database.drop();
      },
    };
  }

  test('built ahead of the upgrade with CREATE INDEX CONCURRENTLY, it is kept by the migration', async () => {
    const database = await beforeTheIndex();
    try {
      await database.session.query(`create index concurrently "${index}" on deliveries (application_id, user_id, id)`);
      const [built] = await database.found();
      await database.orm.migrator.up();
      expect(await database.found()).toEqual([built]);
      expect(built).toMatchObject({ valid: true, definition: expect.stringContaining('(application_id, user_id, id)') });
    } finally {
      await database.close();
    }
  });

  test('a concurrent build that failed (an invalid index of that name) is replaced by a valid one', async () => {
    const database = await beforeTheIndex();
    try {
      // Unique over the user's two deliveries: the build fails and leaves its index, invalid.
      await expect(database.session.query(`create unique index concurrently "${index}" on deliveries (application_id, user_id)`)).rejects.toThrow(/could not create unique index/);
      expect(await database.found()).toEqual([expect.objectContaining({ valid: false, unique: true })]);
      await database.orm.migrator.up();
      expect(await database.found()).toEqual([
        expect.objectContaining({ valid: true, unique: false, definition: expect.stringContaining('(application_id, user_id, id)') }),
      ]);
    } finally {
      await database.close();
    }
  });

  test('without one, the migration builds it', async () => {
    const database = await beforeTheIndex();
    try {
      await database.orm.migrator.up();
      expect(await database.found()).toEqual([expect.objectContaining({ valid: true, definition: expect.stringContaining('(application_id, user_id, id)') })]);
    } finally {
      await database.close();
    }
  });
});

test('the upgrade that adds audiences keeps what a notification and an installation read: target_users from user_ids, tags {}', async () => {
  const { url, drop: dropDatabase } = await createDatabase(databaseUrl(), `herald_audiences_${randomBytes(4).toString('hex')}`);
  const before = await openOrm(url, 2);
  try {
    await before.migrator.up({ to: 'Migration20261203133700' });
    const em = before.em.fork();
    const applicationId = randomUUID();
    await em.execute(`insert into applications (id, name, created_at) values (?, 'before the upgrade', now())`, [applicationId]);
    const notificationId = randomUUID();
    await em.execute(
      `insert into notifications (id, application_id, status, title, data, options, user_ids, created_at) values (?, ?, 'queued', 'Hi', '{}', '{}', '{u1,u2,u3}', now())`,
      [notificationId, applicationId],
    );
    await em.execute(
      `insert into installations (id, application_id, installation_id, platform, provider_identifier, status, permission, device,
                                  registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
       values (?, ?, 'phone', 'ios', 'token', 'active', 'authorized', '{}', now(), now(), now(), now())`,
      [randomUUID(), applicationId],
    );
    await before.migrator.up();
    const notification = (await findNotificationRow(before.em.fork(), applicationId, notificationId))!;
    expect({ targetUsers: notification.targetUsers, audience: notification.audience, segment: notification.segment }).toEqual({ targetUsers: 3, audience: null, segment: null });
    const [installation] = await before.em.fork().execute<{ tags: unknown }[]>(`select tags from installations where application_id = ?`, [applicationId]);
    expect(installation.tags).toEqual({});
  } finally {
    await before.close();
    await dropDatabase();
  }
});

// The `all: true` count kept up to date by installation writes (Migration20261206090000's
// triggers) equals the same count computed from the installations, after every kind of write that
// changes whom it counts: registrations (new, replaced, moving user, permission, platform or
// identifier), patches (user detached, permission), provider invalidations, identifiers becoming
// shared, deletions, plain SQL, concurrent registrations of one user, and the fold housekeeping
// does; and an application's deletion takes its kept rows with it. A registration ended by a
// deadlock over those rows is tried again.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import request from 'supertest';
import { audienceCondition, countAudience, eligibleForVisiblePush, foldAudienceTotals } from '../src/db/sql/audiences.ts';
import { type Db, rows } from '../src/db/sql/execute.ts';
import {
  deleteInstallationRow,
  findInstallationRow,
  invalidateInstallations,
  patchInstallation,
  upsertInstallation,
  type InstallationReplacement,
} from '../src/db/sql/installations.ts';
import type { Audience } from '../src/domain/audiences.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { waitFor } from './support/receiver.ts';

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

type Registration = Partial<Omit<InstallationReplacement, 'device'>> & { seenDaysAgo?: number };

async function register(applicationId: string, installationId: string, { seenDaysAgo = 0, ...given }: Registration = {}, db: Db = harness.orm.em.fork()) {
  await upsertInstallation(
    db,
    { applicationId, installationId },
    {
      platform: 'android',
      providerIdentifier: `token-${installationId}`,
      permission: 'authorized',
      userId: `user-${installationId}`,
      ...given,
      device: { app_version: null, os_version: null, model: null, locale: installationId.startsWith('a') ? 'de_DE' : null, timezone: null },
    },
    new Date(Date.now() - seenDaysAgo * 86_400_000),
  );
}

const count = (applicationId: string, audience: Audience = { all: true }) =>
  harness.orm.em.fork().transactional((tx) => countAudience(tx, applicationId, audience));

/**
 * The count by its definition, from the installations alone: the eligible ones matching, one per
 * device (platform and identifier), kept by the most recently seen, and the distinct users.
 */
async function computed(applicationId: string, audience: Audience) {
  const [found] = await rows(
    harness.orm.em.fork(),
    sql<{ installations: number; users: number }>`
      with devices as (
        select distinct on (i.platform, i.provider_identifier) i.user_id from installations i
         where i.application_id = ${applicationId} and i.status = 'active' and ${eligibleForVisiblePush} and ${audienceCondition(audience)}
         order by i.platform, i.provider_identifier, i.last_seen_at desc, i.id desc
      )
      select count(*)::int as installations, (count(distinct user_id) + count(*) filter (where user_id is null))::int as users from devices`,
  );
  return found;
}

const audiences: Audience[] = [
  { all: true },
  { platforms: ['ios'] },
  { platforms: ['ios', 'android', 'web'] },
  { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] },
  { tags: [{ key: 'plan', op: 'not_exists' }], platforms: ['android'] },
  { active_within_days: 30 },
  { platforms: ['android'], tags: [{ key: 'plan', op: 'in', values: ['pro', 'free'] }], active_within_days: 30 },
  { locales: ['de'] },
];

/** The kept rows per user against the same grouping of the installations themselves. */
async function keptUsers(applicationId: string) {
  const db = harness.orm.em.fork();
  const kept = await rows(
    db,
    sql<{ user: string; n: number }>`select user_id as "user", installations as n from audience_users
                                       where application_id = ${applicationId} and installations > 0 order by 1`,
  );
  const live = await rows(
    db,
    sql<{ user: string; n: number }>`select user_id as "user", count(*)::int as n from installations i
                                       where application_id = ${applicationId} and user_id is not null and status = 'active'
                                         and ${eligibleForVisiblePush} and not identifier_shared
                                       group by user_id order by 1`,
  );
  return { kept, live };
}

async function expectKeptEqualsComputed(applicationId: string) {
  const { kept, live } = await keptUsers(applicationId);
  expect(kept).toEqual(live);
  for (const audience of audiences) {
    expect({ audience, count: await count(applicationId, audience) }).toEqual({ audience, count: await computed(applicationId, audience) });
  }
}

test('after a mix of every write that changes whom it counts, the kept count equals the computed one', async () => {
  const app = (await harness.newApplication('kept')).id;
  const other = (await harness.newApplication('kept-other')).id;
  const db = () => harness.orm.em.fork();

  // New registrations: users with one or several installations, anonymous ones, ineligible ones.
  for (const name of ['a1', 'a2', 'a3']) await register(app, name, { userId: 'alice' });
  await register(app, 'b1', { userId: 'bob', platform: 'ios' });
  await register(app, 'anon1', { userId: null });
  await register(app, 'anon2', { userId: null, platform: 'ios' });
  await register(app, 'denied', { userId: 'dora', permission: 'denied' });
  await register(app, 'undecided', { userId: 'uma', platform: 'ios', permission: 'not_determined' });
  await register(other, 'o1', { userId: 'alice' });
  expect(await count(app)).toEqual({ installations: 6, users: 4 });
  await expectKeptEqualsComputed(app);

  // Tags given, and activity: long ago, and on either side of the 30 days' cutoff (a second apart,
  // so nearly always the same UTC day: the day the count checks against last_seen_at itself).
  await register(app, 't1', { userId: 'tess', tags: { plan: 'pro' }, seenDaysAgo: 40 });
  await register(app, 't2', { userId: 'tess', tags: { plan: 'free' }, platform: 'ios' });
  await register(app, 't3', { userId: 'tom', tags: { plan: 'free' } });
  await register(app, 't4', { userId: 'tim', tags: { plan: 'pro' } });
  const seen = (installationId: string, at: string) =>
    db().execute(`update installations set last_seen_at = ${at} where application_id = ? and installation_id = ?`, [app, installationId]);
  await seen('t3', `now() - interval '30 days' + interval '1 second'`);
  await seen('t4', `now() - interval '30 days' - interval '1 second'`);
  await expectKeptEqualsComputed(app);
  // Seen again (an event, a launch): active again.
  await seen('t1', 'now()');
  await seen('t4', 'now()');
  await expectKeptEqualsComputed(app);

  // Replacements: the same PUT again (nothing changes), a user moved, permission and platform changed.
  await register(app, 'a1', { userId: 'alice' });
  await register(app, 'a2', { userId: 'bob' });
  await register(app, 'undecided', { userId: 'uma', platform: 'ios', permission: 'authorized' });
  await register(app, 'denied', { userId: 'dora', permission: 'authorized' });
  await register(app, 'b1', { userId: 'bob', platform: 'ios', permission: 'not_determined' });
  await register(app, 'anon2', { userId: null, platform: 'android' });
  await expectKeptEqualsComputed(app);

  // Patches: a user detached, another attached, a permission denied, one only tagged.
  const patch = (installationId: string, change: Parameters<typeof patchInstallation>[2]) =>
    patchInstallation(db(), { applicationId: app, installationId }, change, new Date(), 64);
  await patch('a3', { userId: null });
  await patch('anon1', { userId: 'carol' });
  await patch('a1', { permission: 'denied' });
  await patch('a2', { tags: { plan: 'pro' } });
  await patch('t3', { tags: { plan: null } });
  await patch('t2', { tags: { plan: 'pro' } });
  await expectKeptEqualsComputed(app);

  // A provider invalidates one; its new token revives it; another is invalidated for good.
  const invalidate = async (installationId: string) => {
    const row = (await findInstallationRow(db(), { applicationId: app, installationId }))!;
    await invalidateInstallations(db(), [{ installationRowId: row.id, providerIdentifier: row.providerIdentifier, reason: 'Unregistered', providerTimestamp: null }]);
  };
  await invalidate('a2');
  await invalidate('anon2');
  await expectKeptEqualsComputed(app);
  await register(app, 'a2', { userId: 'bob', providerIdentifier: 'fresh-token' });
  await expectKeptEqualsComputed(app);

  // Identifiers becoming shared: both holders leave the kept part and are counted by identifier.
  await register(app, 'c1', { userId: 'carol', providerIdentifier: 'one-device' });
  await register(app, 'c2', { userId: 'dora', providerIdentifier: 'one-device' });
  await expectKeptEqualsComputed(app);

  // Deletions, and writes of plain SQL (an operator's, a future statement's).
  expect(await deleteInstallationRow(db(), { applicationId: app, installationId: 'b1' })).toBe(true);
  expect(await deleteInstallationRow(db(), { applicationId: app, installationId: 'a3' })).toBe(true);
  await db().execute(`update installations set status = 'invalid' where application_id = ? and installation_id = 'denied'`, [app]);
  await db().execute(`update installations set platform = 'ios', permission = 'not_determined' where application_id = ? and installation_id = 'anon1'`, [app]);
  await db().execute(`delete from installations where application_id = ? and user_id = 'uma'`, [app]);
  await expectKeptEqualsComputed(app);

  // The other application's counts were never touched.
  expect(await count(other)).toEqual({ installations: 1, users: 1 });

  // Folding the rows of differences keeps the sums.
  const before = await count(app);
  expect(await foldAudienceTotals(db())).toBeGreaterThan(0);
  const [{ rows: left }] = await rows(db(), sql<{ rows: number }>`select count(*)::int as rows from audience_totals where application_id = ${app}`);
  expect(left).toBe(1);
  const [{ emptied }] = await rows(db(), sql<{ emptied: number }>`select count(*)::int as emptied from audience_users where application_id = ${app} and installations = 0`);
  expect(emptied).toBe(0);
  expect(await count(app)).toEqual(before);
  await expectKeptEqualsComputed(app);
});

test('concurrent registrations of one user, and a bulk insert, are each counted once', async () => {
  const app = (await harness.newApplication('kept-concurrent')).id;
  await Promise.all(Array.from({ length: 12 }, (_, n) => register(app, `device-${n}`, { userId: n % 2 === 0 ? 'zoe' : null })));
  await Promise.all(Array.from({ length: 12 }, (_, n) => register(app, `device-${n}`, { userId: n % 3 === 0 ? 'yan' : 'zoe' })));
  expect(await count(app)).toEqual({ installations: 12, users: 2 });
  await expectKeptEqualsComputed(app);

  // One statement of many rows (an import) goes through the statement-level trigger at once.
  await harness.orm.em.fork().execute(
    `insert into installations (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
                                registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
     select gen_random_uuid(), ?, 'bulk-' || n, 'android', 'bulk-token-' || n, 'active', 'authorized',
            case when n % 4 = 0 then null else 'bulk-user-' || (n % 10) end, '{}', now(), now(), now(), now()
       from generate_series(1, 100) n`,
    [app],
  );
  expect(await count(app)).toEqual({ installations: 112, users: 2 + 10 + 25 });
  await expectKeptEqualsComputed(app);
});

test('installations moving between two users at once, both ways, never deadlock and end counted once', async () => {
  // Each move changes both users' kept rows: every registration must lock them in one order.
  const app = (await harness.newApplication('kept-swaps')).id;
  const devices = Array.from({ length: 16 }, (_, n) => `swap-${n}`);
  const userOf = (n: number, round: number) => ((n + round) % 2 === 0 ? 'zoe' : 'yan');
  for (let round = 0; round < 6; round++) {
    await Promise.all(devices.map((device, n) => register(app, device, { userId: userOf(n, round) })));
  }
  expect(await count(app)).toEqual({ installations: 16, users: 2 });
  await expectKeptEqualsComputed(app);
});

test('the fold waits on no registration: a user row a registration holds is left for the next run', async () => {
  const app = (await harness.newApplication('kept-fold-beside')).id;
  const db = () => harness.orm.em.fork();
  await register(app, 'fold-1', { userId: 'zoe' });
  await register(app, 'fold-2', { userId: 'yan' });
  await register(app, 'fold-1', { userId: null });
  await register(app, 'fold-2', { userId: null });
  const emptied = async () =>
    (await rows(db(), sql<{ user: string }>`select user_id as "user" from audience_users where application_id = ${app} and installations = 0 order by 1`)).map(
      (row) => row.user,
    );
  expect(await emptied()).toEqual(['yan', 'zoe']);

  await db().transactional(async (tx) => {
    // Holds zoe's row until this transaction ends, as a registration moving a device to her does.
    await register(app, 'fold-1', { userId: 'zoe' }, tx);
    await foldAudienceTotals(db());
    expect(await emptied()).toEqual(['zoe']);
  });
  expect(await emptied()).toEqual([]);
  expect(await count(app)).toEqual({ installations: 2, users: 2 });
  await expectKeptEqualsComputed(app);
});

test("a registration Postgres ends as a deadlock's victim is tried again: the client gets its 200, not a 500", async () => {
  const application = await harness.newApplication('kept-deadlock');
  const token = await application.token(['installations:write']);
  const put = (installationId: string, userId: string) =>
    request(harness.app)
      .put(`/api/v1/installations/${installationId}`)
      .set('Authorization', `Bearer ${token}`)
      .send({ platform: 'android', provider: { identifier: `token-${installationId}` }, permission: 'authorized', user_id: userId });
  expect((await put('dl-moving', 'yan')).status).toBe(201);
  expect((await put('dl-staying', 'zoe')).status).toBe(201);

  // Another transaction holds zoe's kept row. The registration moving dl-moving from yan to zoe
  // locks dl-moving's row, then waits for zoe's; the other transaction then asks for dl-moving's
  // row: a cycle, whatever order the registration takes the users' rows in. Postgres breaks it by
  // ending the registration, the one that waited first: the other transaction gets the row while
  // it still holds zoe's, which only an ended registration allows.
  const other = new pg.Client({ connectionString: harness.url });
  await other.connect();
  try {
    await other.query('begin');
    await other.query(`select from audience_users where application_id = $1 and user_id = 'zoe' for update`, [application.id]);
    const moving = put('dl-moving', 'zoe').then((res) => res);
    await waitFor(
      async () => (await other.query(`select pg_stat_clear_snapshot(), count(*)::int as n from pg_stat_activity where pg_backend_pid() = any(pg_blocking_pids(pid))`)).rows[0].n,
      (blocked) => blocked === 1,
    );
    await other.query(`select from installations where application_id = $1 and installation_id = 'dl-moving' for update`, [application.id]);
    await other.query('commit');

    const res = await moving;
    expect(res.status).toBe(200);
    expect(res.body.data.user_id).toBe('zoe');
  } finally {
    await other.end();
  }
  expect(await count(application.id)).toEqual({ installations: 2, users: 1 });
  await expectKeptEqualsComputed(application.id);
});

test("an application's deletion takes its kept rows and leaves the others'", async () => {
  const app = (await harness.newApplication('kept-deleted')).id;
  const kept = (await harness.newApplication('kept-kept')).id;
  for (const name of ['x1', 'x2']) {
    await register(app, name);
    await register(kept, name);
  }
  await harness.orm.em.fork().execute(`delete from applications where id = ?`, [app]);
  const [left] = await rows(
    harness.orm.em.fork(),
    sql<{ users: number; totals: number }>`select (select count(*)::int from audience_users where application_id = ${app}) as users,
                                                  (select count(*)::int from audience_totals where application_id = ${app}) as totals`,
  );
  expect(left).toEqual({ users: 0, totals: 0 });
  expect(await count(kept)).toEqual({ installations: 2, users: 2 });
  expect(await count(randomUUID())).toEqual({ installations: 0, users: 0 });
});

test('a load with the triggers off is counted again by audience_rebuild()', async () => {
  const app = (await harness.newApplication('kept-rebuilt')).id;
  await register(app, 'before', { userId: 'uli' });
  await harness.orm.em.fork().transactional(async (tx) => {
    await tx.execute(`set local session_replication_role = replica`);
    await tx.execute(
      `insert into installations (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
                                  registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
       select gen_random_uuid(), ?, 'loaded-' || n, 'ios', 'loaded-token-' || n, 'active', 'authorized', 'loaded-user-' || (n % 3), '{}',
              now(), now() - make_interval(days => n), now(), now()
         from generate_series(1, 40) n`,
      [app],
    );
  });
  expect(await count(app)).toEqual({ installations: 1, users: 1 });
  await harness.orm.em.fork().execute(`select audience_rebuild()`);
  expect(await count(app)).toEqual({ installations: 41, users: 4 });
  await expectKeptEqualsComputed(app);
});

// An audience's filter and count on real Postgres: every tag operator, platforms, locales by whole
// subtags, recent activity, `all`, their combinations, the eligibility rules of a visible push,
// shared identifiers counted once, users counted distinct, and another application's installations
// never matched.
import { sql } from 'kysely';
import { audienceCondition, countAudience } from '../src/db/sql/audiences.ts';
import { rows } from '../src/db/sql/execute.ts';
import { upsertInstallation, type InstallationReplacement } from '../src/db/sql/installations.ts';
import type { Audience } from '../src/domain/audiences.ts';
import { startHarness, type Harness } from './support/harness.ts';

let harness: Harness;
let applicationId: string;
let otherApplicationId: string;

type Row = {
  name: string;
  platform?: 'ios' | 'android';
  tags?: Record<string, string>;
  locale?: string | null;
  lastSeenDaysAgo?: number;
  permission?: string;
  status?: 'active' | 'invalid';
  userId?: string | null;
  identifier?: string;
};

/** Registers the installation as a PUT does (upsertInstallation, which marks shared identifiers), seen `lastSeenDaysAgo` ago. */
async function insert(application: string, row: Row) {
  const lastSeen = new Date(Date.now() - (row.lastSeenDaysAgo ?? 0) * 86_400_000);
  const db = harness.orm.em.fork();
  await upsertInstallation(
    db,
    { applicationId: application, installationId: row.name },
    {
      platform: row.platform ?? 'android',
      providerIdentifier: row.identifier ?? `token-${row.name}`,
      permission: (row.permission ?? 'authorized') as InstallationReplacement['permission'],
      userId: row.userId === undefined ? `user-${row.name}` : row.userId,
      device: { app_version: null, os_version: null, model: null, locale: row.locale ?? null, timezone: null },
      tags: row.tags ?? {},
    },
    lastSeen,
  );
  if (row.status === 'invalid') {
    await db.execute(`update installations set status = 'invalid' where application_id = ? and installation_id = ?`, [application, row.name]);
  }
}

const fixtures: Row[] = [
  { name: 'pro-android-de', platform: 'android', tags: { plan: 'pro', team: 'red' }, locale: 'de_AT' },
  { name: 'pro-ios-en', platform: 'ios', tags: { plan: 'pro' }, locale: 'en-GB', lastSeenDaysAgo: 40 },
  { name: 'free-android-den', platform: 'android', tags: { plan: 'free' }, locale: 'den' },
  { name: 'Pro-ios-de', platform: 'ios', tags: { plan: 'Pro', beta: '' }, locale: 'DE', lastSeenDaysAgo: 10 },
  { name: 'untagged-android', platform: 'android', locale: 'pt_BR.UTF-8', lastSeenDaysAgo: 100 },
  { name: 'team-ios', platform: 'ios', tags: { team: 'blue' }, locale: null, lastSeenDaysAgo: 2 },
];

beforeAll(async () => {
  harness = await startHarness();
  applicationId = (await harness.newApplication('audiences')).id;
  otherApplicationId = (await harness.newApplication('another')).id;
  for (const row of fixtures) {
    await insert(applicationId, row);
    // The same installations in another application: never matched.
    await insert(otherApplicationId, { ...row, name: `other-${row.name}` });
  }
});
afterAll(() => harness.close());

/** The names of the application's installations the audience's condition matches. */
async function matched(audience: Audience, application = applicationId): Promise<string[]> {
  const found = await rows(
    harness.orm.em.fork(),
    sql<{ name: string }>`select i.installation_id as name from installations i
                           where i.application_id = ${application} and ${audienceCondition(audience)} order by 1`,
  );
  return found.map((row) => row.name);
}

const sorted = (names: string[]) => [...names].sort();

describe('tag conditions', () => {
  test.each<[string, Audience, string[]]>([
    ['eq: the key has the value, case-sensitively', { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] }, ['pro-android-de', 'pro-ios-en']],
    ['eq with an empty value', { tags: [{ key: 'beta', op: 'eq', value: '' }] }, ['Pro-ios-de']],
    [
      'ne: every other value, and installations without the key',
      { tags: [{ key: 'plan', op: 'ne', value: 'pro' }] },
      ['free-android-den', 'Pro-ios-de', 'untagged-android', 'team-ios'],
    ],
    ['in: one of the values', { tags: [{ key: 'plan', op: 'in', values: ['free', 'Pro'] }] }, ['free-android-den', 'Pro-ios-de']],
    ['exists: the key set, whatever its value', { tags: [{ key: 'team', op: 'exists' }] }, ['pro-android-de', 'team-ios']],
    [
      'not_exists: the key not set',
      { tags: [{ key: 'team', op: 'not_exists' }] },
      ['pro-ios-en', 'free-android-den', 'Pro-ios-de', 'untagged-android'],
    ],
    ['keys are case-sensitive', { tags: [{ key: 'PLAN', op: 'exists' }] }, []],
    [
      'several conditions are ANDed',
      { tags: [{ key: 'plan', op: 'exists' }, { key: 'team', op: 'ne', value: 'red' }] },
      ['pro-ios-en', 'free-android-den', 'Pro-ios-de'],
    ],
    [
      'a value with quotes and backslashes is matched as given',
      { tags: [{ key: 'plan', op: 'eq', value: 'pro"} or {"a\\' }] },
      [],
    ],
  ])('%s', async (_, audience, expected) => {
    expect(await matched(audience)).toEqual(sorted(expected));
  });
});

describe('platforms, locales, recent activity and all', () => {
  test.each<[string, Audience, string[]]>([
    ['platforms', { platforms: ['ios'] }, ['pro-ios-en', 'Pro-ios-de', 'team-ios']],
    ['both platforms', { platforms: ['ios', 'android'] }, fixtures.map((row) => row.name)],
    ['a language matches its regions, any case, `_` read as `-`, not a longer language', { locales: ['de'] }, ['pro-android-de', 'Pro-ios-de']],
    ['a region tag matches that region only', { locales: ['DE-at'] }, ['pro-android-de']],
    ['a POSIX codeset suffix is not a subtag', { locales: ['pt-BR'] }, ['untagged-android']],
    ['a more specific tag does not match the language alone', { locales: ['en-US'] }, []],
    ['any of several locales', { locales: ['en', 'den'] }, ['pro-ios-en', 'free-android-den']],
    ['active_within_days', { active_within_days: 30 }, ['pro-android-de', 'free-android-den', 'Pro-ios-de', 'team-ios']],
    ['all: true is every installation', { all: true }, fixtures.map((row) => row.name)],
    [
      'a combination of every kind, ANDed',
      { platforms: ['ios'], tags: [{ key: 'plan', op: 'in', values: ['pro', 'Pro'] }], locales: ['de'], active_within_days: 30 },
      ['Pro-ios-de'],
    ],
    [
      'platform and tag',
      { platforms: ['android'], tags: [{ key: 'plan', op: 'in', values: ['pro', 'free'] }], active_within_days: 1 },
      ['pro-android-de', 'free-android-den'],
    ],
  ])('%s', async (_, audience, expected) => {
    expect(await matched(audience)).toEqual(sorted(expected));
  });

  test("another application's installations are never matched", async () => {
    const names = await matched({ all: true }, otherApplicationId);
    expect(names.every((name) => name.startsWith('other-'))).toBe(true);
    expect(await countAudience(harness.orm.em.fork(), applicationId, { all: true })).toEqual({ installations: 6, users: 6 });
  });
});

describe('the count', () => {
  let app: string;
  beforeAll(async () => {
    app = (await harness.newApplication('counted')).id;
    const rowsToInsert: Row[] = [
      { name: 'denied', permission: 'denied', tags: { k: 'v' } },
      { name: 'ios-not-determined', platform: 'ios', permission: 'not_determined', tags: { k: 'v' } },
      { name: 'android-not-determined', platform: 'android', permission: 'not_determined', tags: { k: 'v' } },
      { name: 'invalid', status: 'invalid', tags: { k: 'v' } },
      // One device registered twice (same token): pushed once; the newest keeps it, with its user.
      { name: 'shared-old', identifier: 'shared', userId: 'alice', lastSeenDaysAgo: 3, tags: { k: 'v' } },
      { name: 'shared-new', identifier: 'shared', userId: 'bob', lastSeenDaysAgo: 1, tags: { k: 'v' } },
      // The same token on both platforms is two devices.
      { name: 'same-token-ios', platform: 'ios', identifier: 'same', userId: 'carol', tags: { k: 'v' } },
      { name: 'same-token-android', platform: 'android', identifier: 'same', userId: 'carol', tags: { k: 'v' } },
      // Installations without a user count as one user each.
      { name: 'anonymous-1', userId: null, tags: { k: 'v' } },
      { name: 'anonymous-2', userId: null, tags: { k: 'v' } },
      { name: 'not-in-audience', userId: 'dave', tags: { k: 'w' } },
    ];
    for (const row of rowsToInsert) await insert(app, row);
  });

  test('counts the eligible installations of a visible push, shared identifiers once, and distinct users', async () => {
    const count = await countAudience(harness.orm.em.fork(), app, { tags: [{ key: 'k', op: 'eq', value: 'v' }] });
    // android-not-determined, shared-new, same-token-ios, same-token-android, anonymous-1, anonymous-2.
    // Users: user-android-not-determined, bob, carol, and the two anonymous ones.
    expect(count).toEqual({ installations: 6, users: 5 });
  });

  test('a shared identifier the newer installation cannot take (denied) stays with the older one', async () => {
    const other = (await harness.newApplication('shared-denied')).id;
    await insert(other, { name: 'old', identifier: 'shared', userId: 'alice', lastSeenDaysAgo: 3 });
    await insert(other, { name: 'new', identifier: 'shared', userId: 'bob', permission: 'denied', lastSeenDaysAgo: 1 });
    expect(await countAudience(harness.orm.em.fork(), other, { all: true })).toEqual({ installations: 1, users: 1 });
  });

  test('a user whose installations share an identifier and hold one of their own is counted once', async () => {
    const other = (await harness.newApplication('shared-and-own')).id;
    await insert(other, { name: 'own', userId: 'erin' });
    await insert(other, { name: 'shared-1', identifier: 'shared', userId: 'erin', lastSeenDaysAgo: 1 });
    await insert(other, { name: 'shared-2', identifier: 'shared', userId: 'frank', lastSeenDaysAgo: 2 });
    expect(await countAudience(harness.orm.em.fork(), other, { all: true })).toEqual({ installations: 2, users: 1 });
  });

  test('an identifier stays counted once whichever installation registers it first, and after one moves on', async () => {
    const other = (await harness.newApplication('shared-moves')).id;
    await insert(other, { name: 'first', identifier: 'token', userId: 'gus', lastSeenDaysAgo: 2 });
    await insert(other, { name: 'second', identifier: 'token', userId: 'hal', lastSeenDaysAgo: 1 });
    expect(await countAudience(harness.orm.em.fork(), other, { all: true })).toEqual({ installations: 1, users: 1 });
    // The first gets a token of its own: two devices again, two users.
    await insert(other, { name: 'first', identifier: 'fresh-token', userId: 'gus' });
    expect(await countAudience(harness.orm.em.fork(), other, { all: true })).toEqual({ installations: 2, users: 2 });
  });

  test('an audience nobody matches counts zero', async () => {
    expect(await countAudience(harness.orm.em.fork(), app, { tags: [{ key: 'k', op: 'eq', value: 'nobody' }] })).toEqual({ installations: 0, users: 0 });
  });
});

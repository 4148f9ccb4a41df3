// A sent notification reaching devices: fanout, skips, provider outcomes, retries, TTL,
// invalidation, statistics and status, end to end through the real APNs and FCM clients.
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { encryptSecret } from '../src/domain/credentials.ts';
import { targetInstallations } from '../src/db/sql/deliveries.ts';
import { android, ios, startPipeline, type Pipeline } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

let pipeline: Pipeline;
beforeAll(async () => {
  pipeline = await startPipeline();
});
afterAll(() => pipeline.close());
afterEach(() => {
  pipeline.apns.setRules([]);
  pipeline.fcm.setRules([]);
});

const apnsTo = (token: string) => pipeline.apns.received.filter((push) => push.token === token);
const fcmTo = (token: string) => pipeline.fcm.received.filter((push) => push.token === token);

test('every installation of every target user gets one push, and the notification completes', async () => {
  const app = await pipeline.newApplication();
  await app.register('alice-iphone', ios('aa01', 'alice'));
  await app.register('alice-pixel', android('fcm-aa02', 'alice'));
  await app.register('bob-iphone', ios('bb01', 'bob'));
  await app.register('carol-iphone', ios('cc01', 'carol'));

  const id = await app.send({ recipients: { user_ids: ['alice', 'bob', 'nobody'] }, notification: { title: 'Hi', body: 'There' } });
  const notification = await app.settled(id);

  expect(notification.status).toBe('completed');
  expect(notification.statistics).toEqual({
    users: 2,
    installations: 3,
    accepted: 3,
    failed: 0,
    skipped: 0,
    received: 0,
    displayed: 0,
    opened: 0,
  });
  expect(notification.processing_started_at).not.toBeNull();
  expect(Date.parse(notification.completed_at)).toBeGreaterThanOrEqual(Date.parse(notification.processing_started_at));
  expect(apnsTo('aa01')).toHaveLength(1);
  expect(fcmTo('fcm-aa02')).toHaveLength(1);
  expect(apnsTo('bb01')).toHaveLength(1);
  expect(apnsTo('cc01')).toHaveLength(0);

  const deliveries = await app.deliveries(id);
  const byInstallation = Object.fromEntries(deliveries.map((d) => [d.installation_id, d]));
  expect(Object.keys(byInstallation).sort()).toEqual(['alice-iphone', 'alice-pixel', 'bob-iphone']);
  // Each push carries the ids an app reports events with.
  const push = apnsTo('aa01')[0].payload as { herald: { delivery_id: string; notification_id: string } };
  expect(push.herald).toEqual({ delivery_id: byInstallation['alice-iphone'].id, notification_id: id });
  const message = fcmTo('fcm-aa02')[0].message as { data: Record<string, string> };
  expect(message.data.herald_delivery_id).toBe(byInstallation['alice-pixel'].id);
  expect(message.data.herald_notification_id).toBe(id);
});

test('user ids with quotes, backslashes, commas, braces, blanks and the word NULL reach their devices unchanged', async () => {
  const app = await pipeline.newApplication();
  const users = ['say "hi"', 'back\\slash', 'a,b', '{braces}', 'NULL', ' spaced ', 'ünï\tcode'];
  for (const [i, user] of users.entries()) await app.register(`awkward-${i}`, ios(`awkward-token-${i}`, user));
  const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'Quoted' } });
  const notification = await app.settled(id);

  expect(notification.statistics).toMatchObject({ users: users.length, installations: users.length, accepted: users.length });
  const deliveries = await app.deliveries(id);
  expect(deliveries.map((d) => [d.installation_id, d.user_id]).sort()).toEqual(users.map((user, i) => [`awkward-${i}`, user]).sort());
  for (const i of users.keys()) expect(apnsTo(`awkward-token-${i}`)).toHaveLength(1);
});

test("the fanout reads only its targets' installations, one probe of (application_id, user_id) a user, even where the planner would rather hash the application's", async () => {
  const app = await pipeline.newApplication();
  const others = Array.from({ length: 30 }, (_, i) => `other-${i}`);
  for (const user of ['pia', 'pol', ...others]) await app.register(`${user}-phone`, ios(`probe-${user}`, user));
  const id = await app.send({ recipients: { user_ids: ['pia', 'pol', 'nobody'] }, notification: { title: 'Probe' } });
  await app.settled(id);

  // Joins barred from nesting, a planner hashes the application's installations (what a wrong
  // estimate of their number once made it do): as a join, all 32 were read; the lateral probe
  // leaves it no such choice.
  const read = await pipeline.harness.orm.em.fork().transactional(async (tx) => {
    await tx.execute('set local enable_nestloop = off');
    await tx.execute('set local enable_mergejoin = off');
    // Counted around the statement: the backend's counts not yet reported (Postgres 15 reports
    // them at most once a second) may include statements of earlier transactions on the connection.
    const readSoFar = async () => {
      const [rows] = await tx.execute<{ read: string }[]>(
        `select seq_tup_read + coalesce(idx_tup_fetch, 0) as read from pg_stat_xact_user_tables where relname = 'installations'`,
      );
      return Number(rows.read);
    };
    const before = await readSoFar();
    const found = await targetInstallations(tx, [id]);
    expect(found.map((candidate) => candidate.installationId).sort()).toEqual(['pia-phone', 'pol-phone']);
    return (await readSoFar()) - before;
  });
  expect(read).toBeLessThan(others.length);
});

test('options reach both providers as their own headers and fields', async () => {
  const app = await pipeline.newApplication();
  await app.register('opt-ios', ios('op01', 'opt'));
  await app.register('opt-android', android('fcm-op02', 'opt'));
  const id = await app.send({
    recipients: { user_ids: ['opt'] },
    notification: { title: 'Sale', body: 'Now', image_url: 'https://cdn.example.com/a.png', action_url: 'shop://sale' },
    data: { sale_id: 42, kind: 'flash' },
    options: {
      ttl: 3600,
      priority: 'high',
      collapse_id: 'sale',
      sound: 'chime.caf',
      badge: 3,
      android_channel_id: 'promos',
      ios_category: 'SALE',
      platform_overrides: { ios: { aps: { 'interruption-level': 'time-sensitive' } }, android: { notification: { color: '#ff0000' } } },
    },
  });
  await app.settled(id);

  const [apns] = apnsTo('op01');
  expect(apns.priority).toBe('10');
  expect(apns.collapseId).toBe('sale');
  expect(apns.pushType).toBe('alert');
  expect(Number(apns.expiration)).toBeGreaterThan(Date.now() / 1000 + 3500);
  expect(apns.payload).toMatchObject({
    aps: {
      alert: { title: 'Sale', body: 'Now' },
      sound: 'chime.caf',
      badge: 3,
      category: 'SALE',
      'mutable-content': 1,
      'interruption-level': 'time-sensitive',
    },
    sale_id: 42,
    kind: 'flash',
    herald: { notification_id: id, image_url: 'https://cdn.example.com/a.png', action_url: 'shop://sale' },
  });

  const [fcm] = fcmTo('fcm-op02');
  expect(fcm.message).toMatchObject({
    token: 'fcm-op02',
    notification: { title: 'Sale', body: 'Now', image: 'https://cdn.example.com/a.png' },
    data: { sale_id: '42', kind: 'flash', herald_notification_id: id, herald_action_url: 'shop://sale' },
    android: {
      priority: 'high',
      collapse_key: 'sale',
      notification: { channel_id: 'promos', sound: 'chime.caf', notification_count: 3, color: '#ff0000' },
    },
  });
  const ttl = Number((fcm.message as { android: { ttl: string } }).android.ttl.replace('s', ''));
  expect(ttl).toBeGreaterThan(3500);
  expect(ttl).toBeLessThanOrEqual(3600);
});

test('skips: denied permission, undetermined iOS permission for an alert, a shared device identifier, a platform without credentials', async () => {
  const app = await pipeline.newApplication({ apns: true, fcm: false });
  await app.register('denied', ios('sk01', 'sam', { permission: 'denied' }));
  await app.register('undecided', ios('sk02', 'sam', { permission: 'not_determined' }));
  await app.register('old-install', ios('sk03', 'sam'));
  await app.register('new-install', ios('sk03', 'sam'));
  await app.register('android', android('fcm-sk04', 'sam'));

  const id = await app.send({ recipients: { user_ids: ['sam'] }, notification: { title: 'Hi' } });
  const notification = await app.settled(id);

  expect(notification.status).toBe('completed');
  expect(notification.statistics).toMatchObject({ users: 1, installations: 5, accepted: 1, skipped: 4, failed: 0 });
  const reasons = Object.fromEntries((await app.deliveries(id)).map((d) => [d.installation_id, [d.state, d.reason]]));
  expect(reasons).toEqual({
    denied: ['skipped', 'permission_denied'],
    undecided: ['skipped', 'permission_not_determined'],
    'old-install': ['skipped', 'duplicate_identifier'],
    'new-install': ['accepted', null],
    android: ['skipped', 'no_credentials'],
  });
  // One device, one push: the most recently registered installation of the shared token got it.
  expect(apnsTo('sk03')).toHaveLength(1);
});

test('a data-only push reaches an iOS device whose permission is not determined, as a background push', async () => {
  const app = await pipeline.newApplication();
  await app.register('silent', ios('dt01', 'dana', { permission: 'not_determined' }));
  const id = await app.send({ recipients: { user_ids: ['dana'] }, notification: {}, data: { sync: true } });
  expect((await app.settled(id)).statistics).toMatchObject({ accepted: 1, skipped: 0 });
  const [push] = apnsTo('dt01');
  expect(push.pushType).toBe('background');
  expect(push.priority).toBe('5');
  expect(push.payload).toMatchObject({ aps: { 'content-available': 1 }, sync: true });
});

test('no installation at all: completed at once with zero counters', async () => {
  const app = await pipeline.newApplication();
  const id = await app.send({ recipients: { user_ids: ['ghost'] }, notification: { title: 'Hi' } });
  const notification = await app.settled(id);
  expect(notification.status).toBe('completed');
  expect(notification.statistics).toMatchObject({ users: 0, installations: 0, accepted: 0, failed: 0, skipped: 0 });
});

describe('provider errors', () => {
  test('a dead APNs token fails its delivery with the reason and invalidates the installation; the rest is partial', async () => {
    pipeline.apns.setRules([{ prefix: 'dead-', reason: 'Unregistered' }]);
    const app = await pipeline.newApplication();
    await app.register('dead-phone', ios('dead-01', 'erin'));
    await app.register('live-phone', ios('live-01', 'erin'));
    const id = await app.send({ recipients: { user_ids: ['erin'] }, notification: { title: 'Hi' } });
    const notification = await app.settled(id);

    expect(notification.status).toBe('partial');
    expect(notification.statistics).toMatchObject({ accepted: 1, failed: 1 });
    const dead = (await app.deliveries(id)).find((d) => d.installation_id === 'dead-phone')!;
    expect([dead.state, dead.reason, dead.attempts]).toEqual(['failed', 'Unregistered', 1]);
    const installation = await app.installation('dead-phone');
    expect(installation).toMatchObject({ status: 'invalid', invalid_reason: 'Unregistered' });
    expect(installation.invalidated_at).not.toBeNull();

    // An invalid installation is no longer considered; registering a new token brings it back.
    const again = await app.send({ recipients: { user_ids: ['erin'] }, notification: { title: 'Again' } });
    expect((await app.settled(again)).statistics).toMatchObject({ installations: 1, accepted: 1 });
    await app.register('dead-phone', ios('fresh-01', 'erin'));
    expect((await app.installation('dead-phone')).status).toBe('active');
  });

  test('an APNs 410 older than the last registration does not invalidate the installation', async () => {
    const app = await pipeline.newApplication();
    await app.register('reregistered', ios('stale-01', 'fred'));
    pipeline.apns.setRules([{ prefix: 'stale-', reason: 'Unregistered', timestamp: Date.now() - 3_600_000 }]);
    const id = await app.send({ recipients: { user_ids: ['fred'] }, notification: { title: 'Hi' } });
    expect((await app.settled(id)).status).toBe('failed');
    expect((await app.installation('reregistered')).status).toBe('active');
  });

  test('FCM UNREGISTERED and a token-naming INVALID_ARGUMENT invalidate; a payload INVALID_ARGUMENT does not', async () => {
    pipeline.fcm.setRules([
      { prefix: 'gone-', reason: 'UNREGISTERED' },
      { prefix: 'badtok-', reason: 'INVALID_ARGUMENT' },
      { prefix: 'badmsg-', reason: 'INVALID_ARGUMENT', message: 'Invalid value at message.android.ttl' },
    ]);
    const app = await pipeline.newApplication();
    await app.register('gone', android('gone-1', 'gina'));
    await app.register('badtok', android('badtok-1', 'gina'));
    await app.register('badmsg', android('badmsg-1', 'gina'));
    const id = await app.send({ recipients: { user_ids: ['gina'] }, notification: { title: 'Hi' } });
    const notification = await app.settled(id);

    expect(notification.status).toBe('failed');
    expect(notification.statistics).toMatchObject({ failed: 3, accepted: 0 });
    expect((await app.installation('gone')).status).toBe('invalid');
    expect((await app.installation('badtok')).status).toBe('invalid');
    expect((await app.installation('badmsg')).status).toBe('active');
  });

  test('refused credentials fail every push as provider_credentials and never touch the devices', async () => {
    pipeline.apns.setRules([{ prefix: 'cred-', reason: 'InvalidProviderToken' }]);
    const app = await pipeline.newApplication();
    await app.register('c1', ios('cred-1', 'hank'));
    await app.register('c2', ios('cred-2', 'hank'));
    const id = await app.send({ recipients: { user_ids: ['hank'] }, notification: { title: 'Hi' } });
    expect((await app.settled(id)).status).toBe('failed');
    for (const delivery of await app.deliveries(id)) expect([delivery.state, delivery.reason]).toEqual(['failed', 'provider_credentials']);
    expect((await app.installation('c1')).status).toBe('active');
    const [credential] = await pipeline.harness.orm.em
      .fork()
      .execute<{ unhealthy_since: string | null; last_error: string | null }[]>(
        `select unhealthy_since, last_error from provider_credentials where application_id = ? and provider = 'apns'`,
        [app.id],
      );
    expect(credential.unhealthy_since).not.toBeNull();
    expect(credential.last_error).toBe('InvalidProviderToken');
  });

  test('credentials the workers cannot open fail every push with that reason, not internal_error, and show unhealthy', async () => {
    const app = await pipeline.newApplication();
    // Stored with another key than the workers': the start check passed (its key opens others).
    await pipeline.harness.orm.em
      .fork()
      .execute(`update provider_credentials set secret = ? where application_id = ? and provider = 'apns'`, [
        encryptSecret('not this key', randomBytes(32), { applicationId: app.id, provider: 'apns' }),
        app.id,
      ]);
    await app.register('sealed', ios('sealed-1', 'uma'));
    await app.register('sealed-tablet', android('sealed-2', 'uma'));
    const id = await app.send({ recipients: { user_ids: ['uma'] }, notification: { title: 'Hi' } });
    expect((await app.settled(id)).status).toBe('partial');
    const states = Object.fromEntries((await app.deliveries(id)).map((delivery) => [delivery.platform, [delivery.state, delivery.reason]]));
    expect(states).toEqual({ ios: ['failed', 'cannot be opened with this key'], android: ['accepted', null] });
    expect((await app.installation('sealed')).status).toBe('active');
    const res = await request(pipeline.harness.app).get('/api/v1/app').set('Authorization', `Bearer ${app.server}`).expect(200);
    expect(res.body.data.credentials.ios).toMatchObject({ status: 'unhealthy', reason: 'cannot be opened with this key' });
  });

  test('a transient error is retried, honouring Retry-After, and then accepted', async () => {
    pipeline.apns.setRules([{ prefix: 'flaky-', reason: 'ServiceUnavailable', retryAfter: 1 }]);
    const app = await pipeline.newApplication();
    await app.register('flaky', ios('flaky-1', 'ivy'));
    const id = await app.send({ recipients: { user_ids: ['ivy'] }, notification: { title: 'Hi' } });
    // Wait for the first refusal, then let the provider recover.
    await waitFor(() => apnsTo('flaky-1').length, (pushes) => pushes > 0, 10_000);
    const firstAttempt = apnsTo('flaky-1')[0].at;
    pipeline.apns.setRules([]);

    const notification = await app.settled(id);
    expect(notification.status).toBe('completed');
    const [delivery] = await app.deliveries(id);
    expect([delivery.state, delivery.attempts]).toEqual(['accepted', 2]);
    const attempts = apnsTo('flaky-1');
    expect(attempts.map((push) => push.status)).toEqual([503, 200]);
    expect(attempts[1].at - firstAttempt).toBeGreaterThanOrEqual(1000);
  });

  test('an installation deleted while its push waits for a retry is skipped as installation_deleted on the retry', async () => {
    pipeline.apns.setRules([{ prefix: 'gone-', reason: 'ServiceUnavailable', retryAfter: 1 }]);
    const app = await pipeline.newApplication();
    await app.register('gone-phone', ios('gone-1', 'gil'));
    const id = await app.send({ recipients: { user_ids: ['gil'] }, notification: { title: 'Hi' } });
    await waitFor(() => apnsTo('gone-1').length, (pushes) => pushes > 0, 10_000);
    await request(pipeline.harness.app).delete('/api/v1/installations/gone-phone').set('Authorization', `Bearer ${app.client}`).expect(204);
    pipeline.apns.setRules([]);

    const notification = await app.settled(id);
    expect(notification.status).toBe('completed');
    expect(notification.statistics).toMatchObject({ installations: 1, accepted: 0, failed: 0, skipped: 1 });
    const [delivery] = await app.deliveries(id);
    expect([delivery.installation_id, delivery.state, delivery.reason]).toEqual(['gone-phone', 'skipped', 'installation_deleted']);
    expect(apnsTo('gone-1').map((push) => push.status)).toEqual([503]);
  });

  test('retries follow the time to live, not an attempt count: a push on its 50th attempt is still made', async () => {
    pipeline.fcm.setRules([{ prefix: 'patient-', reason: 'UNAVAILABLE', retryAfter: 1 }]);
    const app = await pipeline.newApplication();
    await app.register('patient', android('patient-1', 'pat'));
    const id = await app.send({ recipients: { user_ids: ['pat'] }, notification: { title: 'Hi' } });
    // The first attempt is counted with its outcome, once its retry is scheduled.
    await waitFor(async () => (await app.deliveries(id))[0]?.attempts, (attempts) => attempts === 1, 10_000);
    // As if a long outage had already taken 49 attempts: with no ttl, the 24 h horizon still holds.
    await pipeline.harness.orm.em.fork().execute(`update deliveries set attempts = 49 where notification_id = ? and state = 'pending'`, [id]);
    pipeline.fcm.setRules([]);
    expect((await app.settled(id)).status).toBe('completed');
    const [delivery] = await app.deliveries(id);
    expect([delivery.state, delivery.attempts]).toEqual(['accepted', 50]);
  });

  test('FCM QUOTA_EXCEEDED is retried like any transient error', async () => {
    pipeline.fcm.setRules([{ prefix: 'quota-', reason: 'QUOTA_EXCEEDED', retryAfter: 1 }]);
    const app = await pipeline.newApplication();
    await app.register('quota', android('quota-1', 'jack'));
    const id = await app.send({ recipients: { user_ids: ['jack'] }, notification: { title: 'Hi' } });
    await waitFor(() => fcmTo('quota-1').length, (pushes) => pushes > 0, 10_000);
    pipeline.fcm.setRules([]);
    expect((await app.settled(id)).status).toBe('completed');
    expect(fcmTo('quota-1').map((push) => push.status)).toEqual([429, 200]);
  });

  test('a payload the provider refuses fails at once, without retry and without invalidating', async () => {
    pipeline.apns.setRules([{ prefix: 'big-', reason: 'PayloadTooLarge' }]);
    const app = await pipeline.newApplication();
    await app.register('big', ios('big-1', 'kim'));
    const id = await app.send({ recipients: { user_ids: ['kim'] }, notification: { title: 'Hi' } });
    expect((await app.settled(id)).status).toBe('failed');
    const [delivery] = await app.deliveries(id);
    expect([delivery.state, delivery.reason, delivery.attempts]).toEqual(['failed', 'PayloadTooLarge', 1]);
    expect((await app.installation('big')).status).toBe('active');
  });
});

describe('time to live', () => {
  test('ttl 0 means now or never: a transient error fails the push as expired, with no retry', async () => {
    pipeline.apns.setRules([{ prefix: 'now-', reason: 'ServiceUnavailable' }]);
    const app = await pipeline.newApplication();
    await app.register('now', ios('now-1', 'liz'));
    const id = await app.send({ recipients: { user_ids: ['liz'] }, notification: { title: 'Hi' }, options: { ttl: 0 } });
    expect((await app.settled(id)).status).toBe('failed');
    const [delivery] = await app.deliveries(id);
    expect([delivery.state, delivery.reason, delivery.attempts]).toEqual(['failed', 'expired', 1]);
    expect(apnsTo('now-1')[0].expiration).toBe('0');
  });

  test('a push whose backoff would outlast its ttl gets one last attempt before the expiry, and fails as expired only once the ttl has passed', async () => {
    pipeline.fcm.setRules([{ prefix: 'late-', reason: 'UNAVAILABLE', retryAfter: 30 }]);
    const app = await pipeline.newApplication();
    await app.register('late', android('late-1', 'max'));
    const id = await app.send({ recipients: { user_ids: ['max'] }, notification: { title: 'Hi' }, options: { ttl: 6 } });
    const notification = await app.settled(id, 20_000);
    expect(notification.status).toBe('failed');
    const [delivery] = await app.deliveries(id);
    expect([delivery.reason, delivery.attempts]).toEqual(['expired', 2]);
    expect(fcmTo('late-1')).toHaveLength(2);
    expect(Date.parse(notification.completed_at!)).toBeGreaterThanOrEqual(Date.parse(notification.created_at) + 6000);
  });
});

test('events on real deliveries drive received, displayed and opened, each counted once', async () => {
  const app = await pipeline.newApplication();
  await app.register('ev-phone', ios('ev-01', 'olga'));
  await app.register('ev-tablet', ios('ev-02', 'olga'));
  const id = await app.send({ recipients: { user_ids: ['olga'] }, notification: { title: 'Hi' } });
  await app.settled(id);
  const deliveryOf = (token: string) => (apnsTo(token)[0].payload as { herald: { delivery_id: string } }).herald.delivery_id;

  const report = (deliveryId: string, installationId: string, type: string) =>
    request(pipeline.harness.app)
      .post('/api/v1/events')
      .set('Authorization', `Bearer ${app.client}`)
      .send({ event_id: crypto.randomUUID(), delivery_id: deliveryId, installation_id: installationId, type, occurred_at: new Date().toISOString() })
      .expect(201);
  await report(deliveryOf('ev-01'), 'ev-phone', 'received');
  await report(deliveryOf('ev-01'), 'ev-phone', 'displayed');
  await report(deliveryOf('ev-01'), 'ev-phone', 'opened');
  await report(deliveryOf('ev-01'), 'ev-phone', 'opened');
  await report(deliveryOf('ev-02'), 'ev-tablet', 'received');
  await report(deliveryOf('ev-02'), 'ev-tablet', 'dismissed');

  expect((await app.notification(id)).statistics).toMatchObject({ accepted: 2, received: 2, displayed: 1, opened: 1 });
});

test('a notification to many users fans out in several batches and counts every delivery exactly once', async () => {
  const app = await pipeline.newApplication();
  const users = Array.from({ length: 120 }, (_, i) => `bulk-${i}`);
  for (const [i, user] of users.entries()) {
    await app.register(`bulk-ios-${i}`, ios(`bulk-a-${i}`, user));
    await app.register(`bulk-android-${i}`, android(`bulk-f-${i}`, user));
  }
  const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'Everyone' } });
  const notification = await app.settled(id, 30_000);
  expect(notification.status).toBe('completed');
  expect(notification.statistics).toMatchObject({ users: 120, installations: 240, accepted: 240 });
  const [{ count }] = await pipeline.harness.orm.em
    .fork()
    .execute<{ count: number }[]>('select count(*)::int as count from deliveries where notification_id = ?', [id]);
  expect(count).toBe(240);
  expect(pipeline.apns.received.filter((push) => push.token.startsWith('bulk-a-'))).toHaveLength(120);
  expect(pipeline.fcm.received.filter((push) => push.token?.startsWith('bulk-f-'))).toHaveLength(120);
});

describe('pushes cut to fit the providers', () => {
  type Truncation = { title: number | null; body: number | null; dropped: string[]; badge: number | null } | null;
  const truncations = async (app: Awaited<ReturnType<Pipeline['newApplication']>>, id: string) =>
    Object.fromEntries(
      ((await app.deliveries(id)) as unknown as { installation_id: string; truncation: Truncation }[]).map((d) => [d.installation_id, d.truncation]),
    );
  const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
  const prefix = (text: string, codePoints: number) => Array.from(text).slice(0, codePoints).join('');

  test('a send at every content limit reaches both providers within 4096 bytes, ending with …, and each delivery records its cut', async () => {
    const app = await pipeline.newApplication();
    await app.register('cut-ios', ios('cut-01', 'cora'));
    await app.register('cut-android', android('fcm-cut-02', 'cora'));
    await app.register('cut-denied', ios('cut-03', 'cora', { permission: 'denied' }));
    // 4095 code points of CJK, quotes, backslashes and emoji with a skin tone (two code points).
    const body = '漢"\\👍🏽'.repeat(819);
    const notification = {
      title: 'T'.repeat(255),
      body,
      image_url: `https://cdn.example.com/${'i'.repeat(2048 - 24)}`,
      action_url: `myapp://orders/${'1'.repeat(2048 - 15)}`,
    };
    const id = await app.send({ recipients: { user_ids: ['cora'] }, notification, data: { order_id: '1042' } });
    const settled = await app.settled(id);
    expect(settled.status).toBe('completed');
    expect(settled.statistics).toMatchObject({ accepted: 2, skipped: 1, failed: 0 });
    // The notification itself is kept whole.
    expect(settled.notification).toEqual({ ...notification, localizations: {} });

    const cut = await truncations(app, id);
    expect(cut['cut-denied']).toBeNull();

    const [apns] = apnsTo('cut-01');
    expect(apns.status).toBe(200);
    const payload = apns.payload as { aps: { alert: { title: string; body: string }; 'mutable-content'?: number }; herald: Record<string, string>; order_id: string };
    expect(bytes(payload)).toBeLessThanOrEqual(4096);
    expect(payload.aps.alert.title).toBe(notification.title);
    expect(payload.aps.alert.body.endsWith('…')).toBe(true);
    expect(payload.herald.image_url).toBeUndefined();
    expect(payload.aps['mutable-content']).toBeUndefined();
    expect(payload.herald.action_url).toBe(notification.action_url);
    expect(payload.order_id).toBe('1042');
    expect(cut['cut-ios']).toEqual({ title: null, body: expect.any(Number), dropped: ['image_url'], badge: null });
    // What is recorded is what was pushed.
    expect(payload.aps.alert.body).toBe(`${prefix(body, cut['cut-ios']!.body!)}…`);

    const [fcm] = fcmTo('fcm-cut-02');
    expect(fcm.status).toBe(200);
    const message = fcm.message as { notification: { title: string; body: string; image?: string }; data: Record<string, string> };
    expect(bytes({ data: message.data, notification: message.notification })).toBeLessThanOrEqual(4096);
    expect(message.notification.title).toBe(notification.title);
    expect(message.notification.body.endsWith('…')).toBe(true);
    expect(message.notification.image).toBeUndefined();
    expect(message.data.herald_action_url).toBe(notification.action_url);
    expect(cut['cut-android']).toEqual({ title: null, body: expect.any(Number), dropped: ['image_url'], badge: null });
    expect(message.notification.body).toBe(`${prefix(body, cut['cut-android']!.body!)}…`);
    // Each platform is measured on its own payload.
    expect(cut['cut-android']!.body).not.toBe(cut['cut-ios']!.body);
  });

  test('a 4096-character body is cut on both platforms, nothing dropped; a push that fits is recorded whole', async () => {
    const app = await pipeline.newApplication();
    await app.register('long-ios', ios('long-01', 'lena'));
    await app.register('long-android', android('fcm-long-02', 'lena'));
    const long = await app.send({ recipients: { user_ids: ['lena'] }, notification: { title: 'News', body: 'b'.repeat(4096) } });
    expect((await app.settled(long)).statistics).toMatchObject({ accepted: 2 });
    const cut = await truncations(app, long);
    expect(cut['long-ios']).toEqual({ title: null, body: expect.any(Number), dropped: [], badge: null });
    expect(cut['long-android']).toEqual({ title: null, body: expect.any(Number), dropped: [], badge: null });
    const apnsBody = (apnsTo('long-01')[0].payload as { aps: { alert: { body: string } } }).aps.alert.body;
    expect(apnsBody).toBe(`${'b'.repeat(cut['long-ios']!.body!)}…`);
    expect(bytes(apnsTo('long-01')[0].payload)).toBeGreaterThan(4090);

    const short = await app.send({ recipients: { user_ids: ['lena'] }, notification: { title: 'News', body: 'Short' } });
    await app.settled(short);
    expect(await truncations(app, short)).toEqual({ 'long-ios': null, 'long-android': null });
  });
});

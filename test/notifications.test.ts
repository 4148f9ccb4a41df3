import { randomUUID } from 'node:crypto';
import request from 'supertest';
import {
  ageIdempotencyKey,
  countFanoutJobs,
  countNotifications,
  fanoutJob,
  insertDelivery,
  writingTransaction,
  zeroStatistics,
} from './support/deliveries.ts';
import { completeNotification } from '../src/db/sql/notifications.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let application: TestApplication;
let token: string;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('notifications');
  token = await application.token();
});
afterAll(() => harness.close());

type Body = Record<string, unknown>;

function send(body: Body, options: { token?: string; key?: string } = {}) {
  const req = request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${options.token ?? token}`);
  if (options.key !== undefined) req.set('Idempotency-Key', options.key);
  return req.send(body);
}

function get(path: string, bearer = token) {
  return request(harness.app).get(path).set('Authorization', `Bearer ${bearer}`);
}

/** A valid send; `extra` replaces top-level members. */
function sendBody(extra: Body = {}): Body {
  return { recipients: { user_ids: ['user-1'] }, notification: { title: 'Hello' }, ...extra };
}

const withNotification = (notification: Body) => sendBody({ notification: { title: 'Hello', ...notification } });
const withOptions = (options: Body) => sendBody({ options });
const userIds = (count: number) => Array.from({ length: count }, (_, i) => `user-${i}`);
const url = (length: number) => {
  const prefix = 'https://cdn.example.com/';
  return prefix + 'a'.repeat(length - prefix.length);
};
const deepLink = (length: number) => {
  const prefix = 'myapp://orders/';
  return prefix + '1'.repeat(length - prefix.length);
};

describe('sending', () => {
  test('a send is accepted with 202, queued, zero statistics and the given content echoed', async () => {
    const data = { order_id: '1042', nested: { list: [1, 2, 3], flag: true } };
    const options = {
      ttl: 3600,
      priority: 'high',
      collapse_id: 'order-1042',
      sound: 'default',
      badge: 3,
      android_channel_id: 'orders',
      ios_category: 'ORDER',
      platform_overrides: { ios: { aps: { 'interruption-level': 'time-sensitive' } }, android: { notification: { color: '#ff5722' } } },
    };
    const res = await send({
      recipients: { user_ids: ['user-4821', 'user-977', 'user-3'] },
      notification: {
        title: 'Your order has shipped',
        body: 'Order 1042 is on its way.',
        image_url: 'https://cdn.example.com/orders/1042.png',
        action_url: 'myshop://orders/1042',
      },
      data,
      options,
    });
    expect(res.status).toBe(202);
    expect(Object.keys(res.body).sort()).toEqual(['data', 'meta']);
    expect(res.body.meta).toEqual({ accepted: true });
    const notification = res.body.data;
    expect(notification).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
      status: 'queued',
      notification: {
        title: 'Your order has shipped',
        body: 'Order 1042 is on its way.',
        image_url: 'https://cdn.example.com/orders/1042.png',
        action_url: 'myshop://orders/1042',
        localizations: {},
      },
      data,
      options,
      target_users: 3,
      statistics: zeroStatistics,
      created_at: expect.any(String),
      scheduled_for: null,
      processing_started_at: null,
      completed_at: null,
    });
    expect(Math.abs(Date.parse(notification.created_at) - Date.now())).toBeLessThan(60_000);
  });

  test('content fields left out are null, and data and options default to empty objects', async () => {
    const res = await send({ recipients: { user_ids: ['user-1'] }, notification: { title: 'Only a title' } });
    expect(res.status).toBe(202);
    expect(res.body.data.notification).toEqual({ title: 'Only a title', body: null, image_url: null, action_url: null, localizations: {} });
    expect(res.body.data.data).toEqual({});
    expect(res.body.data.options).toEqual({});
    expect(res.body.data.target_users).toBe(1);
  });

  test('the fanout job is enqueued under the notification id in the same transaction as the notification', async () => {
    const res = await send(sendBody({ recipients: { user_ids: ['a', 'b'] } }));
    expect(res.status).toBe(202);
    const id: string = res.body.data.id;
    const job = await fanoutJob(harness, id);
    expect(job).toBeDefined();
    expect(job!.id).toBe(id);
    expect(job!.name).toBe('fanout');
    expect(job!.state).toBe('created');
    expect(job!.data).toEqual({ notificationId: id, applicationId: application.id });
    expect(await writingTransaction(harness.orm, 'notifications', 'id = ?', [id])).toBe(job!.xmin);
  });

  test('the idempotency key is written in the same transaction as the notification and its job', async () => {
    const key = `same-tx-${randomUUID()}`;
    const res = await send(sendBody(), { key });
    expect(res.status).toBe(202);
    const id: string = res.body.data.id;
    const notificationTx = await writingTransaction(harness.orm, 'notifications', 'id = ?', [id]);
    const keyTx = await writingTransaction(harness.orm, 'idempotency_keys', 'application_id = ? and key = ?', [
      application.id,
      key,
    ]);
    expect(keyTx).toBe(notificationTx);
    expect((await fanoutJob(harness, id))!.xmin).toBe(notificationTx);
  });

  test('a data-only send (no title, no body) is accepted', async () => {
    const res = await send({ recipients: { user_ids: ['user-1'] }, notification: {}, data: { sync: 'inbox' } });
    expect(res.status).toBe(202);
    expect(res.body.data.notification).toEqual({ title: null, body: null, image_url: null, action_url: null, localizations: {} });
    expect(res.body.data.data).toEqual({ sync: 'inbox' });
  });

  test('a body-only send is accepted', async () => {
    const res = await send({ recipients: { user_ids: ['user-1'] }, notification: { body: 'Just a body' } });
    expect(res.status).toBe(202);
    expect(res.body.data.notification.body).toBe('Just a body');
  });

  test('user ids are stored exactly as sent, whatever characters they hold (found by fuzzing: a 500)', async () => {
    // Each of these is one user id to Postgres only if the text[] literal quotes it.
    const ids = ['\n', ' padded ', 'NULL', 'a,b', 'say "hi"', 'back\\slash', '{braces}', 'tab\tand\nnewline', 'plain'];
    const res = await send({ recipients: { user_ids: ids }, notification: { title: 'Hello' } });
    expect(res.status).toBe(202);
    expect(res.body.data.target_users).toBe(ids.length);
    const [row] = await harness.orm.em
      .fork()
      .execute<{ user_ids: string[] }[]>('select user_ids from notifications where id = ?', [res.body.data.id]);
    expect(row.user_ids).toEqual(ids);
  });
});

describe('send validation at each limit', () => {
  const accepted: { name: string; body: Body }[] = [
    { name: '1 user id', body: sendBody({ recipients: { user_ids: userIds(1) } }) },
    { name: '500 user ids', body: sendBody({ recipients: { user_ids: userIds(500) } }) },
    { name: 'a user id of 255 characters', body: sendBody({ recipients: { user_ids: ['u'.repeat(255)] } }) },
    { name: 'a title of 255 characters', body: withNotification({ title: 't'.repeat(255) }) },
    { name: 'a body of 3000 characters (fits the APNs payload)', body: withNotification({ body: 'b'.repeat(3000) }) },
    { name: 'an image_url of 2048 characters', body: withNotification({ image_url: url(2048) }) },
    { name: 'an action_url of 2048 characters', body: withNotification({ action_url: url(2048) }) },
    { name: 'a deep-link action_url', body: withNotification({ action_url: 'myapp://x/y' }) },
    { name: 'a deep-link action_url of 2048 characters', body: withNotification({ action_url: deepLink(2048) }) },
    { name: 'null content fields beside a title', body: withNotification({ body: null, image_url: null, action_url: null }) },
    { name: 'ttl 0', body: withOptions({ ttl: 0 }) },
    { name: 'ttl 2419200', body: withOptions({ ttl: 2419200 }) },
    { name: 'priority normal', body: withOptions({ priority: 'normal' }) },
    { name: 'priority high', body: withOptions({ priority: 'high' }) },
    { name: 'a collapse_id of 64 characters', body: withOptions({ collapse_id: 'c'.repeat(64) }) },
    { name: 'a sound of 255 characters', body: withOptions({ sound: 's'.repeat(255) }) },
    { name: 'an android_channel_id of 255 characters', body: withOptions({ android_channel_id: 'a'.repeat(255) }) },
    { name: 'an ios_category of 255 characters', body: withOptions({ ios_category: 'i'.repeat(255) }) },
    { name: 'badge 0', body: withOptions({ badge: 0 }) },
    {
      name: 'platform_overrides with ios and android objects',
      body: withOptions({
        platform_overrides: { ios: { aps: { 'relevance-score': 0.5 } }, android: { notification: { color: '#ff0000' } } },
      }),
    },
    { name: 'an empty platform_overrides', body: withOptions({ platform_overrides: {} }) },
    { name: 'data keys that only contain reserved words', body: sendBody({ data: { sender_from: 'x', my_aps: 1, heraldry: true } }) },
  ];

  test.each(accepted)('accepts $name', async ({ body }) => {
    const before = await countNotifications(harness.orm, application.id);
    const res = await send(body);
    expect(res.status).toBe(202);
    expect(res.body.meta.accepted).toBe(true);
    expect(res.body.data.options).toEqual(body.options ?? {});
    expect(await countNotifications(harness.orm, application.id)).toBe(before + 1);
  });

  const rejected: { name: string; body: Body; field: string }[] = [
    { name: '0 user ids', body: sendBody({ recipients: { user_ids: [] } }), field: 'recipients.user_ids' },
    { name: '501 user ids', body: sendBody({ recipients: { user_ids: userIds(501) } }), field: 'recipients.user_ids' },
    {
      name: 'duplicate user ids',
      body: sendBody({ recipients: { user_ids: ['user-1', 'user-2', 'user-1'] } }),
      field: 'recipients.user_ids',
    },
    { name: 'a user id of 256 characters', body: sendBody({ recipients: { user_ids: ['u'.repeat(256)] } }), field: 'recipients.user_ids.0' },
    { name: 'an empty user id', body: sendBody({ recipients: { user_ids: [''] } }), field: 'recipients.user_ids.0' },
    { name: 'missing recipients', body: { notification: { title: 'Hello' } }, field: 'recipients' },
    { name: 'a title of 256 characters', body: withNotification({ title: 't'.repeat(256) }), field: 'notification.title' },
    { name: 'a body of 4097 characters', body: withNotification({ body: 'b'.repeat(4097) }), field: 'notification.body' },
    { name: 'an image_url of 2049 characters', body: withNotification({ image_url: url(2049) }), field: 'notification.image_url' },
    { name: 'an image_url that is not a URI', body: withNotification({ image_url: 'not a uri' }), field: 'notification.image_url' },
    { name: 'an action_url of 2049 characters', body: withNotification({ action_url: url(2049) }), field: 'notification.action_url' },
    { name: 'ttl -1', body: withOptions({ ttl: -1 }), field: 'options.ttl' },
    { name: 'ttl 2419201', body: withOptions({ ttl: 2419201 }), field: 'options.ttl' },
    { name: 'a fractional ttl', body: withOptions({ ttl: 1.5 }), field: 'options.ttl' },
    { name: 'a priority outside the enumeration', body: withOptions({ priority: 'urgent' }), field: 'options.priority' },
    { name: 'a collapse_id of 65 characters', body: withOptions({ collapse_id: 'c'.repeat(65) }), field: 'options.collapse_id' },
    { name: 'a sound of 256 characters', body: withOptions({ sound: 's'.repeat(256) }), field: 'options.sound' },
    {
      name: 'an android_channel_id of 256 characters',
      body: withOptions({ android_channel_id: 'a'.repeat(256) }),
      field: 'options.android_channel_id',
    },
    { name: 'an ios_category of 256 characters', body: withOptions({ ios_category: 'i'.repeat(256) }), field: 'options.ios_category' },
    { name: 'badge -1', body: withOptions({ badge: -1 }), field: 'options.badge' },
    { name: 'an unknown option key', body: withOptions({ volume: 11 }), field: 'options.volume' },
    {
      name: 'an unknown platform_overrides member',
      body: withOptions({ platform_overrides: { windows: {} } }),
      field: 'options.platform_overrides.windows',
    },
    { name: 'a platform override that is not an object', body: withOptions({ platform_overrides: { ios: 'x' } }), field: 'options.platform_overrides.ios' },
    {
      name: 'no title, no body and no data',
      body: { recipients: { user_ids: ['user-1'] }, notification: {} },
      field: 'notification',
    },
    {
      name: 'null title and body with an empty data object',
      body: { recipients: { user_ids: ['user-1'] }, notification: { title: null, body: null }, data: {} },
      field: 'notification',
    },
    {
      // data cannot be cut: alone it is over both providers' 4096 bytes.
      name: 'a data object over the providers\' 4096-byte limit',
      body: sendBody({ data: { blob: 'x'.repeat(5000) } }),
      field: 'data',
    },
    { name: 'the reserved data key aps', body: sendBody({ data: { aps: { alert: 'x' } } }), field: 'data.aps' },
    { name: 'the reserved data key herald', body: sendBody({ data: { herald: 'x' } }), field: 'data.herald' },
    { name: 'a data key with the reserved herald_ prefix', body: sendBody({ data: { herald_delivery_id: 'x' } }), field: 'data.herald_delivery_id' },
    { name: 'the data key from (reserved by FCM)', body: sendBody({ data: { from: 'x' } }), field: 'data.from' },
    { name: 'the data key message_type (reserved by FCM)', body: sendBody({ data: { message_type: 'x' } }), field: 'data.message_type' },
    { name: 'a data key starting with google (reserved by FCM)', body: sendBody({ data: { 'google.c.a.e': '1' } }), field: 'data.google.c.a.e' },
    { name: 'a data key starting with gcm (reserved by FCM)', body: sendBody({ data: { 'gcm.n.e': '1' } }), field: 'data.gcm.n.e' },
  ];

  test.each(rejected)('rejects $name with 422 keyed $field and stores nothing', async ({ body, field }) => {
    const notificationsBefore = await countNotifications(harness.orm, application.id);
    const jobsBefore = await countFanoutJobs(harness, application.id);
    const res = await send(body);
    expect(res.status).toBe(422);
    expect(typeof res.body.message).toBe('string');
    expect(Object.keys(res.body.errors)).toContain(field);
    expect(res.body.errors[field].every((message: unknown) => typeof message === 'string')).toBe(true);
    expect(await countNotifications(harness.orm, application.id)).toBe(notificationsBefore);
    expect(await countFanoutJobs(harness, application.id)).toBe(jobsBefore);
  });

  test.each([
    ['a body of exactly 4096 ASCII characters', { body: 'b'.repeat(4096) }],
    ['1400 characters of 3 bytes each (4200 bytes)', { body: '€'.repeat(1400) }],
    ['1500 CJK characters', { body: '漢'.repeat(1500) }],
    ['a body of emoji ZWJ sequences (4095 characters, 14625 bytes)', { body: '👨‍👩‍👧‍👦'.repeat(585) }],
    ['a body of 2048 combining sequences (e + U+0301)', { body: 'e\u0301'.repeat(2048) }],
    ['a body of 4096 quotes and backslashes (8192 bytes as JSON)', { body: '"\\'.repeat(2048) }],
    [
      'all four content fields at their limits',
      { title: 't'.repeat(255), body: 'b'.repeat(4096), image_url: url(2048), action_url: deepLink(2048) },
    ],
  ])('%s is within the spec, so it is accepted (the push is cut to fit)', async (_name, notification) => {
    const before = await countNotifications(harness.orm, application.id);
    const res = await send(withNotification(notification));
    expect(res.status).toBe(202);
    // Stored and echoed whole: only each platform's push is cut.
    expect(res.body.data.notification).toEqual({ title: 'Hello', image_url: null, action_url: null, localizations: {}, ...notification });
    expect(await countNotifications(harness.orm, application.id)).toBe(before + 1);
  });

  test('data too large alone is 422 keyed data, naming each provider and the byte counts', async () => {
    const notification = { title: 't'.repeat(255), body: 'b'.repeat(4096), image_url: url(2048), action_url: url(2048) };
    const res = await send(sendBody({ notification, data: { blob: 'x'.repeat(4200) } }));
    expect(res.status).toBe(422);
    const message = (provider: string) =>
      new RegExp(`^The ${provider} payload would be \\d+ bytes with the title and body cut to "…" and without the URLs; the limit is 4096\\.$`);
    expect(res.body.errors).toEqual({ data: [expect.stringMatching(message('APNs')), expect.stringMatching(message('FCM'))] });
    expect(res.body.message).toBe(`${res.body.errors.data[0]} (and 1 more error)`);
    expect(Number(/would be (\d+) bytes/.exec(res.body.errors.data[0])![1])).toBeGreaterThan(4200);
  });

  test('data too large only for FCM is 422 naming FCM alone', async () => {
    // FCM carries a non-string data value as JSON text, so its quotes are escaped twice there.
    const res = await send(sendBody({ data: { nested: { text: '"'.repeat(1500) } } }));
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual({ data: [expect.stringMatching(/^The FCM payload would be \d+ bytes .*; the limit is 4096\.$/)] });
  });

  test('an Idempotency-Key of 255 characters is accepted', async () => {
    const res = await send(sendBody(), { key: `${randomUUID()}${'k'.repeat(255 - 36)}` });
    expect(res.status).toBe(202);
    expect(res.body.meta.accepted).toBe(true);
  });

  test('an Idempotency-Key of 256 characters is rejected with 422 keyed Idempotency-Key', async () => {
    const before = await countNotifications(harness.orm, application.id);
    const res = await send(sendBody(), { key: 'k'.repeat(256) });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toContain('Idempotency-Key');
    expect(await countNotifications(harness.orm, application.id)).toBe(before);
  });
});

describe('Idempotency-Key', () => {
  let app: TestApplication;
  let appToken: string;
  beforeEach(async () => {
    app = await harness.newApplication('idempotency');
    appToken = await app.token();
  });

  test('a retry with the same key and body returns the original notification without sending again', async () => {
    const body = sendBody({ data: { order: '1' } });
    const first = await send(body, { token: appToken, key: 'order-1' });
    expect(first.status).toBe(202);
    expect(first.body.meta.accepted).toBe(true);
    const second = await send(body, { token: appToken, key: 'order-1' });
    expect(second.status).toBe(202);
    expect(second.body.meta).toEqual({ accepted: false });
    expect(second.body.data).toEqual(first.body.data);
    expect(await countNotifications(harness.orm, app.id)).toBe(1);
    expect(await countFanoutJobs(harness, app.id)).toBe(1);
  });

  test('a retry whose body lists the same keys in another order is the same request', async () => {
    const first = await send(
      {
        recipients: { user_ids: ['a', 'b'] },
        notification: { title: 'T', body: 'B' },
        data: { x: 1, y: { p: 1, q: 2 } },
        options: { ttl: 60, priority: 'high' },
      },
      { token: appToken, key: 'reordered' },
    );
    expect(first.status).toBe(202);
    const second = await send(
      {
        options: { priority: 'high', ttl: 60 },
        data: { y: { q: 2, p: 1 }, x: 1 },
        notification: { body: 'B', title: 'T' },
        recipients: { user_ids: ['a', 'b'] },
      },
      { token: appToken, key: 'reordered' },
    );
    expect(second.status).toBe(202);
    expect(second.body.meta.accepted).toBe(false);
    expect(second.body.data.id).toBe(first.body.data.id);
    expect(await countNotifications(harness.orm, app.id)).toBe(1);
  });

  test('the same key with a different body is 409 (message only) and sends nothing', async () => {
    const first = await send(sendBody({ data: { n: 1 } }), { token: appToken, key: 'k1' });
    expect(first.status).toBe(202);
    const second = await send(sendBody({ data: { n: 2 } }), { token: appToken, key: 'k1' });
    expect(second.status).toBe(409);
    expect(second.body).toEqual({ message: 'This Idempotency-Key was already used for a different request.' });
    expect(await countNotifications(harness.orm, app.id)).toBe(1);
    expect(await countFanoutJobs(harness, app.id)).toBe(1);
  });

  test('user ids in another order are a different body', async () => {
    const first = await send(sendBody({ recipients: { user_ids: ['a', 'b'] } }), { token: appToken, key: 'order' });
    expect(first.status).toBe(202);
    const second = await send(sendBody({ recipients: { user_ids: ['b', 'a'] } }), { token: appToken, key: 'order' });
    expect(second.status).toBe(409);
  });

  test('the same key in another application is independent', async () => {
    const other = await harness.newApplication('idempotency-other');
    const otherToken = await other.token();
    const mine = await send(sendBody(), { token: appToken, key: 'shared-key' });
    const theirs = await send(sendBody({ data: { other: true } }), { token: otherToken, key: 'shared-key' });
    expect(mine.status).toBe(202);
    expect(theirs.status).toBe(202);
    expect(theirs.body.meta.accepted).toBe(true);
    expect(theirs.body.data.id).not.toBe(mine.body.data.id);
    expect(await countNotifications(harness.orm, app.id)).toBe(1);
    expect(await countNotifications(harness.orm, other.id)).toBe(1);
  });

  test('25 concurrent requests with the same key and body create exactly one notification', async () => {
    const body = sendBody({ recipients: { user_ids: ['u1', 'u2'] }, data: { burst: true } });
    const responses = await Promise.all(Array.from({ length: 25 }, () => send(body, { token: appToken, key: 'burst' })));
    expect(responses.map((r) => r.status)).toEqual(Array(25).fill(202));
    expect(new Set(responses.map((r) => r.body.data.id)).size).toBe(1);
    expect(responses.filter((r) => r.body.meta.accepted === true)).toHaveLength(1);
    expect(await countNotifications(harness.orm, app.id)).toBe(1);
    expect(await countFanoutJobs(harness, app.id)).toBe(1);
  });

  test('a key still inside its 24 hours (23 hours old) still returns the original', async () => {
    const first = await send(sendBody(), { token: appToken, key: 'recent' });
    await ageIdempotencyKey(harness.orm, app.id, 'recent', 23);
    const second = await send(sendBody(), { token: appToken, key: 'recent' });
    expect(second.status).toBe(202);
    expect(second.body.meta.accepted).toBe(false);
    expect(second.body.data.id).toBe(first.body.data.id);
    expect(await countNotifications(harness.orm, app.id)).toBe(1);
  });

  test('an expired key (25 hours old) creates a new notification and then protects it', async () => {
    const first = await send(sendBody(), { token: appToken, key: 'old' });
    expect(first.status).toBe(202);
    await ageIdempotencyKey(harness.orm, app.id, 'old', 25);
    const second = await send(sendBody(), { token: appToken, key: 'old' });
    expect(second.status).toBe(202);
    expect(second.body.meta.accepted).toBe(true);
    expect(second.body.data.id).not.toBe(first.body.data.id);
    expect(await countNotifications(harness.orm, app.id)).toBe(2);
    expect(await countFanoutJobs(harness, app.id)).toBe(2);
    const third = await send(sendBody(), { token: appToken, key: 'old' });
    expect(third.body.meta.accepted).toBe(false);
    expect(third.body.data.id).toBe(second.body.data.id);
  });

  test('an expired key may be reused with a different body', async () => {
    await send(sendBody({ data: { v: 1 } }), { token: appToken, key: 'reuse' });
    await ageIdempotencyKey(harness.orm, app.id, 'reuse', 25);
    const res = await send(sendBody({ data: { v: 2 } }), { token: appToken, key: 'reuse' });
    expect(res.status).toBe(202);
    expect(res.body.meta.accepted).toBe(true);
    expect(res.body.data.data).toEqual({ v: 2 });
  });

  test('sends without a key are never deduplicated', async () => {
    const a = await send(sendBody(), { token: appToken });
    const b = await send(sendBody(), { token: appToken });
    expect(a.body.data.id).not.toBe(b.body.data.id);
    expect(b.body.meta.accepted).toBe(true);
    expect(await countNotifications(harness.orm, app.id)).toBe(2);
  });
});

describe('reading notifications', () => {
  test('a sent notification reads back as sent', async () => {
    const sent = await send(sendBody({ data: { k: 'v' }, options: { ttl: 10 } }));
    const res = await get(`/api/v1/notifications/${sent.body.data.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: sent.body.data });
  });

  test("another application's notification is 404", async () => {
    const sent = await send(sendBody());
    const other = await harness.newApplication('reader');
    const res = await get(`/api/v1/notifications/${sent.body.data.id}`, await other.token());
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });

  test('an unknown notification id is 404', async () => {
    const res = await get(`/api/v1/notifications/${randomUUID()}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });

  test('a notification id that is not a UUID is 422 keyed notificationId', async () => {
    const res = await get('/api/v1/notifications/not-a-uuid');
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['notificationId']);
  });

  describe('listing', () => {
    let lister: TestApplication;
    let listerToken: string;
    let ids: string[];
    beforeAll(async () => {
      lister = await harness.newApplication('lister');
      listerToken = await lister.token();
      ids = [];
      for (let i = 0; i < 5; i++) {
        const res = await send(sendBody({ data: { n: i } }), { token: listerToken });
        expect(res.status).toBe(202);
        ids.push(res.body.data.id);
      }
    });

    test('lists newest first and pages through 5 notifications 2 at a time (2, 2, 1)', async () => {
      const newestFirst = [...ids].reverse();
      const page1 = await get('/api/v1/notifications?limit=2', listerToken);
      expect(page1.status).toBe(200);
      expect(page1.body.data.map((n: { id: string }) => n.id)).toEqual(newestFirst.slice(0, 2));
      expect(page1.body.meta.next_cursor).toEqual(expect.any(String));

      const page2 = await get(
        `/api/v1/notifications?limit=2&cursor=${encodeURIComponent(page1.body.meta.next_cursor)}`,
        listerToken,
      );
      expect(page2.status).toBe(200);
      expect(page2.body.data.map((n: { id: string }) => n.id)).toEqual(newestFirst.slice(2, 4));
      expect(page2.body.meta.next_cursor).toEqual(expect.any(String));

      const page3 = await get(
        `/api/v1/notifications?limit=2&cursor=${encodeURIComponent(page2.body.meta.next_cursor)}`,
        listerToken,
      );
      expect(page3.status).toBe(200);
      expect(page3.body.data.map((n: { id: string }) => n.id)).toEqual(newestFirst.slice(4));
      expect(page3.body.meta.next_cursor).toBeNull();
    });

    test('a page that ends exactly at the last notification has no next cursor', async () => {
      const res = await get('/api/v1/notifications?limit=5', listerToken);
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(5);
      expect(res.body.meta.next_cursor).toBeNull();
    });

    test('without a limit the whole (short) list comes in one page, as the notifications read one by one', async () => {
      const res = await get('/api/v1/notifications', listerToken);
      expect(res.status).toBe(200);
      expect(res.body.data.map((n: { id: string }) => n.id)).toEqual([...ids].reverse());
      const one = await get(`/api/v1/notifications/${ids[0]}`, listerToken);
      expect(res.body.data[4]).toEqual(one.body.data);
      expect(res.body.meta.next_cursor).toBeNull();
    });

    test("the list never shows another application's notifications", async () => {
      const foreign = await send(sendBody());
      const res = await get('/api/v1/notifications?limit=100', listerToken);
      expect(res.status).toBe(200);
      const listed = res.body.data.map((n: { id: string }) => n.id);
      expect(listed).not.toContain(foreign.body.data.id);
      expect([...listed].sort()).toEqual([...ids].sort());
    });

    test('limit 1 and limit 100 are accepted', async () => {
      const one = await get('/api/v1/notifications?limit=1', listerToken);
      expect(one.status).toBe(200);
      expect(one.body.data).toHaveLength(1);
      const hundred = await get('/api/v1/notifications?limit=100', listerToken);
      expect(hundred.status).toBe(200);
      expect(hundred.body.data).toHaveLength(5);
    });

    test.each([0, 101])('limit %i is 422 keyed limit', async (limit) => {
      const res = await get(`/api/v1/notifications?limit=${limit}`, listerToken);
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(['limit']);
    });

    test.each(['not-a-cursor', Buffer.from('12345').toString('base64url')])('cursor %s is 422 keyed cursor', async (cursor) => {
      const res = await get(`/api/v1/notifications?cursor=${cursor}`, listerToken);
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(['cursor']);
    });

    test('status lists only the notifications in that status, newest first, a page at a time with the same filter', async () => {
      const app = await harness.newApplication('status-filter');
      const bearer = await app.token();
      const sent: string[] = [];
      for (let i = 0; i < 5; i++) sent.push((await send(sendBody(), { token: bearer })).body.data.id);
      // Oldest, middle and newest fail; the other two stay queued.
      const failed = [sent[0], sent[2], sent[4]];
      for (const id of failed) await completeNotification(harness.orm.em.fork(), id, 'failed');

      const page1 = await get('/api/v1/notifications?status=failed&limit=2', bearer);
      expect(page1.status).toBe(200);
      expect(page1.body.data.map((n: { id: string; status: string }) => [n.id, n.status])).toEqual([
        [sent[4], 'failed'],
        [sent[2], 'failed'],
      ]);
      const page2 = await get(`/api/v1/notifications?status=failed&limit=2&cursor=${page1.body.meta.next_cursor}`, bearer);
      expect(page2.body.data.map((n: { id: string }) => n.id)).toEqual([sent[0]]);
      expect(page2.body.meta.next_cursor).toBeNull();

      const queued = await get('/api/v1/notifications?status=queued', bearer);
      expect(queued.body.data.map((n: { id: string }) => n.id)).toEqual([sent[3], sent[1]]);
      expect((await get('/api/v1/notifications?status=completed', bearer)).body).toEqual({ data: [], meta: { next_cursor: null } });
    });

    test('a status that is not a notification status is 422 keyed status', async () => {
      const res = await get('/api/v1/notifications?status=sent', listerToken);
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(['status']);
    });
  });
});

describe('deliveries by platform and reason', () => {
  let bearer: string;
  let notificationId: string;
  beforeAll(async () => {
    const app = await harness.newApplication('breakdown');
    bearer = await app.token();
    notificationId = (await send({ recipients: { user_ids: ['ana', 'ben'] }, notification: { title: 'Hi' } }, { token: bearer })).body.data.id;
    const base = { applicationId: app.id, notificationId, installationRowId: null };
    const rows: [string, string, 'ios' | 'android', 'accepted' | 'failed' | 'skipped' | 'pending', string | null][] = [
      ['ana-1', 'ana', 'ios', 'accepted', null],
      ['ana-2', 'ana', 'android', 'accepted', null],
      ['ana-3', 'ana', 'ios', 'failed', 'Unregistered'],
      ['ben-1', 'ben', 'ios', 'failed', 'Unregistered'],
      ['ben-2', 'ben', 'android', 'failed', 'provider unreachable'],
      ['ben-3', 'ben', 'android', 'skipped', 'permission_denied'],
      ['ben-4', 'ben', 'ios', 'pending', null],
    ];
    for (const [installation, user, platform, state, reason] of rows) {
      await insertDelivery(harness.orm, { ...base, clientInstallationId: installation, userId: user, platform, state, reason });
    }
  });
  // insertDelivery's ids are random, so the fanout order (by id) is too: compare as sets.
  const installations = (res: request.Response) => res.body.data.map((d: { installation_id: string }) => d.installation_id).sort();

  test('the breakdown counts every delivery by state, platform and reason, largest first', async () => {
    const res = await get(`/api/v1/notifications/${notificationId}/breakdown`, bearer);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([
      { state: 'failed', platform: 'ios', reason: 'Unregistered', deliveries: 2 },
      { state: 'accepted', platform: 'android', reason: null, deliveries: 1 },
      { state: 'accepted', platform: 'ios', reason: null, deliveries: 1 },
      { state: 'failed', platform: 'android', reason: 'provider unreachable', deliveries: 1 },
      { state: 'pending', platform: 'ios', reason: null, deliveries: 1 },
      { state: 'skipped', platform: 'android', reason: 'permission_denied', deliveries: 1 },
    ]);
    // It adds up to the counters.
    const { statistics } = (await get(`/api/v1/notifications/${notificationId}`, bearer)).body.data;
    const sum = (state: string) =>
      res.body.data.filter((row: { state: string }) => row.state === state).reduce((n: number, row: { deliveries: number }) => n + row.deliveries, 0);
    expect([sum('accepted'), sum('failed'), sum('skipped')]).toEqual([statistics.accepted, statistics.failed, statistics.skipped]);
  });

  test('a notification not fanned out yet has an empty breakdown; an unknown or foreign one is 404', async () => {
    const fresh = (await send(sendBody(), { token: bearer })).body.data.id;
    expect((await get(`/api/v1/notifications/${fresh}/breakdown`, bearer)).body).toEqual({ data: [] });
    expect((await get(`/api/v1/notifications/${notificationId}/breakdown`)).status).toBe(404);
    expect((await get(`/api/v1/notifications/${randomUUID()}/breakdown`, bearer)).status).toBe(404);
    expect((await get('/api/v1/notifications/nope/breakdown', bearer)).status).toBe(422);
  });

  test('platform, reason, state and user_id filter the deliveries together', async () => {
    const list = (query: string) => get(`/api/v1/notifications/${notificationId}/deliveries?${query}`, bearer);
    expect(installations(await list('platform=android'))).toEqual(['ana-2', 'ben-2', 'ben-3']);
    expect(installations(await list('reason=Unregistered'))).toEqual(['ana-3', 'ben-1']);
    expect(installations(await list('reason=provider unreachable'))).toEqual(['ben-2']);
    expect(installations(await list('reason=provider%20unreachable&platform=ios'))).toEqual([]);
    expect(installations(await list('state=failed&platform=ios&user_id=ben'))).toEqual(['ben-1']);
  });

  test('filtered pages follow the cursor with the same filters', async () => {
    const first = await get(`/api/v1/notifications/${notificationId}/deliveries?platform=ios&limit=2`, bearer);
    const second = await get(`/api/v1/notifications/${notificationId}/deliveries?platform=ios&limit=2&cursor=${first.body.meta.next_cursor}`, bearer);
    expect([first.body.data.length, second.body.data.length, second.body.meta.next_cursor]).toEqual([2, 2, null]);
    expect([...installations(first), ...installations(second)].sort()).toEqual(['ana-1', 'ana-3', 'ben-1', 'ben-4']);
  });

  test.each([
    ['platform=windows', 'platform'],
    ['reason=', 'reason'],
    [`reason=${'r'.repeat(256)}`, 'reason'],
  ])('%s is 422 keyed %s', async (query, field) => {
    const res = await get(`/api/v1/notifications/${notificationId}/deliveries?${query}`, bearer);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
  });
});

describe('statistics', () => {
  async function register(bearer: string, installationId: string, userId: string, platform: 'ios' | 'android') {
    const res = await request(harness.app)
      .put(`/api/v1/installations/${installationId}`)
      .set('Authorization', `Bearer ${bearer}`)
      .send({ platform, provider: { identifier: `token-${installationId}` }, user_id: userId });
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  }

  test('statistics count the delivery rows of the notification by user, installation and outcome', async () => {
    const app = await harness.newApplication('statistics');
    const bearer = await app.token();
    const sent = await send({ recipients: { user_ids: ['alice', 'bob', 'carol'] }, notification: { title: 'Hi' } }, { token: bearer });
    const other = await send({ recipients: { user_ids: ['alice'] }, notification: { title: 'Other' } }, { token: bearer });
    const notificationId: string = sent.body.data.id;

    const alicePhone = await register(bearer, 'alice-phone', 'alice', 'ios');
    const aliceTablet = await register(bearer, 'alice-tablet', 'alice', 'android');
    const bobPhone = await register(bearer, 'bob-phone', 'bob', 'ios');
    const bobWatch = await register(bearer, 'bob-watch', 'bob', 'ios');
    const base = { applicationId: app.id, notificationId };
    await insertDelivery(harness.orm, { ...base, installationRowId: alicePhone, clientInstallationId: 'alice-phone', userId: 'alice', state: 'accepted' });
    await insertDelivery(harness.orm, {
      ...base,
      installationRowId: aliceTablet,
      clientInstallationId: 'alice-tablet',
      userId: 'alice',
      platform: 'android',
      state: 'failed',
      reason: 'UNREGISTERED',
    });
    await insertDelivery(harness.orm, {
      ...base,
      installationRowId: bobPhone,
      clientInstallationId: 'bob-phone',
      userId: 'bob',
      state: 'skipped',
      reason: 'permission_denied',
    });
    await insertDelivery(harness.orm, { ...base, installationRowId: bobWatch, clientInstallationId: 'bob-watch', userId: 'bob', state: 'pending' });
    // A delivery of another notification must not count here.
    await insertDelivery(harness.orm, {
      applicationId: app.id,
      notificationId: other.body.data.id,
      installationRowId: alicePhone,
      clientInstallationId: 'alice-phone',
      userId: 'alice',
      state: 'accepted',
    });

    const expected = { users: 2, installations: 4, accepted: 1, failed: 1, skipped: 1, received: 0, displayed: 0, opened: 0 };
    const one = await get(`/api/v1/notifications/${notificationId}`, bearer);
    expect(one.status).toBe(200);
    expect(one.body.data.statistics).toEqual(expected);
    expect(one.body.data.target_users).toBe(3);

    const list = await get('/api/v1/notifications', bearer);
    const listed = list.body.data.find((n: { id: string }) => n.id === notificationId);
    expect(listed.statistics).toEqual(expected);
    const otherListed = list.body.data.find((n: { id: string }) => n.id === other.body.data.id);
    expect(otherListed.statistics).toEqual({ ...zeroStatistics, users: 1, installations: 1, accepted: 1 });
  });

  test('a delivery whose installation was deleted still counts', async () => {
    const app = await harness.newApplication('statistics-deleted');
    const bearer = await app.token();
    const sent = await send({ recipients: { user_ids: ['dora'] }, notification: { title: 'Hi' } }, { token: bearer });
    await insertDelivery(harness.orm, {
      applicationId: app.id,
      notificationId: sent.body.data.id,
      installationRowId: null,
      clientInstallationId: 'gone-phone',
      userId: 'dora',
      state: 'accepted',
    });
    const res = await get(`/api/v1/notifications/${sent.body.data.id}`, bearer);
    expect(res.body.data.statistics).toEqual({ ...zeroStatistics, users: 1, installations: 1, accepted: 1 });
  });

  test('the Idempotency-Key replay shows the current statistics of the original', async () => {
    const app = await harness.newApplication('statistics-replay');
    const bearer = await app.token();
    const body = { recipients: { user_ids: ['erin'] }, notification: { title: 'Hi' } };
    const first = await send(body, { token: bearer, key: 'replay-stats' });
    await insertDelivery(harness.orm, {
      applicationId: app.id,
      notificationId: first.body.data.id,
      installationRowId: null,
      clientInstallationId: 'erin-phone',
      userId: 'erin',
      state: 'failed',
      reason: 'BadDeviceToken',
    });
    const replay = await send(body, { token: bearer, key: 'replay-stats' });
    expect(replay.status).toBe(202);
    expect(replay.body.data.statistics).toEqual({ ...zeroStatistics, users: 1, installations: 1, failed: 1 });
  });
});

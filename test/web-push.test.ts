// Web Push end to end on real Postgres: a send reaches web installations through the workers, the
// web-push library and the Web Push simulator, which checks the VAPID JWT and decrypts what it
// receives. Every answer a push service gives becomes its outcome: 201 accepted; 404 and 410
// invalidate (unless the subscription changed since the push read it); 413 and 400 fail the push;
// 429 and 5xx are retried after Retry-After; a 401 or 403 refusing the JWT makes the credentials
// unhealthy, one saying the subscription was made with another key invalidates it.
import request from 'supertest';
import { generateVapidKeys } from '../src/domain/credentials.ts';
import { fitToPlatform, payloadBytes } from '../src/domain/payloads.ts';
import { webPushPlaintextLimit, webPushTopic } from '../src/domain/web-push.ts';
import { startPipeline, web, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

let pipeline: Pipeline;
let app: PipelineApplication;

beforeAll(async () => {
  pipeline = await startPipeline();
  app = await pipeline.newApplication({ webpush: true });
});
afterAll(() => pipeline.close());
afterEach(() => {
  pipeline.webPush.setRules([]);
  pipeline.webPush.setLatency(undefined);
});

let counter = 0;
const user = (label: string) => `${label}-${++counter}`;
const receivedBy = (subscriptionEndpoint: string) => pipeline.webPush.received.filter((got) => subscriptionEndpoint.endsWith(`/push/${got.subscription}`));
const idOf = (endpoint: string) => endpoint.split('/').pop()!;

/** A browser subscribed with the application's key, registered as `installationId` for `userId`. */
async function subscribed(installationId: string, userId: string) {
  const subscription = pipeline.webPush.subscribe(pipeline.credentials.webpush.publicKey);
  await app.register(installationId, web(subscription, userId));
  return subscription;
}

const appHealth = async () =>
  (await request(pipeline.harness.app).get('/api/v1/app').set('Authorization', `Bearer ${app.server}`).expect(200)).body.data.credentials.web;

test('a push arrives encrypted with the VAPID key, TTL, Urgency and Topic; the service worker gets Herald\'s JSON', async () => {
  const userId = user('ada');
  const subscription = await subscribed(user('browser'), userId);
  const id = await app.send({
    recipients: { user_ids: [userId] },
    notification: { title: 'Sale', body: 'Half price', image_url: 'https://example.com/a.png', action_url: 'https://example.com/sale' },
    data: { order: 42 },
    options: { ttl: 600, priority: 'high', collapse_id: 'summer sale 2027 — everything must go' },
  });
  expect((await app.settled(id)).status).toBe('completed');
  const [delivery] = await app.deliveries(id);
  expect(delivery).toMatchObject({ platform: 'web', state: 'accepted', truncation: null });
  const [got] = receivedBy(subscription.endpoint);
  expect(delivery.provider_message_id).toMatch(new RegExp(`^${pipeline.webPush.url}/message/`));
  expect(got).toMatchObject({ status: 201, urgency: 'high', topic: webPushTopic('summer sale 2027 — everything must go'), contentEncoding: 'aes128gcm' });
  expect(Number(got.ttl)).toBeGreaterThan(590);
  expect(Number(got.ttl)).toBeLessThanOrEqual(600);
  expect(got.vapid).toMatchObject({ audience: pipeline.webPush.url, subject: 'mailto:tests@example.com', publicKey: pipeline.credentials.webpush.publicKey });
  expect(got.payload).toEqual({
    title: 'Sale',
    body: 'Half price',
    image: 'https://example.com/a.png',
    url: 'https://example.com/sale',
    data: { order: 42 },
    herald: { delivery_id: delivery.id, notification_id: id, tag: 'summer sale 2027 — everything must go' },
  });
  expect((await appHealth()).status).toBe('healthy');
});

test('the VAPID header is signed once and reused for later pushes, not per push', async () => {
  const userId = user('reuse');
  const first = await subscribed(user('reuse-a'), userId);
  const second = await subscribed(user('reuse-b'), userId);
  for (const title of ['one', 'two']) expect((await app.settled(await app.send({ recipients: { user_ids: [userId] }, notification: { title } }))).status).toBe('completed');
  const expiries = [...receivedBy(first.endpoint), ...receivedBy(second.endpoint)].map((got) => got.vapid?.expiresAt);
  expect(expiries).toHaveLength(4);
  expect(new Set(expiries).size).toBe(1);
});

test.each([
  ['NotFound', 404],
  ['Gone', 410],
])('a %s (%i) answer fails the push and invalidates the installation', async (reason) => {
  const userId = user(reason);
  const installationId = user('gone');
  const subscription = await subscribed(installationId, userId);
  pipeline.webPush.setRules([{ prefix: idOf(subscription.endpoint), reason }]);
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' } });
  expect((await app.settled(id)).status).toBe('failed');
  expect((await app.deliveries(id))[0]).toMatchObject({ state: 'failed', reason });
  expect(await app.installation(installationId)).toMatchObject({ status: 'invalid', invalid_reason: reason });
});

test('a 410 for a subscription the browser replaced while the push was out does not invalidate the new one', async () => {
  const userId = user('renewed');
  const installationId = user('renewed-browser');
  const subscription = await subscribed(installationId, userId);
  pipeline.webPush.setRules([{ prefix: idOf(subscription.endpoint), reason: 'Gone' }]);
  pipeline.webPush.setLatency(1500);
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' } });
  // The push has reached the service, which holds its 410 back: the page renews its keys meanwhile.
  await waitFor(() => receivedBy(subscription.endpoint).length, (count) => count === 1);
  const renewed = pipeline.webPush.subscribe(pipeline.credentials.webpush.publicKey);
  await app.register(installationId, web({ ...subscription, keys: renewed.keys }, userId));
  expect((await app.settled(id)).status).toBe('failed');
  expect(await app.installation(installationId)).toMatchObject({ status: 'active', invalid_reason: null });
});

test('a 403 for a subscription made with another key invalidates it; the credentials stay healthy', async () => {
  const userId = user('other-key');
  const installationId = user('other-key-browser');
  const subscription = pipeline.webPush.subscribe(generateVapidKeys().publicKey);
  await app.register(installationId, web(subscription, userId));
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' } });
  expect((await app.settled(id)).status).toBe('failed');
  expect((await app.deliveries(id))[0]).toMatchObject({ state: 'failed', reason: 'VapidPkHashMismatch' });
  expect(await app.installation(installationId)).toMatchObject({ status: 'invalid', invalid_reason: 'VapidPkHashMismatch' });
  expect((await appHealth()).status).toBe('healthy');
});

test("Firefox's 401 \"VAPID public key mismatch\" is that subscription's end too, not the credentials'", async () => {
  const userId = user('firefox-other-key');
  const installationId = user('firefox');
  const subscription = await subscribed(installationId, userId);
  pipeline.webPush.setRules([{ prefix: idOf(subscription.endpoint), reason: 'Unauthorized', status: 401, message: 'VAPID public key mismatch' }]);
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' } });
  expect((await app.settled(id)).status).toBe('failed');
  expect(await app.installation(installationId)).toMatchObject({ status: 'invalid', invalid_reason: 'VapidPkHashMismatch' });
  expect((await appHealth()).status).toBe('healthy');
});

test.each([
  ['PayloadTooLarge', 'PayloadTooLarge'],
  ['BadRequest', 'BadRequest'],
])('a %s answer fails that push with its reason and keeps the installation', async (rule, reason) => {
  const userId = user(rule);
  const installationId = user('kept');
  const subscription = await subscribed(installationId, userId);
  pipeline.webPush.setRules([{ prefix: idOf(subscription.endpoint), reason: rule }]);
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' } });
  expect((await app.settled(id)).status).toBe('failed');
  expect((await app.deliveries(id))[0]).toMatchObject({ state: 'failed', reason, attempts: 1 });
  expect((await app.installation(installationId)).status).toBe('active');
});

test.each([
  ['TooManyRequests', 429],
  ['ServiceUnavailable', 503],
  ['InternalServerError', 500],
])('the answer %s (%i) is retried after its Retry-After, then delivered', async (reason) => {
  const userId = user(reason);
  const subscription = await subscribed(user('retried'), userId);
  pipeline.webPush.setRules([{ prefix: idOf(subscription.endpoint), reason, retryAfter: 1 }]);
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' } });
  const first = await waitFor(() => receivedBy(subscription.endpoint), (got) => got.length === 1);
  pipeline.webPush.setRules([]);
  expect((await app.settled(id)).status).toBe('completed');
  const [retry] = receivedBy(subscription.endpoint).slice(1);
  // Not before the second the service asked for.
  expect(retry.at - first[0].at).toBeGreaterThanOrEqual(950);
  expect((await app.deliveries(id))[0]).toMatchObject({ state: 'accepted', attempts: 2 });
});

describe('a refused VAPID JWT', () => {
  test.each([
    ['BadJwtToken', 401],
    ['Forbidden', 403],
  ])('%s (%i) fails the push with provider_credentials and makes the credentials unhealthy until a push is accepted', async (reason) => {
    const userId = user(reason);
    const installationId = user('vapid-refused');
    const subscription = await subscribed(installationId, userId);
    pipeline.webPush.setRules([{ prefix: idOf(subscription.endpoint), reason }]);
    const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' } });
    expect((await app.settled(id)).status).toBe('failed');
    expect((await app.deliveries(id))[0]).toMatchObject({ state: 'failed', reason: 'provider_credentials' });
    expect(await appHealth()).toMatchObject({ status: 'unhealthy', reason });
    expect((await app.installation(installationId)).status).toBe('active');
    pipeline.webPush.setRules([]);
    expect((await app.settled(await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Again' } }))).status).toBe('completed');
    expect((await appHealth()).status).toBe('healthy');
  });
});

describe('the 3,993-byte plaintext', () => {
  test('a long body is cut so that the JSON the browser decrypts is at most 3,993 bytes, and the cut is recorded', async () => {
    const userId = user('long');
    const subscription = await subscribed(user('long-browser'), userId);
    const body = 'é'.repeat(1999);
    const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Long', body } });
    expect((await app.settled(id)).status).toBe('completed');
    const [delivery] = await app.deliveries(id);
    const [got] = receivedBy(subscription.endpoint);
    const plaintext = Buffer.byteLength(JSON.stringify(got.payload));
    expect(plaintext).toBeLessThanOrEqual(webPushPlaintextLimit);
    expect(got.bytes).toBeLessThanOrEqual(4096);
    const kept = delivery.truncation!.body!;
    expect(delivery.truncation).toEqual({ title: null, body: kept, dropped: [], badge: null });
    expect((got.payload as { body: string }).body).toBe(`${'é'.repeat(kept)}…`);
    // The longest that fits: one more character would not.
    const content = { notification: { title: 'Long', body: `${'é'.repeat(kept + 1)}…` } };
    expect(payloadBytes(content, 'web')).toBeGreaterThan(webPushPlaintextLimit);
  });

  test('the limit is 4,096 less the aes128gcm header (86), the padding delimiter (1) and the tag (16)', () => {
    expect(webPushPlaintextLimit).toBe(3993);
    const fitted = fitToPlatform({ notification: { title: 'T', body: 'x'.repeat(5000) } }, 'web');
    expect(payloadBytes(fitted.content, 'web')).toBeLessThanOrEqual(3993);
    expect(payloadBytes({ notification: { title: 'T', body: `${fitted.content.notification.body!.slice(0, -1)}x…` } }, 'web')).toBeGreaterThan(3993);
  });

  test('data that fits APNs and FCM but not Web Push fails the web push alone, without sending it', async () => {
    const userId = user('big-data');
    const subscription = await subscribed(user('big-data-browser'), userId);
    const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Hi' }, data: { blob: 'x'.repeat(3900) } });
    expect((await app.settled(id)).status).toBe('failed');
    expect((await app.deliveries(id))[0]).toMatchObject({ state: 'failed', reason: 'PayloadTooLarge' });
    expect(receivedBy(subscription.endpoint)).toEqual([]);
  });
});

test('an audience of platform web reaches the browsers alone, each in its language; statistics and the breakdown count them as web', async () => {
  const shop = await pipeline.newApplication({ apns: true, webpush: true });
  const browser = pipeline.webPush.subscribe(pipeline.credentials.webpush.publicKey);
  await shop.register('fr-browser', web(browser, 'zoe', { device: { locale: 'fr-FR' } }));
  await shop.register('zoe-phone', { platform: 'ios', provider: { identifier: 'phone-zoe' }, user_id: 'zoe', permission: 'authorized' });
  const id = await shop.send({
    recipients: { audience: { platforms: ['web'] } },
    notification: { title: 'Sale', body: 'Today', localizations: { fr: { title: 'Soldes', body: "Aujourd'hui" } } },
  });
  const done = await shop.settled(id);
  expect(done.statistics).toMatchObject({ installations: 1, accepted: 1 });
  expect((await shop.deliveries(id)).map(({ platform, locale }) => ({ platform, locale }))).toEqual([{ platform: 'web', locale: 'fr' }]);
  expect(receivedBy(browser.endpoint)[0].payload).toMatchObject({ title: 'Soldes', body: "Aujourd'hui" });
  const breakdown = await request(pipeline.harness.app).get(`/api/v1/notifications/${id}/breakdown`).set('Authorization', `Bearer ${shop.server}`).expect(200);
  expect(JSON.stringify(breakdown.body)).toContain('"web"');
  const counted = await request(pipeline.harness.app)
    .post('/api/v1/audiences/count')
    .set('Authorization', `Bearer ${shop.server}`)
    .send({ audience: { platforms: ['web'] } })
    .expect(200);
  expect(counted.body.data).toMatchObject({ installations: 1, users: 1 });
});

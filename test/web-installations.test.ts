// Web installations (platform `web`): a browser's PushSubscription.toJSON() registered over HTTP
// against real Postgres. Only https endpoints of known push services (or hosts an operator adds)
// are taken, judged by the webhook guard's rules on their address; both keys are required and
// checked; keys belong to `web` alone; new keys on the same endpoint are a new subscription.
import { createECDH, randomBytes } from 'node:crypto';
import request from 'supertest';
import { Installation } from '../src/db/entities.ts';
import { knownPushServiceHosts, subscriptionKeyProblems, webPushEndpointProblem, webPushTopic } from '../src/domain/web-push.ts';
import { startHarness, type Harness } from './support/harness.ts';

let harness: Harness;
let token: string;
let applicationId: string;

beforeAll(async () => {
  harness = await startHarness({ webPushEndpoints: { extraHosts: ['push.example.net', 'sim.example.org:8443'], allowPrivate: false } });
  const application = await harness.newApplication('web installations');
  applicationId = application.id;
  token = await application.token(['installations:write', 'installations:read']);
});
afterAll(() => harness.close());

let counter = 0;
const newId = (label: string) => `${label}-${Date.now()}-${++counter}`;
const put = (installationId: string, body: unknown) =>
  request(harness.app).put(`/api/v1/installations/${installationId}`).set('Authorization', `Bearer ${token}`).send(body as object);

/** Keys as a browser makes them: a fresh P-256 point and 16 random bytes. */
function browserKeys() {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') };
}
const chromeEndpoint = () => `https://fcm.googleapis.com/fcm/send/${randomBytes(8).toString('hex')}:APA91b${randomBytes(20).toString('base64url')}`;

describe('registering a subscription', () => {
  test('a Chrome subscription is created as web_push_subscription, its keys and expiry kept and never shown', async () => {
    const id = newId('chrome');
    const keys = browserKeys();
    const endpoint = chromeEndpoint();
    const res = await put(id, { platform: 'web', provider: { identifier: endpoint, keys, expirationTime: 1_900_000_000_000 }, user_id: 'ada' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ platform: 'web', provider_identifier_type: 'web_push_subscription', status: 'active', user_id: 'ada' });
    expect(JSON.stringify(res.body)).not.toContain(keys.p256dh);
    expect(JSON.stringify(res.body)).not.toContain(endpoint);
    const [row] = await harness.orm.em.fork().find(Installation, { applicationId, installationId: id });
    expect(row.pushKeys).toEqual({ ...keys, expirationTime: 1_900_000_000_000 });
  });

  test('new keys on the same endpoint are a new subscription: identifier_updated_at moves, and an invalid one is active again', async () => {
    const id = newId('rekeyed');
    const endpoint = chromeEndpoint();
    const first = browserKeys();
    const created = (await put(id, { platform: 'web', provider: { identifier: endpoint, keys: first } }).expect(201)).body.data;
    // The same subscription again (a page registers at every visit), even with an expiry now: nothing moves.
    const again = (await put(id, { platform: 'web', provider: { identifier: endpoint, keys: first, expirationTime: null } }).expect(200)).body.data;
    expect(again.identifier_updated_at).toBe(created.identifier_updated_at);
    await harness.orm.em.fork().nativeUpdate(Installation, { applicationId, installationId: id }, { status: 'invalid', invalidatedAt: new Date(), invalidReason: 'Gone' });
    const rekeyed = (await put(id, { platform: 'web', provider: { identifier: endpoint, keys: browserKeys() } }).expect(200)).body.data;
    expect(rekeyed).toMatchObject({ status: 'active', invalid_reason: null, invalidated_at: null });
    expect(Date.parse(rekeyed.identifier_updated_at)).toBeGreaterThan(Date.parse(created.identifier_updated_at));
  });

  test.each([
    ['Firefox', 'https://updates.push.services.mozilla.com/wpush/v2/gAAAAABm'],
    ['Safari', 'https://web.push.apple.com/QGuQyavXutnMQ'],
    ['Edge on Windows', 'https://wns2-par02p.notify.windows.com/w/?token=BQYAAAD'],
    ['an operator-added host', 'https://push.example.net/sub/1'],
    ['an operator-added host and port', 'https://sim.example.org:8443/push/1'],
  ])('%s is accepted', async (_name, endpoint) => {
    await put(newId('service'), { platform: 'web', provider: { identifier: endpoint, keys: browserKeys() } }).expect(201);
  });

  const refusals: [string, unknown, string, RegExp][] = [
    ['an http endpoint', { identifier: 'http://fcm.googleapis.com/fcm/send/x', keys: browserKeys() }, 'provider.identifier', /absolute https URL/],
    ['not a URL', { identifier: 'fcm-token-not-a-url', keys: browserKeys() }, 'provider.identifier', /absolute https URL/],
    ['an unknown host', { identifier: 'https://evil.example.com/push', keys: browserKeys() }, 'provider.identifier', /evil\.example\.com is not a known push service/],
    ['a look-alike host', { identifier: 'https://fcm.googleapis.com.evil.example/x', keys: browserKeys() }, 'provider.identifier', /not a known push service/],
    ['a bare notify.windows.com', { identifier: 'https://notify.windows.com/x', keys: browserKeys() }, 'provider.identifier', /not a known push service/],
    ['an added host on another port', { identifier: 'https://sim.example.org:9443/x', keys: browserKeys() }, 'provider.identifier', /not a known push service/],
    ['a user name', { identifier: 'https://user:pw@fcm.googleapis.com/x', keys: browserKeys() }, 'provider.identifier', /user name or password/],
    ['no keys', { identifier: chromeEndpoint() }, 'provider.keys', /required for platform web/],
    ['no auth', { identifier: chromeEndpoint(), keys: { p256dh: browserKeys().p256dh } }, 'provider.keys.auth', /required/],
    ['a short p256dh', { identifier: chromeEndpoint(), keys: { ...browserKeys(), p256dh: randomBytes(33).toString('base64url') } }, 'provider.keys.p256dh', /65-byte/],
    ['a p256dh off the curve', { identifier: chromeEndpoint(), keys: { ...browserKeys(), p256dh: Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 1)]).toString('base64url') } }, 'provider.keys.p256dh', /P-256/],
    ['a 12-byte auth', { identifier: chromeEndpoint(), keys: { ...browserKeys(), auth: randomBytes(12).toString('base64url') } }, 'provider.keys.auth', /16 bytes/],
    ['an auth that is not base64url', { identifier: chromeEndpoint(), keys: { ...browserKeys(), auth: 'not base64url!!!!!!!!!' } }, 'provider.keys.auth', /16 bytes/],
  ];
  test.each(refusals)('%s is 422 naming the field', async (_name, provider, field, message) => {
    const res = await put(newId('refused'), { platform: 'web', provider });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
    expect(res.body.errors[field][0]).toMatch(message);
  });

  test('keys and an expiry are refused for ios and android', async () => {
    const ios = await put(newId('ios'), { platform: 'ios', provider: { identifier: 'a'.repeat(64), keys: browserKeys() } });
    expect(ios.status).toBe(422);
    expect(ios.body.errors).toEqual({ 'provider.keys': ['The keys field is only for platform web (a browser subscription).'] });
    const android = await put(newId('android'), { platform: 'android', provider: { identifier: 'fcm-token', expirationTime: 1 } });
    expect(android.status).toBe(422);
    expect(Object.keys(android.body.errors)).toEqual(['provider.expirationTime']);
  });
});

describe('the endpoint rules (pure)', () => {
  const strict = { extraHosts: [], allowPrivate: false };

  test('every known push service host is accepted over https', () => {
    for (const host of knownPushServiceHosts) {
      expect(webPushEndpointProblem(`https://${host.replace('*', 'wns2-bl2p')}/push/1`, strict)).toBeNull();
    }
  });

  // The webhook guard's cases: an operator-added IP literal is still judged by its address.
  test.each([
    ['127.0.0.1', 'loopback'],
    ['[::1]', 'loopback'],
    ['10.20.30.40', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['[fe80::1]', 'link-local'],
    ['100.64.0.1', 'shared (carrier-grade NAT)'],
    ['[::ffff:7f00:1]', 'loopback'],
    ['[64:ff9b::a00:1]', 'private (10.0.0.1 inside 64:ff9b::a00:1)'],
  ])('an added host %s is refused as %s unless private addresses are allowed', (host, kind) => {
    const url = `https://${host}:2199/push/1`;
    const address = host.replace(/^\[|\]$/g, '');
    expect(webPushEndpointProblem(url, { extraHosts: [`${host}:2199`], allowPrivate: false })).toBe(
      `The endpoint's address ${address} is ${kind}: pushes go only to public addresses (unless HERALD_WEBPUSH_ALLOW_PRIVATE=true).`,
    );
    expect(webPushEndpointProblem(url, { extraHosts: [`${host}:2199`], allowPrivate: true })).toBeNull();
  });

  test('a public added address is accepted; a wildcard covers subdomains only', () => {
    expect(webPushEndpointProblem('https://93.184.216.34/push', { extraHosts: ['93.184.216.34'], allowPrivate: false })).toBeNull();
    expect(webPushEndpointProblem('https://a.push.example/x', { extraHosts: ['*.push.example'], allowPrivate: false })).toBeNull();
    expect(webPushEndpointProblem('https://push.example/x', { extraHosts: ['*.push.example'], allowPrivate: false })).toMatch(/not a known push service/);
  });

  test('keys: RFC 8291 Appendix A ones are well formed', () => {
    expect(subscriptionKeyProblems({ p256dh: 'BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4', auth: 'BTBZMqHH6r4Tts7J_aSIgg' })).toEqual({});
  });

  test('a collapse id that is a topic already is kept; any other is fitted to 32 base64url characters, the same each time', () => {
    expect(webPushTopic('flash-sale')).toBe('flash-sale');
    expect(webPushTopic('a'.repeat(32))).toBe('a'.repeat(32));
    const long = webPushTopic('a'.repeat(33));
    expect(long).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(webPushTopic('a'.repeat(33))).toBe(long);
    expect(webPushTopic('soldes d’été')).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(webPushTopic('soldes d’été')).not.toBe(webPushTopic('soldes d’hiver'));
  });
});

// The APNs provider through the real @parse/node-apn client against the local simulator.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createApnsProvider } from '../../src/providers/apns.ts';
import type { PushProvider } from '../../src/providers/provider.ts';
import type { ApnsSimulator } from '../../src/providers/simulators/apns-simulator.ts';
import { apnsSimulator, ecKeyPair, makePush, silentLogger, type ExpectedOutcome } from '../support/simulators.ts';
import type { ApnsCredentials } from '../../src/domain/credentials.ts';

let sim: ApnsSimulator;
let credentials: ApnsCredentials;
let provider: PushProvider;

beforeAll(async () => {
  ({ sim, credentials } = await apnsSimulator());
  provider = createApnsProvider(credentials, { apns: sim.url, ca: sim.ca }, silentLogger);
});
afterAll(async () => {
  await provider.close();
  await sim.stop();
});
beforeEach(() => {
  sim.clear();
  sim.setRules([]);
  sim.setLatency(undefined);
});

function only<T>(items: T[]): T {
  expect(items).toHaveLength(1);
  return items[0];
}

describe('what APNs receives', () => {
  test('an alert push carries the content, every option and the herald ids', async () => {
    const expiresAt = new Date(Date.UTC(2030, 0, 1, 12, 0, 0));
    const push = makePush(
      'token-all-options',
      {
        notification: { title: 'Order shipped', body: 'Your order is on its way', image_url: 'https://img.example/1.png', action_url: 'myapp://orders/1042' },
        data: { order_id: 1042, details: { carrier: 'UPS' } },
        options: { priority: 'high', collapse_id: 'order-1042', sound: 'chime.caf', badge: 3, ios_category: 'ORDER', ttl: 600 },
      },
      expiresAt,
    );
    const [outcome] = await provider.send([push]);

    expect(outcome).toEqual({ deliveryId: push.deliveryId, kind: 'accepted', providerId: push.deliveryId });
    const received = only(sim.received);
    expect(received).toMatchObject({
      token: 'token-all-options',
      topic: credentials.bundleId,
      priority: '10',
      pushType: 'alert',
      expiration: String(expiresAt.getTime() / 1000),
      collapseId: 'order-1042',
      apnsId: push.deliveryId,
      status: 200,
    });
    expect(received.payload).toEqual({
      order_id: 1042,
      details: { carrier: 'UPS' },
      aps: {
        alert: { title: 'Order shipped', body: 'Your order is on its way' },
        sound: 'chime.caf',
        badge: 3,
        category: 'ORDER',
        'thread-id': 'order-1042',
        'mutable-content': 1,
      },
      herald: {
        delivery_id: push.deliveryId,
        notification_id: push.notificationId,
        image_url: 'https://img.example/1.png',
        action_url: 'myapp://orders/1042',
      },
    });
  });

  test('normal priority is sent as apns-priority 5', async () => {
    await provider.send([makePush('token-normal', { notification: { title: 'Hi' }, options: { priority: 'normal' } })]);
    expect(only(sim.received)).toMatchObject({ priority: '5', pushType: 'alert' });
  });

  test('an alert push without a priority is sent at priority 10', async () => {
    await provider.send([makePush('token-default', { notification: { body: 'Hi' } })]);
    expect(only(sim.received)).toMatchObject({ priority: '10', pushType: 'alert' });
  });

  test('a data-only push is a background push at priority 5, even when high priority is asked', async () => {
    const push = makePush('token-data', { notification: {}, data: { sync: 'inbox' }, options: { priority: 'high' } });
    const [outcome] = await provider.send([push]);
    expect(outcome.kind).toBe('accepted');
    const received = only(sim.received);
    expect(received).toMatchObject({ priority: '5', pushType: 'background' });
    expect(received.payload).toEqual({
      sync: 'inbox',
      aps: { 'content-available': 1 },
      herald: { delivery_id: push.deliveryId, notification_id: push.notificationId },
    });
  });

  test('a ttl of 0 is sent as apns-expiration 0, and a push without expiry sends no apns-expiration', async () => {
    await provider.send([
      makePush('token-ttl-0', { notification: { title: 'Now or never' }, options: { ttl: 0 } }, new Date()),
      makePush('token-no-expiry', { notification: { title: 'Default' } }, null),
    ]);
    const byToken = Object.fromEntries(sim.received.map((received) => [received.token, received]));
    expect(byToken['token-ttl-0'].expiration).toBe('0');
    expect(byToken['token-no-expiry'].expiration).toBeUndefined();
  });

  test('apns-collapse-id is the collapse_id, else the notification id, so a repeated push replaces the one shown', async () => {
    const plain = makePush('token-collapse-plain', { notification: { title: 'Hi' } });
    const collapsing = makePush('token-collapse-given', { notification: { title: 'Sale' }, options: { collapse_id: 'sale' } });
    await provider.send([plain, collapsing]);
    const byToken = Object.fromEntries(sim.received.map((received) => [received.token, received]));
    expect(byToken['token-collapse-plain'].collapseId).toBe(plain.notificationId);
    expect(byToken['token-collapse-given'].collapseId).toBe('sale');
  });

  test('platform_overrides.ios are merged into the payload last', async () => {
    await provider.send([
      makePush('token-overrides', {
        notification: { title: 'Hi', body: 'there' },
        options: {
          sound: 'chime.caf',
          platform_overrides: { ios: { aps: { sound: 'override.caf', 'interruption-level': 'time-sensitive' }, campaign: 'spring' } },
        },
      }),
    ]);
    expect(only(sim.received).payload).toMatchObject({
      campaign: 'spring',
      aps: { alert: { title: 'Hi', body: 'there' }, sound: 'override.caf', 'interruption-level': 'time-sensitive' },
    });
  });

  test('pushes that share a device token each get their own outcome and payload', async () => {
    const first = makePush('shared-token');
    const second = makePush('shared-token');
    const outcomes = await provider.send([first, second]);
    expect(outcomes).toEqual([
      { deliveryId: first.deliveryId, kind: 'accepted', providerId: first.deliveryId },
      { deliveryId: second.deliveryId, kind: 'accepted', providerId: second.deliveryId },
    ]);
    const deliveryIds = sim.received.map((received) => (received.payload as { herald: { delivery_id: string } }).herald.delivery_id);
    expect(deliveryIds.sort()).toEqual([first.deliveryId, second.deliveryId].sort());
  });
});

describe('APNs errors become outcomes', () => {
  test('every error reason maps to its outcome kind, each push by its position in the batch', async () => {
    const invalidatedAt = Date.UTC(2026, 5, 1);
    const cases: { reason: string; retryAfter?: number; timestamp?: number; expected: ExpectedOutcome }[] = [
      { reason: 'Unregistered', timestamp: invalidatedAt, expected: { kind: 'invalid_token', reason: 'Unregistered', invalidatedAt: new Date(invalidatedAt) } },
      { reason: 'ExpiredToken', timestamp: invalidatedAt, expected: { kind: 'invalid_token', reason: 'ExpiredToken', invalidatedAt: new Date(invalidatedAt) } },
      { reason: 'BadDeviceToken', expected: { kind: 'invalid_token', reason: 'BadDeviceToken' } },
      { reason: 'DeviceTokenNotForTopic', expected: { kind: 'invalid_token', reason: 'DeviceTokenNotForTopic' } },
      { reason: 'InvalidProviderToken', expected: { kind: 'credentials', reason: 'InvalidProviderToken' } },
      { reason: 'ExpiredProviderToken', expected: { kind: 'credentials', reason: 'ExpiredProviderToken' } },
      { reason: 'MissingProviderToken', expected: { kind: 'credentials', reason: 'MissingProviderToken' } },
      { reason: 'BadCertificate', expected: { kind: 'credentials', reason: 'BadCertificate' } },
      { reason: 'BadCertificateEnvironment', expected: { kind: 'credentials', reason: 'BadCertificateEnvironment' } },
      { reason: 'TopicDisallowed', expected: { kind: 'credentials', reason: 'TopicDisallowed' } },
      { reason: 'BadTopic', expected: { kind: 'credentials', reason: 'BadTopic' } },
      { reason: 'TooManyRequests', retryAfter: 30, expected: { kind: 'transient', reason: 'TooManyRequests' } },
      { reason: 'ServiceUnavailable', retryAfter: 5, expected: { kind: 'transient', reason: 'ServiceUnavailable' } },
      { reason: 'PayloadTooLarge', expected: { kind: 'rejected', reason: 'PayloadTooLarge' } },
      { reason: 'BadCollapseId', expected: { kind: 'rejected', reason: 'BadCollapseId' } },
      { reason: 'BadExpirationDate', expected: { kind: 'rejected', reason: 'BadExpirationDate' } },
      { reason: 'BadPriority', expected: { kind: 'rejected', reason: 'BadPriority' } },
    ];
    sim.setRules(cases.map(({ reason, retryAfter, timestamp }) => ({ prefix: `${reason}-`, reason, retryAfter, timestamp })));
    const pushes = [makePush('fine-1'), ...cases.map(({ reason }) => makePush(`${reason}-device`)), makePush('fine-2')];

    const outcomes = await provider.send(pushes);

    expect(outcomes).toEqual([
      { deliveryId: pushes[0].deliveryId, kind: 'accepted', providerId: pushes[0].deliveryId },
      ...cases.map(({ expected }, index) => ({ ...expected, deliveryId: pushes[index + 1].deliveryId })),
      { deliveryId: pushes.at(-1)!.deliveryId, kind: 'accepted', providerId: pushes.at(-1)!.deliveryId },
    ]);
    // connectionRetryLimit 0: the library never retried on its own (429, 500, 503, ExpiredProviderToken).
    expect(sim.counters.requests).toBe(pushes.length);
  });

  test('a 500 is transient, and the next push goes out on a new connection', async () => {
    // Kept out of the mixed batch above: after a 500 the library closes its session, and a 429 or
    // 503 answered on that session afterwards comes back without its status (still transient).
    sim.setRules([{ prefix: 'broken-', reason: 'InternalServerError' }]);
    const failing = makePush('broken-1');
    expect(await provider.send([failing])).toEqual([{ deliveryId: failing.deliveryId, kind: 'transient', reason: 'InternalServerError' }]);
    const sessionsBefore = sim.counters.sessions;
    const next = makePush('fine-after-500');
    expect(await provider.send([next])).toEqual([{ deliveryId: next.deliveryId, kind: 'accepted', providerId: next.deliveryId }]);
    expect(sim.counters.sessions).toBe(sessionsBefore + 1);
  });

  test('a payload over 4 KB is refused by APNs as PayloadTooLarge: rejected', async () => {
    const push = makePush('token-big', { notification: { title: 'Big' }, data: { blob: 'x'.repeat(5000) } });
    expect(await provider.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'rejected', reason: 'PayloadTooLarge' }]);
    expect(only(sim.received)).toMatchObject({ status: 413, reason: 'PayloadTooLarge' });
  });

  test('a bundle id the team may not push to is refused as BadTopic: a credentials outcome', async () => {
    const other = createApnsProvider({ ...credentials, bundleId: 'com.example.other' }, { apns: sim.url, ca: sim.ca }, silentLogger);
    try {
      const push = makePush('token-topic');
      expect(await other.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'credentials', reason: 'BadTopic' }]);
    } finally {
      await other.close();
    }
  });

  test('a signing key APNs does not know gives InvalidProviderToken: a credentials outcome', async () => {
    const stranger = createApnsProvider({ ...credentials, key: ecKeyPair().privateKey }, { apns: sim.url, ca: sim.ca }, silentLogger);
    try {
      const pushes = [makePush('token-a'), makePush('token-b')];
      expect(await stranger.send(pushes)).toEqual(
        pushes.map((push) => ({ deliveryId: push.deliveryId, kind: 'credentials', reason: 'InvalidProviderToken' })),
      );
    } finally {
      await stranger.close();
    }
  });

  test('a key that is a file path is not read from disk: credentials, without reaching APNs', async () => {
    // The file holds the real key: were it read, the push would be accepted.
    const keyFile = path.join(mkdtempSync(path.join(tmpdir(), 'herald-apns-')), 'AuthKey.p8');
    writeFileSync(keyFile, credentials.key);
    const pathKey = createApnsProvider({ ...credentials, key: keyFile }, { apns: sim.url, ca: sim.ca }, silentLogger);
    const push = makePush('token-path-key');
    expect(await pathKey.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'credentials', reason: 'InvalidSigningKey' }]);
    expect(sim.counters.requests).toBe(0);
    rmSync(path.dirname(keyFile), { recursive: true });
  });

  test('a key that cannot sign fails every push as credentials without reaching APNs', async () => {
    const broken = createApnsProvider(
      { ...credentials, key: '-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n' },
      { apns: sim.url, ca: sim.ca },
      silentLogger,
    );
    const push = makePush('token-broken-key');
    expect(await broken.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'credentials', reason: 'InvalidSigningKey' }]);
    await broken.close();
    expect(sim.counters.requests).toBe(0);
  });

  test('an unreachable APNs is transient, and close() still returns promptly', async () => {
    const { sim: gone, credentials: goneCredentials } = await apnsSimulator();
    await gone.stop();
    const orphan = createApnsProvider(goneCredentials, { apns: gone.url, ca: gone.ca }, silentLogger, { closeTimeoutMs: 300 });
    const push = makePush('token-nowhere');
    const [outcome] = await orphan.send([push]);
    expect(outcome).toMatchObject({ deliveryId: push.deliveryId, kind: 'transient', reason: 'provider unreachable' });
    const started = Date.now();
    await orphan.close();
    expect(Date.now() - started).toBeLessThan(1500);
  });

  test('an answer slower than the request timeout is transient', async () => {
    sim.setLatency(1000);
    const impatient = createApnsProvider(credentials, { apns: sim.url, ca: sim.ca }, silentLogger, { requestTimeoutMs: 100 });
    try {
      const push = makePush('token-slow');
      const [outcome] = await impatient.send([push]);
      expect(outcome).toMatchObject({ deliveryId: push.deliveryId, kind: 'transient', reason: expect.stringMatching(/timeout/) });
    } finally {
      await impatient.close();
    }
  });
});

describe('a deadline for the pushes of a send', () => {
  // A simulator of their own: the answers left late behind the deadline must not reach other tests.
  let own: ApnsSimulator;
  let ownCredentials: ApnsCredentials;
  beforeEach(async () => {
    ({ sim: own, credentials: ownCredentials } = await apnsSimulator());
  });
  afterEach(async () => {
    await own.stop();
  });

  test('pushes APNs answered keep their outcome; only those still unanswered at the deadline become transient', async () => {
    const timed = createApnsProvider(ownCredentials, { apns: own.url, ca: own.ca }, silentLogger);
    try {
      // The connection is open: the deadline measures APNs' answers alone.
      await timed.send([makePush('deadline-warm-up')]);
      own.setLatency({ min: 0, max: 4000 });
      const pushes = Array.from({ length: 40 }, (_, index) => makePush(`deadline-${index}`));
      const started = Date.now();
      const outcomes = await timed.send(pushes, { deadline: new Date(started + 2000) });
      expect(Date.now() - started).toBeLessThan(2900);
      const accepted = outcomes.filter((outcome) => outcome.kind === 'accepted');
      const late = outcomes.filter((outcome) => outcome.kind !== 'accepted');
      expect(accepted.length).toBeGreaterThan(0);
      expect(late.length).toBeGreaterThan(0);
      expect(late.every((outcome) => outcome.kind === 'transient' && outcome.reason === 'provider timeout')).toBe(true);
      expect(outcomes.map((outcome) => outcome.deliveryId)).toEqual(pushes.map((push) => push.deliveryId));
    } finally {
      await timed.close();
    }
  });

  test('pushes still waiting for a slot at the deadline are never sent', async () => {
    const narrow = createApnsProvider(ownCredentials, { apns: own.url, ca: own.ca }, silentLogger, { concurrency: 2 });
    try {
      await narrow.send([makePush('narrow-warm-up')]);
      own.clear();
      own.setLatency(600);
      const pushes = Array.from({ length: 10 }, (_, index) => makePush(`narrow-${index}`));
      const outcomes = await narrow.send(pushes, { deadline: new Date(Date.now() + 1000) });
      // Two slots, 600 ms an answer: the first two are answered, the next two are in flight at the
      // deadline, and the six that never got a slot must not reach APNs after it.
      expect(outcomes.filter((outcome) => outcome.kind === 'accepted')).toHaveLength(2);
      own.setLatency(undefined);
      await narrow.send([makePush('narrow-after')]);
      expect(own.received.filter((push) => push.token.startsWith('narrow-')).length).toBeLessThanOrEqual(5);
    } finally {
      await narrow.close();
    }
  });
});

describe('simulator rules seen through the provider', () => {
  test('a fixed latency delays every answer by at least that long', async () => {
    sim.setLatency(200);
    const started = Date.now();
    const outcomes = await provider.send([makePush('slow-1'), makePush('slow-2'), makePush('slow-3')]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(195);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['accepted', 'accepted', 'accepted']);
  });

  test('a latency range delays answers by at least its minimum', async () => {
    sim.setLatency({ min: 150, max: 250 });
    const started = Date.now();
    await provider.send([makePush('range-1')]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(145);
  });

  test('a rate rule fails about that fraction of pushes, and only those', async () => {
    sim.setRules([{ rate: 0.3, reason: 'ServiceUnavailable' }]);
    const pushes = Array.from({ length: 600 }, (_, index) => makePush(`rate-${index}`));
    const outcomes = await provider.send(pushes);
    const failed = outcomes.filter((outcome) => outcome.kind === 'transient');
    // 180 expected; the bounds are 7 standard deviations wide.
    expect(failed.length).toBeGreaterThan(100);
    expect(failed.length).toBeLessThan(260);
    expect(failed.length + outcomes.filter((outcome) => outcome.kind === 'accepted').length).toBe(600);
    expect(sim.counters.byStatus['503']).toBe(failed.length);
  });

  test('a rule with a prefix and a rate fails only matching tokens', async () => {
    sim.setRules([{ prefix: 'flaky-', rate: 1, reason: 'TooManyRequests' }]);
    const outcomes = await provider.send([makePush('flaky-1'), makePush('steady-1')]);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['transient', 'accepted']);
  });
});

test('concurrent sends on one provider share its cap on requests in flight', async () => {
  const capped = createApnsProvider(credentials, { apns: sim.url, ca: sim.ca }, silentLogger, { concurrency: 50 });
  try {
    sim.setLatency(20);
    const batch = (name: string) => Array.from({ length: 200 }, (_, index) => makePush(`${name}-${index}`));
    const outcomes = (await Promise.all([capped.send(batch('job-a')), capped.send(batch('job-b'))])).flat();
    expect(outcomes.filter((outcome) => outcome.kind === 'accepted')).toHaveLength(400);
    expect(sim.counters.maxInFlight).toBeLessThanOrEqual(50);
    expect(sim.counters.maxInFlight).toBeGreaterThan(25);
  } finally {
    await capped.close();
  }
});

test('2,000 pushes go through one long-lived connection', async () => {
  const pushes = Array.from({ length: 2000 }, (_, index) => makePush(`bulk-${index}`));
  const sessionsBefore = sim.counters.sessions;
  const outcomes = await provider.send(pushes);
  expect(outcomes.every((outcome, index) => outcome.kind === 'accepted' && outcome.deliveryId === pushes[index].deliveryId)).toBe(true);
  expect(sim.counters.requests).toBe(2000);
  expect(new Set(sim.received.map((received) => received.token)).size).toBe(2000);
  // The provider has been connected since earlier tests: no new connection for these 2,000.
  expect(sessionsBefore).toBeGreaterThanOrEqual(1);
  expect(sim.counters.sessions).toBe(sessionsBefore);
});

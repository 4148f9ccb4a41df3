// The FCM provider (Herald's own HTTP/2 client) against the local simulator.
import { createFcmProvider } from '../../src/providers/fcm.ts';
import type { PushProvider } from '../../src/providers/provider.ts';
import type { FcmCredentials } from '../../src/domain/credentials.ts';
import type { FcmSimulator } from '../../src/providers/simulators/fcm-simulator.ts';
import { fcmProject, fcmSimulator, makePush, rsaKeyPair, silentLogger, type ExpectedOutcome } from '../support/simulators.ts';
import { waitFor } from '../support/receiver.ts';

let sim: FcmSimulator;
let credentials: FcmCredentials;
let provider: PushProvider;

beforeAll(async () => {
  ({ sim, credentials } = await fcmSimulator());
  provider = createFcmProvider(credentials, { fcm: sim.url, ca: sim.ca }, silentLogger);
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

type WireMessage = { token: string; notification?: unknown; data: Record<string, string>; android?: Record<string, unknown> };
const message = (index = 0) => sim.received[index].message as WireMessage;

describe('what FCM receives', () => {
  test('a notification carries the content, every option and the herald ids', async () => {
    const push = makePush(
      'token-all-options',
      {
        notification: { title: 'Order shipped', body: 'Your order is on its way', image_url: 'https://img.example/1.png', action_url: 'myapp://orders/1042' },
        data: { order_id: 1042, details: { carrier: 'UPS' }, note: 'fragile' },
        options: { priority: 'high', collapse_id: 'order-1042', sound: 'chime', badge: 3, android_channel_id: 'orders', ttl: 600 },
      },
      new Date(Date.now() + 600_000),
    );
    const [outcome] = await provider.send([push]);

    expect(outcome).toEqual({ deliveryId: push.deliveryId, kind: 'accepted', providerId: expect.stringMatching(`^projects/${fcmProject}/messages/`) });
    const received = only(sim.received);
    expect(received).toMatchObject({ projectId: fcmProject, token: 'token-all-options', status: 200 });
    expect(received.message).toEqual({
      token: 'token-all-options',
      notification: { title: 'Order shipped', body: 'Your order is on its way', image: 'https://img.example/1.png' },
      data: {
        order_id: '1042',
        details: '{"carrier":"UPS"}',
        note: 'fragile',
        herald_delivery_id: push.deliveryId,
        herald_notification_id: push.notificationId,
        herald_action_url: 'myapp://orders/1042',
      },
      android: {
        priority: 'high',
        // What remains of the push's life when it leaves: 600 s minus the moment it took.
        ttl: expect.stringMatching(/^(599|600)s$/),
        collapse_key: 'order-1042',
        notification: { tag: 'order-1042', channel_id: 'orders', sound: 'chime', notification_count: 3 },
      },
    });
  });

  test('normal priority is sent as android priority normal', async () => {
    const push = makePush('token-normal', { notification: { title: 'Hi' }, options: { priority: 'normal' } });
    await provider.send([push]);
    expect(message().android).toEqual({ priority: 'normal', notification: { tag: push.notificationId } });
  });

  test('a data-only push has no notification, only data with the herald ids', async () => {
    const push = makePush('token-data', { notification: {}, data: { sync: 'inbox' } });
    await provider.send([push]);
    expect(message()).toEqual({
      token: 'token-data',
      data: { sync: 'inbox', herald_delivery_id: push.deliveryId, herald_notification_id: push.notificationId },
    });
  });

  test('a ttl of 0 is sent as android ttl "0s", and a push without expiry sends no ttl', async () => {
    const pushes = [
      makePush('token-ttl-0', { notification: { title: 'Now or never' }, options: { ttl: 0 } }, new Date()),
      makePush('token-no-expiry', { notification: { title: 'Default' } }, null),
    ];
    await provider.send(pushes);
    const byToken = Object.fromEntries(sim.received.map((received) => [received.token, received.message as WireMessage]));
    expect(byToken['token-ttl-0'].android).toEqual({ ttl: '0s', notification: { tag: pushes[0].notificationId } });
    expect(byToken['token-no-expiry'].android).toEqual({ notification: { tag: pushes[1].notificationId } });
  });

  test('the ttl is what remains until the push expires, not the ttl it was created with', async () => {
    // Created with a ttl of an hour, half of which went by before this attempt.
    await provider.send([makePush('token-retried', { notification: { title: 'Later' }, options: { ttl: 3600 } }, new Date(Date.now() + 1800_000))]);
    expect(message().android?.ttl).toMatch(/^(1799|1800)s$/);
  });

  test('platform_overrides.android are merged last, a ttl there included', async () => {
    await provider.send([
      makePush(
        'token-overrides',
        {
          notification: { title: 'Hi' },
          options: {
            android_channel_id: 'orders',
            sound: 'chime',
            platform_overrides: { android: { notification: { color: '#ff0000', sound: 'bell' }, directBootOk: true, ttl: '30s' } },
          },
        },
        new Date(Date.now() + 600_000),
      ),
    ]);
    expect(message().android).toEqual({
      ttl: '30s',
      direct_boot_ok: true,
      notification: { tag: expect.any(String), channel_id: 'orders', sound: 'bell', color: '#ff0000' },
    });
  });

  test('a shown push is tagged with its collapse_id, else its notification id, so a repeat replaces it on the device; a data-only push has no tag', async () => {
    const plain = makePush('token-tag-plain', { notification: { title: 'Hi' } });
    const collapsing = makePush('token-tag-collapse', { notification: { title: 'Sale' }, options: { collapse_id: 'sale' } });
    const silent = makePush('token-tag-silent', { notification: {}, data: { sync: '1' } });
    await provider.send([plain, collapsing, silent]);
    const byToken = Object.fromEntries(sim.received.map((received) => [received.token, received.message as WireMessage]));
    expect(byToken['token-tag-plain'].android?.notification).toEqual({ tag: plain.notificationId });
    expect(byToken['token-tag-collapse'].android?.notification).toEqual({ tag: 'sale' });
    expect(byToken['token-tag-silent'].android).toBeUndefined();
  });

  test('two pushes of one notification carry its id as their tag, and each its own delivery id', async () => {
    const first = makePush('token-same-1', { notification: { title: 'Same' } });
    const content = first.content;
    const second = { ...makePush('token-same-2', content), notificationId: first.notificationId };
    const other = makePush('token-other', content);
    await provider.send([first, second, other]);
    const byToken = Object.fromEntries(sim.received.map((received) => [received.token, received.message as WireMessage]));
    expect(byToken['token-same-1'].android?.notification).toEqual({ tag: first.notificationId });
    expect(byToken['token-same-2'].android?.notification).toEqual({ tag: first.notificationId });
    expect(byToken['token-other'].android?.notification).toEqual({ tag: other.notificationId });
    expect(byToken['token-same-2'].data).toMatchObject({ herald_delivery_id: second.deliveryId, herald_notification_id: first.notificationId });
    expect(byToken['token-other'].data).toMatchObject({ herald_delivery_id: other.deliveryId, herald_notification_id: other.notificationId });
  });
});

describe('FCM errors become outcomes', () => {
  test('every error code maps to its outcome kind, each push by its position in the batch', async () => {
    const cases: { prefix: string; rule: { reason: string; retryAfter?: number; message?: string }; expected: ExpectedOutcome }[] = [
      { prefix: 'unregistered-', rule: { reason: 'UNREGISTERED' }, expected: { kind: 'invalid_token', reason: 'UNREGISTERED' } },
      { prefix: 'mismatch-', rule: { reason: 'SENDER_ID_MISMATCH' }, expected: { kind: 'invalid_token', reason: 'SENDER_ID_MISMATCH' } },
      { prefix: 'badtoken-', rule: { reason: 'INVALID_ARGUMENT' }, expected: { kind: 'invalid_token', reason: 'INVALID_ARGUMENT' } },
      {
        prefix: 'badpayload-',
        rule: { reason: 'INVALID_ARGUMENT', message: "Invalid value at 'message.android.notification.color'" },
        expected: { kind: 'rejected', reason: 'INVALID_ARGUMENT' },
      },
      { prefix: 'thirdparty-', rule: { reason: 'THIRD_PARTY_AUTH_ERROR' }, expected: { kind: 'credentials', reason: 'THIRD_PARTY_AUTH_ERROR' } },
      { prefix: 'denied-', rule: { reason: 'PERMISSION_DENIED' }, expected: { kind: 'credentials', reason: 'PERMISSION_DENIED' } },
      { prefix: 'unauthenticated-', rule: { reason: 'UNAUTHENTICATED' }, expected: { kind: 'credentials', reason: 'UNAUTHENTICATED' } },
      { prefix: 'quota-', rule: { reason: 'QUOTA_EXCEEDED', retryAfter: 30 }, expected: { kind: 'transient', reason: 'QUOTA_EXCEEDED', retryAfterSeconds: 30 } },
      { prefix: 'unavailable-', rule: { reason: 'UNAVAILABLE', retryAfter: 5 }, expected: { kind: 'transient', reason: 'UNAVAILABLE', retryAfterSeconds: 5 } },
      { prefix: 'internal-', rule: { reason: 'INTERNAL' }, expected: { kind: 'transient', reason: 'INTERNAL' } },
    ];
    sim.setRules(cases.map(({ prefix, rule }) => ({ prefix, ...rule })));
    const pushes = [makePush('fine-1'), ...cases.map(({ prefix }) => makePush(`${prefix}device`)), makePush('fine-2')];

    const outcomes = await provider.send(pushes);

    expect(outcomes).toEqual([
      { deliveryId: pushes[0].deliveryId, kind: 'accepted', providerId: expect.any(String) },
      ...cases.map(({ expected }, index) => ({ ...expected, deliveryId: pushes[index + 1].deliveryId })),
      { deliveryId: pushes.at(-1)!.deliveryId, kind: 'accepted', providerId: expect.any(String) },
    ]);
  });

  test('a 503 is reported after one request: nothing retries it behind our back', async () => {
    sim.setRules([{ reason: 'UNAVAILABLE' }]);
    const started = Date.now();
    const [outcome] = await provider.send([makePush('token-503')]);
    expect(outcome).toMatchObject({ kind: 'transient', reason: 'UNAVAILABLE' });
    expect(sim.counters.requests).toBe(1);
    expect(Date.now() - started).toBeLessThan(900);
  });

  test('a message FCM finds invalid is rejected and the device kept', async () => {
    const push = makePush('token-bad-priority', { notification: { title: 'Hi' }, options: { platform_overrides: { android: { priority: 'urgent' } } } });
    expect(await provider.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'rejected', reason: 'INVALID_ARGUMENT' }]);
    expect(only(sim.received)).toMatchObject({ status: 400, errorCode: 'INVALID_ARGUMENT' });
  });

  test('a message FCM would refuse for its form is rejected without a request', async () => {
    const push = makePush('token-bad-color', { notification: { title: 'Hi' }, options: { platform_overrides: { android: { notification: { color: 'red' } } } } });
    expect(await provider.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'rejected', reason: 'messaging/invalid-payload' }]);
    expect(sim.counters.requests).toBe(0);
  });

  test('a service account key Google does not know fails every push as credentials', async () => {
    const stranger = createFcmProvider(
      { serviceAccount: { ...credentials.serviceAccount, private_key: rsaKeyPair().privateKey } },
      { fcm: sim.url, ca: sim.ca },
      silentLogger,
    );
    try {
      const pushes = [makePush('token-a'), makePush('token-b')];
      expect(await stranger.send(pushes)).toEqual(pushes.map((push) => ({ deliveryId: push.deliveryId, kind: 'credentials', reason: 'app/invalid-credential' })));
      expect(sim.counters.requests).toBe(0);
    } finally {
      await stranger.close();
    }
  });

  test('a private key that is not a key fails every push as credentials', async () => {
    const broken = createFcmProvider({ serviceAccount: { ...credentials.serviceAccount, private_key: 'not a key' } }, { fcm: sim.url, ca: sim.ca }, silentLogger);
    try {
      const push = makePush('token-c');
      expect(await broken.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'credentials', reason: 'app/invalid-credential' }]);
    } finally {
      await broken.close();
    }
  });

  test("a service account of another project may not send for this one: credentials, not the device's fault", async () => {
    const { privateKey, publicKey } = rsaKeyPair();
    const { sim: strict } = await fcmSimulator({ serviceAccounts: { 'herald@other-project.iam.gserviceaccount.com': publicKey } });
    const foreign = createFcmProvider(
      { serviceAccount: { project_id: fcmProject, client_email: 'herald@other-project.iam.gserviceaccount.com', private_key: privateKey } },
      { fcm: strict.url, ca: strict.ca },
      silentLogger,
    );
    try {
      const push = makePush('token-d');
      expect(await foreign.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'credentials', reason: 'PERMISSION_DENIED' }]);
    } finally {
      await foreign.close();
      await strict.stop();
    }
  });

  test('an unreachable FCM is transient', async () => {
    const { sim: doomed, credentials: doomedCredentials } = await fcmSimulator();
    const unlucky = createFcmProvider(doomedCredentials, { fcm: doomed.url, ca: doomed.ca }, silentLogger);
    try {
      expect((await unlucky.send([makePush('token-e')]))[0].kind).toBe('accepted');
      await doomed.stop();
      const push = makePush('token-f');
      expect(await unlucky.send([push])).toEqual([{ deliveryId: push.deliveryId, kind: 'transient', reason: expect.any(String) }]);
    } finally {
      await unlucky.close();
    }
  });

  test('providers with different FCM endpoints in one process each reach their own', async () => {
    const { sim: other, credentials: otherCredentials } = await fcmSimulator();
    const otherProvider = createFcmProvider(otherCredentials, { fcm: other.url, ca: other.ca }, silentLogger);
    try {
      await Promise.all([provider.send([makePush('mine')]), otherProvider.send([makePush('theirs')])]);
      expect(sim.received.map((received) => received.token)).toEqual(['mine']);
      expect(other.received.map((received) => received.token)).toEqual(['theirs']);
    } finally {
      await otherProvider.close();
      await other.stop();
    }
  });
});

describe('a deadline for the pushes of a send', () => {
  test('pushes FCM answered keep their outcome; only those still unanswered at the deadline become transient', async () => {
    // A simulator of its own: the answers left late behind the deadline must not reach other tests.
    const { sim: own, credentials: ownCredentials } = await fcmSimulator();
    const timed = createFcmProvider(ownCredentials, { fcm: own.url, ca: own.ca }, silentLogger);
    try {
      // The connection and the OAuth token are ready: the deadline measures FCM's answers alone.
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
      expect(accepted.every((outcome) => outcome.kind === 'accepted' && outcome.providerId !== undefined)).toBe(true);
      expect(late.every((outcome) => outcome.kind === 'transient' && outcome.reason === 'provider timeout')).toBe(true);
      expect(outcomes.map((outcome) => outcome.deliveryId)).toEqual(pushes.map((push) => push.deliveryId));
    } finally {
      await timed.close();
      await own.stop();
    }
  });

  test('a send without a deadline waits for every answer', async () => {
    sim.setLatency(300);
    const outcomes = await provider.send([makePush('patient-1'), makePush('patient-2')]);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['accepted', 'accepted']);
  });
});

describe('simulator rules seen through the provider', () => {
  test('a fixed latency delays every answer by at least that long', async () => {
    sim.setLatency(200);
    const started = Date.now();
    const outcomes = await provider.send([makePush('slow-1'), makePush('slow-2')]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(195);
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(['accepted', 'accepted']);
  });

  test('a rate rule fails about that fraction of messages, and only those', async () => {
    sim.setRules([{ rate: 0.3, reason: 'QUOTA_EXCEEDED', retryAfter: 10 }]);
    const outcomes = await provider.send(Array.from({ length: 600 }, (_, index) => makePush(`rate-${index}`)));
    const failed = outcomes.filter((outcome) => outcome.kind === 'transient');
    // 180 expected; the bounds are 7 standard deviations wide.
    expect(failed.length).toBeGreaterThan(100);
    expect(failed.length).toBeLessThan(260);
    expect(failed.every((outcome) => outcome.kind === 'transient' && outcome.retryAfterSeconds === 10)).toBe(true);
    expect(outcomes.filter((outcome) => outcome.kind === 'accepted')).toHaveLength(600 - failed.length);
  });
});

test('2,000 messages go out on at most four connections, with one access token', async () => {
  const pushes = Array.from({ length: 2000 }, (_, index) => makePush(`bulk-${index}`));
  const sessionsBefore = sim.counters.sessions;
  const tokensBefore = sim.tokensIssued();
  const outcomes = await provider.send(pushes);
  expect(outcomes.every((outcome, index) => outcome.kind === 'accepted' && outcome.deliveryId === pushes[index].deliveryId)).toBe(true);
  expect(sim.counters.requests).toBe(2000);
  // The access token obtained for earlier tests is reused.
  expect(tokensBefore).toBeGreaterThanOrEqual(1);
  expect(sim.tokensIssued()).toBe(tokensBefore);
  expect(new Set(sim.received.map((received) => received.token)).size).toBe(2000);
  // At most four connections of 100 streams each, some kept from earlier tests.
  expect(sim.counters.sessions - sessionsBefore).toBeLessThanOrEqual(4);
});

describe('connections kept between batches', () => {
  // A simulator of their own: its open connections are only these tests' providers'.
  let own: FcmSimulator;
  let ownCredentials: FcmCredentials;
  const fresh = (options: { concurrency?: number; sessionIdleMs?: number } = {}) =>
    createFcmProvider(ownCredentials, { fcm: own.url, ca: own.ca }, silentLogger, options);
  const openNow = () => own.counters.openSessions;
  const allClosed = () => waitFor(openNow, (open) => open === 0, 5000);
  beforeAll(async () => {
    ({ sim: own, credentials: ownCredentials } = await fcmSimulator());
  });
  afterAll(() => own.stop());
  // Every test closes its provider: its connections are gone before the next test counts.
  afterEach(allClosed);

  test('batches one after another share one connection, and close() ends it', async () => {
    const kept = fresh();
    const sessionsBefore = own.counters.sessions;
    try {
      for (let batch = 0; batch < 15; batch++) {
        const outcomes = await kept.send([makePush(`kept-${batch}-a`), makePush(`kept-${batch}-b`)]);
        expect(outcomes.map((outcome) => outcome.kind)).toEqual(['accepted', 'accepted']);
      }
      expect(own.counters.sessions - sessionsBefore).toBe(1);
      expect(openNow()).toBe(1);
    } finally {
      await kept.close();
    }
    expect(await allClosed()).toBe(0);
  });

  test('batches at once each have a connection of their own, kept for the next ones', async () => {
    const kept = fresh({ concurrency: 2 });
    const sessionsBefore = own.counters.sessions;
    try {
      const pushes = () => Array.from({ length: 1500 }, (_, index) => makePush(`wide-${index}`));
      for (let round = 0; round < 2; round++) {
        expect((await kept.send(pushes())).every((outcome) => outcome.kind === 'accepted')).toBe(true);
      }
      // More messages than two connections carry at once: both are opened, and kept for the second round.
      expect(own.counters.sessions - sessionsBefore).toBe(2);
    } finally {
      await kept.close();
    }
  });

  test('a connection FCM ends (GOAWAY) is not used again: the next batch opens another', async () => {
    const kept = fresh();
    try {
      expect((await kept.send([makePush('before-goaway')]))[0].kind).toBe('accepted');
      const sessionsBefore = own.counters.sessions;
      own.closeSessions();
      await allClosed();
      expect((await kept.send([makePush('after-goaway')]))[0].kind).toBe('accepted');
      expect(own.counters.sessions - sessionsBefore).toBe(1);
    } finally {
      await kept.close();
    }
  });

  test('an idle connection is closed after the idle time', async () => {
    const kept = fresh({ sessionIdleMs: 100 });
    try {
      expect((await kept.send([makePush('idle-soon')]))[0].kind).toBe('accepted');
      expect(openNow()).toBe(1);
      expect(await allClosed()).toBe(0);
    } finally {
      await kept.close();
    }
  });
});

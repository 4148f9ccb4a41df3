// The browser module's pure rules (sdk/src/web/rules.ts) on plain values: what a push shows, the
// permission mapping, when a subscription is registered again, and the outbox's order and limits.
import {
  base64urlBytes,
  heraldPush,
  installationOf,
  notificationOf,
  outboxMaxAgeMs,
  outboxMaxEntries,
  outboxPlan,
  permissionOf,
  registrationDue,
  registrationRefreshMs,
  reportOutcome,
  sameKey,
  shownData,
  type OutboxEntry,
} from '../sdk/src/web/rules.ts';

const herald = { delivery_id: 'd-1', notification_id: 'n-1', tag: 'order-42' };

describe("a Herald push's notification", () => {
  test('shows the title, body and image, tagged with herald.tag, its data carrying the url, data and ids', () => {
    const push = heraldPush({ title: 'Shipped', body: 'Your order left', image: 'https://shop.example/box.png', url: '/orders/42', data: { order: 42 }, herald });
    expect(push).not.toBeNull();
    expect(notificationOf(push!)).toEqual({
      title: 'Shipped',
      options: {
        body: 'Your order left',
        image: 'https://shop.example/box.png',
        tag: 'order-42',
        data: { url: '/orders/42', data: { order: 42 }, herald },
      },
    });
  });

  test("passes the Notifications API options an override set, but never lets one replace the tag or Herald's data", () => {
    const push = heraldPush({ title: 'T', icon: '/icon.png', requireInteraction: true, tag: 'other', data: 'not an object', herald })!;
    const { options } = notificationOf(push);
    expect(options).toMatchObject({ icon: '/icon.png', requireInteraction: true, tag: 'order-42', data: { url: null, data: {}, herald } });
  });

  test('a push without a title shows the fallback title, and without a tag is tagged with its notification', () => {
    const push = heraldPush({ body: 'Only a body', herald: { delivery_id: 'd-2', notification_id: 'n-2' } })!;
    expect(notificationOf(push, 'Shop')).toMatchObject({ title: 'Shop', options: { body: 'Only a body', tag: 'n-2' } });
    expect(notificationOf(push).title).toBe('');
  });

  test("payloads that are not Herald's are left alone", () => {
    for (const payload of [null, 'text', [], { title: 'x' }, { herald: { delivery_id: 1, notification_id: 'n' } }, { herald: 'x' }]) {
      expect(heraldPush(payload)).toBeNull();
    }
    expect(shownData({ url: '/x' })).toBeNull();
    expect(shownData({ url: null, data: {}, herald })).toEqual({ url: null, data: {}, herald });
  });
});

test("the browser's permission reads as Herald's", () => {
  expect(permissionOf('granted')).toBe('authorized');
  expect(permissionOf('denied')).toBe('denied');
  expect(permissionOf('default')).toBe('not_determined');
  expect(permissionOf(undefined)).toBe('unknown');
});

describe('registration', () => {
  const subscription = { endpoint: 'https://fcm.googleapis.com/fcm/send/abc', expirationTime: null, keys: { p256dh: 'BPub', auth: 'secret' } };
  const body = installationOf(subscription, { permission: 'authorized', userId: 'user-1', locale: 'en-GB', timezone: 'Europe/London' });

  test("is the subscription's endpoint and keys as platform web, with the browser's locale and timezone", () => {
    expect(body).toEqual({
      platform: 'web',
      provider: { identifier: subscription.endpoint, keys: subscription.keys, expirationTime: null },
      permission: 'authorized',
      user_id: 'user-1',
      device: { locale: 'en-GB', timezone: 'Europe/London' },
    });
    expect(() => installationOf({ endpoint: subscription.endpoint }, { permission: 'authorized' })).toThrow(/no endpoint or keys/);
  });

  test('is sent again when the subscription, user or permission changed, or a week passed; not otherwise', () => {
    const now = 1_000_000_000_000;
    const previous = { body: JSON.stringify(body), at: now - 1000 };
    expect(registrationDue(undefined, body, now)).toBe(true);
    expect(registrationDue(previous, body, now)).toBe(false);
    expect(registrationDue(previous, { ...body, provider: { ...body.provider, identifier: 'https://fcm.googleapis.com/fcm/send/new' } }, now)).toBe(true);
    expect(registrationDue(previous, { ...body, permission: 'denied' }, now)).toBe(true);
    expect(registrationDue(previous, { ...body, user_id: null }, now)).toBe(true);
    expect(registrationDue({ ...previous, at: now - registrationRefreshMs }, body, now)).toBe(true);
  });
});

describe('the outbox', () => {
  const now = 2_000_000_000_000;
  const entry = (key: number, queuedAt = now): OutboxEntry => ({
    key,
    queuedAt,
    event: { event_id: `e-${key}`, delivery_id: 'd', installation_id: 'i', type: 'received', occurred_at: new Date(queuedAt).toISOString() },
  });

  test('sends oldest first, whatever order IndexedDB listed them in', () => {
    expect(outboxPlan([entry(3), entry(1), entry(2)], now)).toEqual({ send: [entry(1), entry(2), entry(3)], drop: [] });
  });

  test('drops reports older than a week, and the oldest past its cap', () => {
    const aged = entry(1, now - outboxMaxAgeMs);
    expect(outboxPlan([aged, entry(2)], now)).toEqual({ send: [entry(2)], drop: [1] });
    const many = Array.from({ length: outboxMaxEntries + 2 }, (_, index) => entry(index + 1));
    const plan = outboxPlan(many, now);
    expect(plan.drop).toEqual([1, 2]);
    expect(plan.send.map((kept) => kept.key)).toEqual(many.slice(2).map((kept) => kept.key));
  });

  test('keeps a report Herald did not answer, or answered "later", and lets go of one it will never take', () => {
    expect([200, 201].map(reportOutcome)).toEqual(['sent', 'sent']);
    expect([null, 401, 403, 408, 429, 500, 503].map(reportOutcome)).toEqual(Array(7).fill('retry'));
    expect([400, 404, 409, 422].map(reportOutcome)).toEqual(Array(4).fill('drop'));
  });
});

test("the VAPID key's base64url reads as bytes, compared with a subscription's key", () => {
  const bytes = base64urlBytes('BPz-_w');
  expect([...bytes]).toEqual([0x04, 0xfc, 0xfe, 0xff]);
  expect(sameKey(bytes.buffer, bytes)).toBe(true);
  expect(sameKey(new Uint8Array([4, 0xfc, 0xfe]).buffer, bytes)).toBe(false);
  expect(sameKey(null, bytes)).toBe(false);
});

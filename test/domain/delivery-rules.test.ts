// What a fanout and a deliver batch decide between their reads and their writes, on plain values:
// batching, fitting, skips, which claimed deliveries are pushed, and what the answers leave to record.
import type { Candidate, ClaimedDelivery, PushedNotification } from '../../src/db/sql/deliveries.ts';
import type { FannedNotification } from '../../src/db/sql/notifications.ts';
import { chunk } from '../../src/domain/chunk.ts';
import {
  deliverBatches,
  fanOut,
  fitsOnce,
  fittedContents,
  laneOf,
  settle,
  skipsByPlatform,
  sortClaimed,
  type PushOutcome,
  type SendableDelivery,
} from '../../src/domain/delivery-rules.ts';
import { highPriority } from '../../src/domain/fanout.ts';

const sentAt = new Date('2026-01-01T00:00:00Z');
const later = (seconds: number) => new Date(sentAt.getTime() + seconds * 1000);

const fanned = (overrides: Partial<FannedNotification> = {}): FannedNotification => ({
  id: crypto.randomUUID(),
  applicationId: 'app-1',
  title: 'Order shipped',
  body: 'On its way',
  imageUrl: null,
  actionUrl: null,
  localizations: null,
  data: {},
  options: {},
  createdAt: sentAt,
  scheduledFor: null,
  credentialProviders: ['apns', 'fcm'],
  ...overrides,
});

const pushed = (overrides: Partial<PushedNotification> = {}): PushedNotification => ({
  id: crypto.randomUUID(),
  title: 'Order shipped',
  body: 'On its way',
  imageUrl: null,
  actionUrl: null,
  localizations: null,
  data: {},
  options: {},
  createdAt: sentAt,
  scheduledFor: null,
  ...overrides,
});

let rows = 0;
const candidate = (overrides: Partial<Candidate> = {}): Candidate => {
  rows += 1;
  return {
    rowId: `row-${rows}`,
    installationId: `installation-${rows}`,
    userId: 'user-1',
    platform: 'ios',
    providerIdentifier: `token-${rows}`,
    permission: 'authorized',
    lastSeenAt: sentAt,
    deviceLocale: null,
    ...overrides,
  };
};

const claimed = (notification: PushedNotification, overrides: Partial<ClaimedDelivery> = {}): ClaimedDelivery => ({
  deliveryId: crypto.randomUUID(),
  notificationId: notification.id,
  installationRowId: crypto.randomUUID(),
  providerIdentifier: 'token',
  installationStatus: 'active',
  attempts: 1,
  locale: null,
  scheduledFor: null,
  ...overrides,
});

const sendable = (notification: PushedNotification, overrides: Partial<ClaimedDelivery> = {}): SendableDelivery => {
  const [delivery] = sortClaimed(new Map([[notification.id, notification]]), [claimed(notification, overrides)], sentAt).sendable;
  return delivery;
};

describe('chunk', () => {
  test('cuts in order into runs of the size, the last one shorter', () => {
    expect(chunk([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
    expect(chunk([1, 2], 5)).toEqual([[1, 2]]);
  });

  test('makes no chunk of nothing, and refuses a size that would never advance', () => {
    expect(chunk([], 3)).toEqual([]);
    expect(() => chunk([1], 0)).toThrow(RangeError);
  });
});

describe('fanOut', () => {
  test('writes one delivery per candidate, pending or skipped with its reason, and counts the skips per platform', () => {
    const notification = fanned({ credentialProviders: ['apns'] });
    const { deliveries, skips } = fanOut(notification, [
      candidate(),
      candidate({ permission: 'denied' }),
      candidate({ platform: 'android' }),
      candidate({ platform: 'android' }),
    ]);
    expect(deliveries.map((d) => [d.platform, d.state, d.reason])).toEqual([
      ['ios', 'pending', null],
      ['ios', 'skipped', 'permission_denied'],
      ['android', 'skipped', 'no_credentials'],
      ['android', 'skipped', 'no_credentials'],
    ]);
    expect(new Set(deliveries.map((d) => d.deliveryId)).size).toBe(4);
    expect(deliveries.every((d) => d.notificationId === notification.id && d.applicationId === 'app-1')).toBe(true);
    expect(Object.fromEntries(skips)).toEqual({
      ios: [{ state: 'skipped', reason: 'permission_denied', count: 1 }],
      android: [{ state: 'skipped', reason: 'no_credentials', count: 2 }],
    });
  });

  test("gives each pending device its localization, and a skipped one neither localization nor cut", () => {
    const notification = fanned({ localizations: { fr: { title: 'Commande expédiée' }, de: { title: 'Versandt' } } });
    const { deliveries } = fanOut(notification, [
      candidate({ deviceLocale: 'fr-FR' }),
      candidate({ deviceLocale: 'ja-JP' }),
      candidate({ deviceLocale: 'de-DE', permission: 'denied' }),
    ]);
    expect(deliveries.map((d) => d.locale)).toEqual(['fr', null, null]);
  });

  test('at local time: each pending delivery is due at the time in its own zone, null when that is the start; skipped ones are not due', () => {
    // Sent at 08:00 UTC for 09:00: Berlin's minute now, New York's five hours later, UTC's in one.
    const notification = fanned({ options: { local_time: '09:00' }, createdAt: new Date('2027-01-15T08:00:00Z') });
    const { deliveries } = fanOut(notification, [
      candidate({ deviceTimezone: 'Europe/Berlin' }),
      candidate({ deviceTimezone: 'America/New_York' }),
      candidate({ deviceTimezone: null }),
      candidate({ deviceTimezone: 'Atlantis/Capital' }),
      candidate({ deviceTimezone: 'America/New_York', permission: 'denied' }),
    ]);
    expect(deliveries.map((d) => d.scheduledFor?.toISOString() ?? null)).toEqual([
      null,
      '2027-01-15T14:00:00.000Z',
      '2027-01-15T09:00:00.000Z',
      '2027-01-15T09:00:00.000Z',
      null,
    ]);
  });

  test('at local time with send_at: counted from send_at, in the fallback zone options.timezone names', () => {
    const notification = fanned({
      options: { local_time: '09:00', timezone: 'Asia/Tokyo' },
      createdAt: new Date('2027-01-14T12:00:00Z'),
      scheduledFor: new Date('2027-01-15T00:00:00Z'),
    });
    const { deliveries } = fanOut(notification, [candidate({ deviceTimezone: null }), candidate({ deviceTimezone: 'Asia/Kathmandu' })]);
    expect(deliveries.map((d) => d.scheduledFor?.toISOString() ?? null)).toEqual([null, '2027-01-15T03:15:00.000Z']);
    // Without local_time nothing is due later, whatever the device's zone.
    expect(fanOut(fanned(), [candidate({ deviceTimezone: 'Asia/Tokyo' })]).deliveries[0].scheduledFor).toBeNull();
  });

  test('records the cut of a push too large for its platform, and none for one that fits', () => {
    const notification = fanned({ body: 'x'.repeat(5_000) });
    const { deliveries } = fanOut(notification, [candidate(), candidate({ permission: 'denied' })]);
    expect(deliveries[0].truncation).toMatchObject({ title: null, dropped: [] });
    expect(deliveries[0].truncation?.body).toBeLessThan(5_000);
    expect(deliveries[1].truncation).toBeNull();
    expect(fanOut(fanned(), [candidate()]).deliveries[0].truncation).toBeNull();
  });
});

describe('skipsByPlatform', () => {
  test('counts only skipped deliveries, by platform and reason', () => {
    const skips = skipsByPlatform([
      { platform: 'ios', state: 'skipped', reason: 'duplicate_identifier' },
      { platform: 'ios', state: 'pending', reason: null },
      { platform: 'ios', state: 'skipped', reason: 'duplicate_identifier' },
      { platform: 'ios', state: 'skipped', reason: 'permission_denied' },
    ]);
    expect(Object.fromEntries(skips)).toEqual({
      ios: [
        { state: 'skipped', reason: 'duplicate_identifier', count: 2 },
        { state: 'skipped', reason: 'permission_denied', count: 1 },
      ],
    });
  });
});

describe('fitsOnce', () => {
  test('fits once per platform and localization, however many pushes ask', () => {
    const calls: string[] = [];
    const fit = fitsOnce((platform, locale) => {
      calls.push(`${platform}/${locale}`);
      return calls.length;
    });
    expect([fit('ios', null), fit('ios', null), fit('ios', 'fr'), fit('android', null), fit('ios', 'fr')]).toEqual([1, 1, 2, 3, 2]);
    expect(calls).toEqual(['ios/null', 'ios/fr', 'android/null']);
  });

  test('remembers an answer that is undefined as well', () => {
    let calls = 0;
    const fit = fitsOnce(() => {
      calls += 1;
      return undefined;
    });
    fit('ios', null);
    fit('ios', null);
    expect(calls).toBe(1);
  });
});

describe('deliverBatches', () => {
  const fanout = (notification: FannedNotification, platforms: ('ios' | 'android')[], state: 'pending' | 'skipped' = 'pending') => ({
    notification,
    deliveries: fanOut(notification, platforms.map((platform) => candidate({ platform }))).deliveries.map((d) => ({ ...d, state })),
  });

  test('puts small notifications of one application, lane and platform in one batch', () => {
    const batches = deliverBatches([fanout(fanned(), ['ios', 'android']), fanout(fanned(), ['ios'])], 10);
    expect(batches.map(({ applicationId, priority, platform, deliveryIds }) => [applicationId, priority, platform, deliveryIds.length])).toEqual([
      ['app-1', 0, 'ios', 2],
      ['app-1', 0, 'android', 1],
    ]);
  });

  test('keeps applications and lanes apart, and leaves skipped deliveries out', () => {
    const batches = deliverBatches(
      [
        fanout(fanned(), ['ios']),
        fanout(fanned({ applicationId: 'app-2' }), ['ios']),
        fanout(fanned({ options: { priority: 'high' } }), ['ios']),
        fanout(fanned(), ['ios'], 'skipped'),
      ],
      10,
    );
    expect(batches.map(({ applicationId, priority, deliveryIds }) => [applicationId, priority, deliveryIds.length])).toEqual([
      ['app-1', 0, 1],
      ['app-2', 0, 1],
      ['app-1', highPriority, 1],
    ]);
  });

  test('at local time: one batch per instant the deliveries are due, each with it as its start', () => {
    const notification = fanned({ options: { local_time: '09:00' }, createdAt: new Date('2027-01-15T08:00:00Z') });
    const zones = ['Europe/Berlin', 'America/New_York', 'Europe/Paris', 'US/Eastern', 'Asia/Tokyo'];
    const { deliveries } = fanOut(notification, zones.map((deviceTimezone) => candidate({ deviceTimezone })));
    const batches = deliverBatches([{ notification, deliveries }], 10);
    expect(batches.map(({ startAfter, deliveryIds }) => [startAfter?.toISOString() ?? null, deliveryIds.length])).toEqual([
      [null, 2],
      ['2027-01-15T14:00:00.000Z', 2],
      ['2027-01-16T00:00:00.000Z', 1],
    ]);
  });

  test('cuts a large notification into batches of the batch size, in order', () => {
    const large = fanout(fanned(), Array(5).fill('ios'));
    const batches = deliverBatches([large], 2);
    expect(batches.map((batch) => batch.deliveryIds.length)).toEqual([2, 2, 1]);
    expect(batches.flatMap((batch) => batch.deliveryIds)).toEqual(large.deliveries.map((d) => d.deliveryId));
  });
});

describe('sortClaimed', () => {
  test('pushes a delivery whose installation is active and whose notification may still be attempted', () => {
    const notification = pushed();
    const delivery = claimed(notification);
    const { sendable, unsendable } = sortClaimed(new Map([[notification.id, notification]]), [delivery], later(60));
    expect(unsendable).toEqual([]);
    expect(sendable).toEqual([{ ...delivery, notification }]);
  });

  test('ends the others: installation deleted or invalid (skipped), notification past its ttl (failed)', () => {
    const notification = pushed({ options: { ttl: 60 } });
    const notifications = new Map([[notification.id, notification]]);
    const deleted = claimed(notification, { installationRowId: null, providerIdentifier: null, installationStatus: null });
    const invalid = claimed(notification, { installationStatus: 'invalid' });
    const expired = claimed(notification);
    const { sendable, unsendable } = sortClaimed(notifications, [deleted, invalid, expired], later(61));
    expect(sendable).toEqual([]);
    expect(unsendable).toEqual([
      { deliveryId: deleted.deliveryId, state: 'skipped', reason: 'installation_deleted', providerMessageId: null },
      { deliveryId: invalid.deliveryId, state: 'skipped', reason: 'installation_invalid', providerMessageId: null },
      { deliveryId: expired.deliveryId, state: 'failed', reason: 'expired', providerMessageId: null },
    ]);
  });

  test("the ttl of a push due later counts from the delivery's own due time", () => {
    const notification = pushed({ options: { ttl: 60 } });
    const notifications = new Map([[notification.id, notification]]);
    const dueLater = claimed(notification, { scheduledFor: later(3600) });
    const dueAtStart = claimed(notification);
    const { sendable, unsendable } = sortClaimed(notifications, [dueLater, dueAtStart], later(3630));
    expect(sendable.map((delivery) => delivery.deliveryId)).toEqual([dueLater.deliveryId]);
    expect(unsendable.map((result) => [result.deliveryId, result.reason])).toEqual([[dueAtStart.deliveryId, 'expired']]);
    expect(sortClaimed(notifications, [dueLater], later(3661)).unsendable.map((result) => result.reason)).toEqual(['expired']);
  });

  test('a ttl 0 push is attempted once only', () => {
    const notification = pushed({ options: { ttl: 0 } });
    const notifications = new Map([[notification.id, notification]]);
    const { sendable, unsendable } = sortClaimed(notifications, [claimed(notification, { attempts: 1 }), claimed(notification, { attempts: 2 })], sentAt);
    expect([sendable.length, unsendable.map((result) => result.reason)]).toEqual([1, ['expired']]);
  });

  test('refuses a pending delivery whose notification the batch did not read', () => {
    expect(() => sortClaimed(new Map(), [claimed(pushed())], sentAt)).toThrow(/was not read/);
  });
});

describe('fittedContents', () => {
  test("gives one content object per notification, platform and localization, the localization's text in it", () => {
    const notification = pushed({ localizations: { fr: { title: 'Commande expédiée' } } });
    const contentOf = fittedContents();
    const french = contentOf(notification, 'ios', 'fr');
    expect(french.notification.title).toBe('Commande expédiée');
    expect(contentOf(notification, 'ios', 'fr')).toBe(french);
    expect(contentOf(notification, 'ios', null).notification.title).toBe('Order shipped');
    expect(contentOf(pushed({ title: 'Other' }), 'ios', null).notification.title).toBe('Other');
  });

  test('cuts a push too large for its platform as the fanout measured it', () => {
    const notification = pushed({ body: 'x'.repeat(5_000) });
    const [delivery] = fanOut(fanned({ ...notification }), [candidate()]).deliveries;
    const body = fittedContents()(notification, 'ios', null).notification.body;
    expect(body).toHaveLength((delivery.truncation?.body ?? 0) + 1);
    expect(body?.endsWith('\u2026')).toBe(true);
  });
});

describe('settle', () => {
  const notification = pushed();
  type Answer<A = PushOutcome> = A extends PushOutcome ? Omit<A, 'deliveryId'> : never;
  const answer = (delivery: SendableDelivery, rest: Answer): PushOutcome => ({ deliveryId: delivery.deliveryId, ...rest });

  test('records accepted, rejected and credential failures as final outcomes', () => {
    const [a, b, c] = [sendable(notification), sendable(notification), sendable(notification)];
    const attempt = settle(
      [a, b, c],
      [answer(a, { kind: 'accepted', providerId: 'apns-1' }), answer(b, { kind: 'rejected', reason: 'PayloadTooLarge' }), answer(c, { kind: 'credentials', reason: 'InvalidProviderToken' })],
      false,
      later(1),
    );
    expect(attempt.results).toEqual([
      { deliveryId: a.deliveryId, state: 'accepted', reason: null, providerMessageId: 'apns-1' },
      { deliveryId: b.deliveryId, state: 'failed', reason: 'PayloadTooLarge', providerMessageId: null },
      { deliveryId: c.deliveryId, state: 'failed', reason: 'provider_credentials', providerMessageId: null },
    ]);
    expect([attempt.invalidations, attempt.retry, attempt.countAttempt]).toEqual([[], [], false]);
  });

  test('fails a dead token and invalidates its installation with the identifier sent and the date the provider gave', () => {
    const delivery = sendable(notification, { providerIdentifier: 'dead-token' });
    const invalidatedAt = later(-3600);
    const attempt = settle([delivery], [answer(delivery, { kind: 'invalid_token', reason: 'Unregistered', invalidatedAt })], true, later(1));
    expect(attempt.results).toEqual([{ deliveryId: delivery.deliveryId, state: 'failed', reason: 'Unregistered', providerMessageId: null }]);
    expect(attempt.invalidations).toEqual([
      { installationRowId: delivery.installationRowId, providerIdentifier: 'dead-token', reason: 'Unregistered', providerTimestamp: invalidatedAt },
    ]);
    expect(attempt.countAttempt).toBe(true);
  });

  test('retries transient errors and unanswered pushes after the longest delay asked, counting why', () => {
    const [a, b, c] = [sendable(notification), sendable(notification), sendable(notification)];
    const attempt = settle(
      [a, b, c],
      [answer(a, { kind: 'transient', reason: 'TooManyRequests', retryAfterSeconds: 120 }), answer(b, { kind: 'transient', reason: 'TooManyRequests' })],
      false,
      later(1),
    );
    expect(attempt.results).toEqual([]);
    expect(attempt.retry).toEqual([a.deliveryId, b.deliveryId, c.deliveryId]);
    expect(attempt.retryAfter).toBe(120);
    expect(Object.fromEntries(attempt.retryReasons)).toEqual({ TooManyRequests: 2, unanswered: 1 });
  });

  test('a transient error whose backoff would land after the ttl is tried once more before the ttl ends, not failed', () => {
    const brief = pushed({ options: { ttl: 60 } });
    const delivery = sendable(brief, { attempts: 1 });
    // 59 s left at later(1): the retry comes 3 s before the expiry, not after the 120 s asked.
    const attempt = settle([delivery], [answer(delivery, { kind: 'transient', reason: 'ServiceUnavailable', retryAfterSeconds: 120 })], false, later(1));
    expect(attempt.results).toEqual([]);
    expect(attempt.retry).toEqual([delivery.deliveryId]);
    expect(attempt.retryAfter).toBe(56);
  });

  test('with no time left for another attempt, the push is recorded expired once its ttl has passed, not before', () => {
    const brief = pushed({ options: { ttl: 20 } });
    const [closing, gone] = [sendable(brief, { attempts: 6 }), sendable(brief, { attempts: 6 })];
    // 1 s left: the retry job comes back after the expiry, when sortClaimed fails it as expired.
    const nearlyOver = settle([closing], [answer(closing, { kind: 'transient', reason: 'provider timeout' })], false, later(19));
    expect([nearlyOver.results, nearlyOver.retry, nearlyOver.retryAfter]).toEqual([[], [closing.deliveryId], 2]);
    const [retried] = sortClaimed(new Map([[brief.id, brief]]), [claimed(brief, { deliveryId: closing.deliveryId })], later(21)).unsendable;
    expect(retried).toEqual({ deliveryId: closing.deliveryId, state: 'failed', reason: 'expired', providerMessageId: null });
    const over = settle([gone], [answer(gone, { kind: 'transient', reason: 'provider timeout' })], false, later(21));
    expect(over.results).toEqual([{ deliveryId: gone.deliveryId, state: 'failed', reason: 'expired', providerMessageId: null }]);
    expect(over.retry).toEqual([]);
  });

  test("a push due later is retried within its ttl counted from its own due time", () => {
    const brief = pushed({ options: { ttl: 60 } });
    const delivery = sendable(brief, { attempts: 1, scheduledFor: later(3600) });
    const attempt = settle([delivery], [answer(delivery, { kind: 'transient', reason: 'ServiceUnavailable', retryAfterSeconds: 120 })], false, later(3601));
    expect([attempt.results, attempt.retry, attempt.retryAfter]).toEqual([[], [delivery.deliveryId], 56]);
  });

  test('a retry job with pushes of several notifications runs before the first of them expires', () => {
    const [brief, lasting] = [pushed({ options: { ttl: 30 } }), pushed({ options: { ttl: 3600 } })];
    const [short, long] = [sendable(brief, { attempts: 1 }), sendable(lasting, { attempts: 1 })];
    const attempt = settle(
      [short, long],
      [answer(short, { kind: 'transient', reason: 'TooManyRequests' }), answer(long, { kind: 'transient', reason: 'TooManyRequests', retryAfterSeconds: 600 })],
      false,
      later(1),
    );
    expect(attempt.retry).toEqual([short.deliveryId, long.deliveryId]);
    expect(attempt.retryAfter).toBe(26);
  });

  test('a push with a ttl of 0 is never retried: it fails as expired', () => {
    const nowOrNever = pushed({ options: { ttl: 0 } });
    const delivery = sendable(nowOrNever, { attempts: 1 });
    const attempt = settle([delivery], [answer(delivery, { kind: 'transient', reason: 'ServiceUnavailable' })], true, later(0));
    expect(attempt.results).toEqual([{ deliveryId: delivery.deliveryId, state: 'failed', reason: 'expired', providerMessageId: null }]);
  });

  test('ignores an answer for a push the chunk did not send', () => {
    const delivery = sendable(notification);
    const attempt = settle([delivery], [{ deliveryId: 'elsewhere', kind: 'accepted' }, answer(delivery, { kind: 'accepted' })], false, later(1));
    expect(attempt.results.map((result) => result.deliveryId)).toEqual([delivery.deliveryId]);
  });
});

describe('laneOf', () => {
  test("is the highest lane of the batch's notifications", () => {
    const normal = pushed();
    const high = pushed({ options: { priority: 'high' } });
    expect(laneOf(new Map([[normal.id, normal]]))).toBe(0);
    expect(laneOf(new Map([[normal.id, normal], [high.id, high]]))).toBe(highPriority);
  });
});

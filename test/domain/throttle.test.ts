// The pace of a throttled notification on plain values: its slots, its chunks, how a chunk is
// spread over its slots, when a job hands its pushes back, and a throttled broadcast's window.
import type { ClaimedDelivery, NewDelivery, PushedNotification } from '../../src/db/sql/deliveries.ts';
import type { FannedNotification } from '../../src/db/sql/notifications.ts';
import { deliverBatches, deliverChunks, type SendableDelivery } from '../../src/domain/delivery-rules.ts';
import {
  handBackDelayMs,
  pacedSends,
  reservationLookaheadMs,
  reserve,
  slotSpacingMs,
  throttledChunkSize,
  throttledWalkWindow,
  throttlePerMinute,
  walkDeferralMs,
} from '../../src/domain/throttle.ts';

describe('the pace', () => {
  test('throttle_per_minute is read only as a whole number from 1', () => {
    expect(throttlePerMinute({})).toBeNull();
    expect(throttlePerMinute({ throttle_per_minute: 120 })).toBe(120);
    expect(throttlePerMinute({ throttle_per_minute: 1 })).toBe(1);
    for (const odd of [0, -5, 1.5, '120', null]) expect(throttlePerMinute({ throttle_per_minute: odd })).toBeNull();
  });

  test('slots are evenly spaced over the minute', () => {
    expect(slotSpacingMs(120)).toBe(500);
    expect(slotSpacingMs(1)).toBe(60_000);
    expect(slotSpacingMs(1_000_000)).toBeCloseTo(0.06);
  });

  test('a chunk is about a second of the pace: at least one push, at most a deliver chunk', () => {
    expect(throttledChunkSize(120, 100)).toBe(2);
    expect(throttledChunkSize(1, 100)).toBe(1);
    expect(throttledChunkSize(29, 100)).toBe(1);
    expect(throttledChunkSize(90, 100)).toBe(2);
    expect(throttledChunkSize(6_000, 250)).toBe(100);
    expect(throttledChunkSize(1_000_000, 250)).toBe(250);
  });
});

describe('reserving slots', () => {
  const spacing = slotSpacingMs(120);

  test('the first reservation starts now; the next ones follow on, without a gap or an overlap', () => {
    const first = reserve(null, 10_000, 2, spacing);
    expect(first).toEqual({ start: 10_000, nextSlot: 11_000 });
    const second = reserve(11_000, 10_050, 2, spacing);
    expect(second).toEqual({ start: 11_000, nextSlot: 12_000 });
  });

  test('a pace that fell behind starts again from now: time lost is never caught up in a burst', () => {
    expect(reserve(5_000, 10_000, 2, spacing)).toEqual({ start: 10_000, nextSlot: 11_000 });
  });

  test('a free slot further ahead than the lookahead reserves nothing, and says when it is', () => {
    expect(reserve(10_000 + reservationLookaheadMs, 10_000, 2, spacing)).toEqual({ start: 11_000, nextSlot: 12_000 });
    expect(reserve(10_000 + reservationLookaheadMs + 1, 10_000, 2, spacing)).toEqual({ freeAt: 11_001 });
  });

  test('a job handed back comes when its slot is within the lookahead, never in the past', () => {
    expect(handBackDelayMs(2_500)).toBe(2_500 - reservationLookaheadMs);
    expect(handBackDelayMs(300)).toBe(0);
  });

  test('workers reserving in turn never push more than the pace in any minute', () => {
    // Three workers, each reserving a chunk of 2 whenever its last one has been pushed or it was
    // handed back, starting at odd times: every push time comes from a reservation.
    const perMinute = 120;
    const pushes: number[] = [];
    let nextSlot: number | null = null;
    let now = 0;
    const workers = [0, 130, 370];
    while (now < 120_000) {
      const worker = workers.indexOf(Math.min(...workers));
      now = workers[worker];
      const taken = reserve(nextSlot, now, 2, slotSpacingMs(perMinute));
      if ('freeAt' in taken) {
        workers[worker] = now + handBackDelayMs(taken.freeAt - now) + 17;
        continue;
      }
      nextSlot = taken.nextSlot;
      pushes.push(taken.start, taken.start + slotSpacingMs(perMinute));
      workers[worker] = taken.start + slotSpacingMs(perMinute) + 5;
    }
    pushes.sort((a, b) => a - b);
    for (let i = 1; i < pushes.length; i += 1) expect(pushes[i] - pushes[i - 1]).toBeGreaterThanOrEqual(slotSpacingMs(perMinute));
    const inFirstMinute = pushes.filter((at) => at < 60_000).length;
    expect(inFirstMinute).toBeLessThanOrEqual(perMinute);
    expect(inFirstMinute).toBeGreaterThanOrEqual(perMinute * 0.95);
  });
});

describe('a chunk spread over its slots', () => {
  test('at a slow pace, one provider call per push, each at its slot', () => {
    expect(pacedSends(2, 500)).toEqual([
      { offsetMs: 0, from: 0, to: 1 },
      { offsetMs: 500, from: 1, to: 2 },
    ]);
  });

  test('pushes whose slots fall within a tick go together', () => {
    expect(pacedSends(5, 10, 20)).toEqual([
      { offsetMs: 0, from: 0, to: 2 },
      { offsetMs: 20, from: 2, to: 4 },
      { offsetMs: 40, from: 4, to: 5 },
    ]);
    expect(pacedSends(250, slotSpacingMs(1_000_000))).toEqual([{ offsetMs: 0, from: 0, to: 250 }]);
  });
});

describe('deliver batches and chunks', () => {
  const notification = (options: Record<string, unknown> = {}): FannedNotification & PushedNotification => ({
    id: crypto.randomUUID(),
    applicationId: 'app-1',
    title: 'Sale',
    body: null,
    imageUrl: null,
    actionUrl: null,
    localizations: null,
    data: {},
    options,
    credentialProviders: ['apns', 'fcm'],
    createdAt: new Date(),
    scheduledFor: null,
  });
  const pending = (n: FannedNotification, count: number): NewDelivery[] =>
    Array.from({ length: count }, (_, i) => ({
      rowId: `row-${n.id}-${i}`,
      installationId: `installation-${i}`,
      userId: 'user-1',
      platform: 'ios',
      providerIdentifier: `token-${n.id}-${i}`,
      permission: 'authorized',
      lastSeenAt: new Date(),
      deviceLocale: null,
      applicationId: 'app-1',
      notificationId: n.id,
      deliveryId: `delivery-${n.id}-${i}`,
      state: 'pending',
      reason: null,
      locale: null,
      truncation: null,
    }));

  test("a throttled notification's deliveries are batched apart from any other's", () => {
    const [a, b, paced] = [notification(), notification(), notification({ throttle_per_minute: 60 })];
    const batches = deliverBatches(
      [a, b, paced].map((n) => ({ notification: n, deliveries: pending(n, 3) })),
      5,
    );
    const own = batches.filter((batch) => batch.deliveryIds.some((id) => id.includes(paced.id)));
    expect(own).toHaveLength(1);
    expect(own[0].deliveryIds).toHaveLength(3);
    expect(own[0].deliveryIds.every((id) => id.includes(paced.id))).toBe(true);
    expect(batches.filter((batch) => batch !== own[0]).map((batch) => batch.deliveryIds.length)).toEqual([5, 1]);
  });

  test("unthrottled pushes go first in full chunks; each throttled notification's in chunks of a second of its pace", () => {
    const [plain, slow, fast] = [notification(), notification({ throttle_per_minute: 120 }), notification({ throttle_per_minute: 600 })];
    const sendable = (n: PushedNotification, count: number): SendableDelivery[] =>
      Array.from({ length: count }, (_, i): SendableDelivery => {
        const claimed: ClaimedDelivery = {
          deliveryId: `${n.id}-${i}`,
          notificationId: n.id,
          installationRowId: `row-${i}`,
          providerIdentifier: `token-${i}`,
          installationStatus: 'active',
          attempts: 1,
          locale: null,
          scheduledFor: null,
        };
        return { ...claimed, installationRowId: `row-${i}`, providerIdentifier: `token-${i}`, notification: n };
      });
    const chunks = deliverChunks([...sendable(slow, 5), ...sendable(plain, 7), ...sendable(fast, 25)], 4);
    expect(chunks.map((part) => [part.pace?.perMinute ?? null, part.deliveries.length])).toEqual([
      [null, 4],
      [null, 3],
      [120, 2],
      [120, 2],
      [120, 1],
      [600, 4],
      [600, 4],
      [600, 4],
      [600, 4],
      [600, 4],
      [600, 4],
      [600, 1],
    ]);
    for (const part of chunks.filter((c) => c.pace)) {
      expect(new Set(part.deliveries.map((d) => d.notificationId))).toEqual(new Set([part.pace!.notificationId]));
    }
  });
});

describe("a throttled broadcast's walk", () => {
  test('its window is a couple of minutes of its pace, at least a batch, at most an unthrottled window', () => {
    expect(throttledWalkWindow(120, 1_000, 20_000)).toBe(1_000);
    expect(throttledWalkWindow(3_000, 1_000, 20_000)).toBe(6_000);
    expect(throttledWalkWindow(1_000_000, 1_000, 20_000)).toBe(20_000);
  });

  test('a full window defers its next slice until the pace has made room, a second at least', () => {
    expect(walkDeferralMs(1_500, 1_000, 120)).toBe(501 * 500);
    expect(walkDeferralMs(1_000, 1_000, 120)).toBe(1_000);
    expect(walkDeferralMs(20_100, 20_000, 1_000_000)).toBe(1_000);
  });
});

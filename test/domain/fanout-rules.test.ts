// The fanout's rules without I/O: eligibility, expiry, backoff and the final status.
import type { Candidate } from '../../src/db/sql/deliveries.ts';
import { classify, expiresAt, finalStatus, mayAttempt, retryDelaySeconds } from '../../src/domain/fanout.ts';

const candidate = (overrides: Partial<Candidate>): Candidate => ({
  rowId: crypto.randomUUID(),
  installationId: 'i',
  userId: 'u',
  platform: 'ios',
  providerIdentifier: 'token',
  permission: 'authorized',
  lastSeenAt: new Date('2026-01-01T00:00:00Z'),
  deviceLocale: null,
  ...overrides,
});
const everywhere = new Set(['ios', 'android']);

describe('classify', () => {
  test('denied permission is skipped on both platforms', () => {
    const [ios, android] = classify(
      [candidate({ permission: 'denied' }), candidate({ platform: 'android', permission: 'denied', providerIdentifier: 'f' })],
      { dataOnly: false, platformsWithCredentials: everywhere },
    );
    expect([ios.reason, android.reason]).toEqual(['permission_denied', 'permission_denied']);
  });

  test('undetermined permission skips an iOS alert but not a silent push, and never an Android one', () => {
    const installations = [candidate({ permission: 'not_determined' }), candidate({ platform: 'android', permission: 'not_determined', providerIdentifier: 'f' })];
    expect(classify(installations, { dataOnly: false, platformsWithCredentials: everywhere }).map((d) => d.reason)).toEqual([
      'permission_not_determined',
      null,
    ]);
    expect(classify(installations, { dataOnly: true, platformsWithCredentials: everywhere }).map((d) => d.state)).toEqual([
      'pending',
      'pending',
    ]);
  });

  test('a platform without credentials is skipped as no_credentials', () => {
    const [delivery] = classify([candidate({ platform: 'android' })], { dataOnly: false, platformsWithCredentials: new Set(['ios']) });
    expect([delivery.state, delivery.reason]).toEqual(['skipped', 'no_credentials']);
  });

  test('a shared identifier goes to the most recently seen eligible installation only', () => {
    const older = candidate({ installationId: 'older', lastSeenAt: new Date('2026-01-01T00:00:00Z') });
    const newer = candidate({ installationId: 'newer', lastSeenAt: new Date('2026-02-01T00:00:00Z') });
    const deniedNewest = candidate({ installationId: 'denied', permission: 'denied', lastSeenAt: new Date('2026-03-01T00:00:00Z') });
    const sameTokenOtherPlatform = candidate({ installationId: 'android', platform: 'android' });
    const result = classify([older, newer, deniedNewest, sameTokenOtherPlatform], { dataOnly: false, platformsWithCredentials: everywhere });
    expect(Object.fromEntries(result.map((d) => [d.installationId, d.reason]))).toEqual({
      older: 'duplicate_identifier',
      newer: null,
      denied: 'permission_denied',
      android: null,
    });
  });
});

describe('time to live', () => {
  const createdAt = new Date('2026-01-01T00:00:00Z');
  const at = (seconds: number) => new Date(createdAt.getTime() + seconds * 1000);

  test('no ttl: the provider keeps its default, and retries go on for 24 hours, whatever the number of attempts', () => {
    expect(expiresAt({ options: {}, createdAt })).toBeNull();
    expect(mayAttempt({ options: {}, createdAt }, 40, at(60))).toBe(true);
    expect(mayAttempt({ options: {}, createdAt }, 200, at(86_400))).toBe(true);
    expect(mayAttempt({ options: {}, createdAt }, 2, at(86_401))).toBe(false);
  });

  test('a long ttl outlasts an outage: attempts are not counted, only time', () => {
    const notification = { options: { ttl: 3600 }, createdAt };
    expect(mayAttempt(notification, 30, at(3600))).toBe(true);
    expect(mayAttempt(notification, 2, at(3601))).toBe(false);
  });

  test('the time queued counts: the window starts at created_at, not at the first attempt', () => {
    const notification = { options: { ttl: 60 }, createdAt };
    expect(expiresAt(notification)).toEqual(at(60));
    expect(mayAttempt(notification, 1, at(60))).toBe(true);
    expect(mayAttempt(notification, 1, at(61))).toBe(false);
  });

  test('a scheduled send\'s window starts at its send_at, not when it was sent', () => {
    const notification = { options: { ttl: 60 }, createdAt, scheduledFor: at(3600) };
    expect(expiresAt(notification)).toEqual(at(3660));
    expect(mayAttempt(notification, 1, at(3660))).toBe(true);
    expect(mayAttempt(notification, 1, at(3661))).toBe(false);
    expect(mayAttempt({ options: {}, createdAt, scheduledFor: at(3600) }, 9, at(3600 + 86_400))).toBe(true);
  });

  test('ttl 0 allows exactly one attempt, whenever it happens', () => {
    const notification = { options: { ttl: 0 }, createdAt };
    expect(mayAttempt(notification, 1, at(5))).toBe(true);
    expect(mayAttempt(notification, 2, at(0))).toBe(false);
  });
});

describe('retry delay', () => {
  test('doubles per attempt from 1 s, capped at 300 s, within ±20 % jitter', () => {
    const low = () => 0;
    const high = () => 0.999999;
    expect([1, 2, 3, 4].map((attempt) => retryDelaySeconds(attempt, undefined, low))).toEqual([1, 2, 4, 7]);
    expect(retryDelaySeconds(3, undefined, high)).toBe(5);
    expect(retryDelaySeconds(20, undefined, high)).toBe(360);
    expect(retryDelaySeconds(20, undefined, low)).toBe(240);
  });

  test('never sooner than the provider asked', () => {
    expect(retryDelaySeconds(1, 30, () => 0.5)).toBe(30);
  });
});

describe('final status', () => {
  test.each([
    [{ accepted: 3, failed: 0 }, 'completed'],
    [{ accepted: 0, failed: 0 }, 'completed'],
    [{ accepted: 2, failed: 1 }, 'partial'],
    [{ accepted: 0, failed: 2 }, 'failed'],
  ])('%o is %s', (counts, status) => {
    expect(finalStatus(counts)).toBe(status);
  });
});

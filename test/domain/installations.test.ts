// Installation rules without I/O: when a provider's invalidation is stale.
import { isStaleInvalidation } from '../../src/domain/installations.ts';

describe('isStaleInvalidation', () => {
  const identifierUpdatedAt = new Date('2026-03-01T12:00:00.000Z');
  const at = (offsetMs: number) => new Date(identifierUpdatedAt.getTime() + offsetMs);

  test('a 410 dated before the identifier last changed is stale: the device has a new token since', () => {
    expect(isStaleInvalidation(at(-1), identifierUpdatedAt)).toBe(true);
    expect(isStaleInvalidation(at(-86_400_000), identifierUpdatedAt)).toBe(true);
  });

  test('a 410 dated at or after the identifier last changed counts', () => {
    expect(isStaleInvalidation(at(0), identifierUpdatedAt)).toBe(false);
    expect(isStaleInvalidation(at(1), identifierUpdatedAt)).toBe(false);
  });

  test('an invalidation without a date (FCM, other APNs reasons) is never stale', () => {
    expect(isStaleInvalidation(null, identifierUpdatedAt)).toBe(false);
  });
});

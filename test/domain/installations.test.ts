// Installation rules without I/O, on a fixed clock: what a PUT and a PATCH write, and when a
// provider's invalidation is stale.
import { Installation } from '../../src/db/entities.ts';
import { isStaleInvalidation, patchedFields, replacement, type InstallationInput } from '../../src/domain/installations.ts';

const registered = new Date('2026-01-10T08:00:00.000Z');
const now = new Date('2026-02-20T17:30:00.000Z');

/** An installation registered once and untouched since. */
const existing = (overrides: Partial<Installation> = {}): Installation =>
  Object.assign(new Installation(), {
    platform: 'ios',
    providerIdentifier: 'token-a',
    status: 'active',
    permission: 'authorized',
    userId: 'user-1',
    device: { app_version: '1.0', os_version: '18.1', model: null, locale: null, timezone: null },
    registeredAt: registered,
    lastSeenAt: registered,
    identifierUpdatedAt: registered,
    permissionUpdatedAt: registered,
    invalidatedAt: null,
    invalidReason: null,
    ...overrides,
  });
const put = (overrides: Partial<InstallationInput> = {}): InstallationInput => ({
  platform: 'ios',
  provider: { identifier: 'token-a' },
  permission: 'authorized',
  user_id: 'user-1',
  ...overrides,
});

describe('replacement (what a PUT writes)', () => {
  test('a first registration dates every field now, active, with null for what was not given', () => {
    expect(replacement(null, { platform: 'android', provider: { identifier: 'fcm-1' }, permission: 'unknown' }, now)).toEqual({
      platform: 'android',
      providerIdentifier: 'fcm-1',
      permission: 'unknown',
      userId: null,
      device: { app_version: null, os_version: null, model: null, locale: null, timezone: null },
      registeredAt: now,
      lastSeenAt: now,
      identifierUpdatedAt: now,
      permissionUpdatedAt: now,
      status: 'active',
      invalidatedAt: null,
      invalidReason: null,
    });
  });

  test('a replace keeps registered_at and moves last_seen_at', () => {
    const fields = replacement(existing(), put(), now);
    expect(fields.registeredAt).toBe(registered);
    expect(fields.lastSeenAt).toBe(now);
  });

  test('the same identifier keeps identifier_updated_at; a new one moves it', () => {
    expect(replacement(existing(), put({ user_id: 'user-2' }), now).identifierUpdatedAt).toBe(registered);
    const changed = replacement(existing(), put({ provider: { identifier: 'token-b' } }), now);
    expect(changed.providerIdentifier).toBe('token-b');
    expect(changed.identifierUpdatedAt).toBe(now);
  });

  test('the same permission keeps permission_updated_at; another one moves it', () => {
    const same = replacement(existing(), put({ provider: { identifier: 'token-b' } }), now);
    expect(same.permissionUpdatedAt).toBe(registered);
    const changed = replacement(existing(), put({ permission: 'denied' }), now);
    expect([changed.permission, changed.permissionUpdatedAt]).toEqual(['denied', now]);
  });

  test('a PUT without a permission (the document defaults it to unknown) resets it, which is a change', () => {
    const fields = replacement(existing(), put({ permission: 'unknown' }), now);
    expect([fields.permission, fields.permissionUpdatedAt]).toEqual(['unknown', now]);
  });

  test('what is left out of a replace is cleared: user and device fields become null', () => {
    const fields = replacement(existing(), { platform: 'ios', provider: { identifier: 'token-a' }, permission: 'authorized', device: { model: 'iPhone16,2' } }, now);
    expect(fields.userId).toBeNull();
    expect(fields.device).toEqual({ app_version: null, os_version: null, model: 'iPhone16,2', locale: null, timezone: null });
  });

  const invalidated = () =>
    existing({ status: 'invalid', invalidatedAt: new Date('2026-02-01T00:00:00.000Z'), invalidReason: 'Unregistered' });

  test('a new identifier re-activates an invalidated installation and clears why it was invalid', () => {
    const fields = replacement(invalidated(), put({ provider: { identifier: 'token-fresh' } }), now);
    expect(fields).toMatchObject({ status: 'active', invalidatedAt: null, invalidReason: null, identifierUpdatedAt: now });
  });

  test('the same identifier leaves an invalidated installation invalid, with its date and reason', () => {
    const before = invalidated();
    const fields = replacement(before, put(), now);
    expect(fields).toMatchObject({ status: 'invalid', invalidatedAt: before.invalidatedAt, invalidReason: 'Unregistered' });
    expect(fields.lastSeenAt).toBe(now);
  });
});

describe('patchedFields (what a PATCH writes)', () => {
  test('the same permission keeps permission_updated_at; another one moves it', () => {
    expect(patchedFields(existing(), { permission: 'authorized' }, now)).toEqual({
      userId: 'user-1',
      permission: 'authorized',
      permissionUpdatedAt: registered,
      lastSeenAt: now,
    });
    expect(patchedFields(existing(), { permission: 'denied' }, now)).toMatchObject({ permission: 'denied', permissionUpdatedAt: now });
  });

  test('the user is replaced when given, detached by null, and kept when left out', () => {
    expect(patchedFields(existing(), { user_id: 'user-2' }, now).userId).toBe('user-2');
    expect(patchedFields(existing(), { user_id: null }, now).userId).toBeNull();
    expect(patchedFields(existing(), { permission: 'denied' }, now).userId).toBe('user-1');
  });

  test('a user change alone moves last_seen_at and leaves the permission and its date alone', () => {
    expect(patchedFields(existing(), { user_id: 'user-2' }, now)).toEqual({
      userId: 'user-2',
      permission: 'authorized',
      permissionUpdatedAt: registered,
      lastSeenAt: now,
    });
  });
});

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

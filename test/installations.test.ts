// Installations over HTTP against real Postgres, responses validated against the document:
// PUT (create / full replace), PATCH, GET, DELETE, every limit at its edge, a race of first
// registrations, and isolation between applications.
import request from 'supertest';
import { Installation } from '../src/db/entities.ts';
import { startHarness, type Harness } from './support/harness.ts';

let harness: Harness;
let token: string;
let applicationId: string;

beforeAll(async () => {
  harness = await startHarness();
  const application = await harness.newApplication('installations');
  applicationId = application.id;
  token = await application.token(['installations:write', 'installations:read']);
});
afterAll(() => harness.close());

let counter = 0;
/** A fresh installation id per test, so tests never share state. */
const newId = (label: string) => `${label}-${Date.now()}-${++counter}`;
const path = (installationId: string) => `/api/v1/installations/${encodeURIComponent(installationId)}`;

/**
 * Fixes the server's clock (Date only; timers and I/O run as usual) until the test ends; `tick`
 * moves it a second on. Timestamps a test compares then differ because the clock moved, not
 * because enough wall time happened to pass between two requests.
 */
function fixedClock() {
  import.meta.jest.useFakeTimers({
    doNotFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'nextTick', 'queueMicrotask', 'hrtime', 'performance'],
    now: Date.now(),
  });
  return { tick: () => import.meta.jest.setSystemTime(Date.now() + 1000) };
}
afterEach(() => import.meta.jest.useRealTimers());

const put = (installationId: string, body: unknown, bearer = token) =>
  request(harness.app).put(path(installationId)).set('Authorization', `Bearer ${bearer}`).send(body as object);
const patch = (installationId: string, body: unknown, bearer = token) =>
  request(harness.app).patch(path(installationId)).set('Authorization', `Bearer ${bearer}`).send(body as object);
const get = (installationId: string, bearer = token) =>
  request(harness.app).get(path(installationId)).set('Authorization', `Bearer ${bearer}`);
const del = (installationId: string, bearer = token) =>
  request(harness.app).delete(path(installationId)).set('Authorization', `Bearer ${bearer}`);

const fullDevice = {
  app_version: '3.2.0',
  os_version: '18.1',
  model: 'iPhone16,2',
  locale: 'en_GB',
  timezone: 'Europe/London',
};
const emptyDevice = { app_version: null, os_version: null, model: null, locale: null, timezone: null };
const deviceFields = Object.keys(fullDevice) as (keyof typeof fullDevice)[];

async function rowsFor(installationId: string, application = applicationId) {
  return harness.orm.em.fork().find(Installation, { applicationId: application, installationId });
}

describe('PUT /api/v1/installations/{installationId}', () => {
  test('creating answers 201 and echoes every field given', async () => {
    const id = newId('create');
    const res = await put(id, {
      provider: { identifier: 'apns-token-create' },
      platform: 'ios',
      permission: 'authorized',
      user_id: 'user-4821',
      device: fullDevice,
    });
    expect(res.status).toBe(201);
    const data = res.body.data;
    expect(data).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      installation_id: id,
      platform: 'ios',
      provider_identifier_type: 'apns_token',
      status: 'active',
      permission: 'authorized',
      device: fullDevice,
      registered_at: expect.any(String),
      last_seen_at: expect.any(String),
      identifier_updated_at: expect.any(String),
      user_id: 'user-4821',
      permission_updated_at: expect.any(String),
      invalidated_at: null,
      invalid_reason: null,
      tags: {},
    });
    // Both history timestamps are set at creation, with the registration.
    expect(data.identifier_updated_at).toBe(data.registered_at);
    expect(data.permission_updated_at).toBe(data.registered_at);
  });

  test('replacing an existing installation answers 200 with the same id', async () => {
    const id = newId('replace');
    const first = await put(id, { provider: { identifier: 'tok-1' }, platform: 'ios' });
    expect(first.status).toBe(201);
    const second = await put(id, { provider: { identifier: 'tok-1' }, platform: 'ios' });
    expect(second.status).toBe(200);
    expect(second.body.data.id).toBe(first.body.data.id);
    expect(await rowsFor(id)).toHaveLength(1);
  });

  test('a replace is full: omitted user_id and device fields become null, omitted permission becomes unknown', async () => {
    const id = newId('full-replace');
    await put(id, {
      provider: { identifier: 'tok-full' },
      platform: 'ios',
      permission: 'authorized',
      user_id: 'user-1',
      device: fullDevice,
    }).expect(201);
    const res = await put(id, { provider: { identifier: 'tok-full' }, platform: 'ios' });
    expect(res.status).toBe(200);
    expect(res.body.data.user_id).toBeNull();
    expect(res.body.data.device).toEqual(emptyDevice);
    expect(res.body.data.permission).toBe('unknown');
  });

  test('a replace with some device fields keeps only those, the others become null', async () => {
    const id = newId('partial-device');
    await put(id, { provider: { identifier: 'tok' }, platform: 'android', device: fullDevice }).expect(201);
    const res = await put(id, { provider: { identifier: 'tok' }, platform: 'android', device: { model: 'Pixel 8' } });
    expect(res.status).toBe(200);
    expect(res.body.data.device).toEqual({ ...emptyDevice, model: 'Pixel 8' });
  });

  test('a replace keeps registered_at and moves last_seen_at', async () => {
    const id = newId('registered-at');
    const clock = fixedClock();
    const first = await put(id, { provider: { identifier: 'tok' }, platform: 'ios' });
    clock.tick();
    const second = await put(id, { provider: { identifier: 'tok' }, platform: 'ios' });
    expect(second.body.data.registered_at).toBe(first.body.data.registered_at);
    expect(Date.parse(second.body.data.last_seen_at)).toBeGreaterThan(Date.parse(first.body.data.last_seen_at));
  });

  test('identifier_updated_at changes only when the identifier changes', async () => {
    const id = newId('identifier-updated');
    const clock = fixedClock();
    const first = await put(id, { provider: { identifier: 'tok-a' }, platform: 'ios' });
    clock.tick();
    const same = await put(id, { provider: { identifier: 'tok-a' }, platform: 'ios', user_id: 'u' });
    expect(same.body.data.identifier_updated_at).toBe(first.body.data.identifier_updated_at);
    clock.tick();
    const changed = await put(id, { provider: { identifier: 'tok-b' }, platform: 'ios' });
    expect(Date.parse(changed.body.data.identifier_updated_at)).toBeGreaterThan(
      Date.parse(first.body.data.identifier_updated_at),
    );
    expect(changed.body.data.identifier_updated_at).toBe(changed.body.data.last_seen_at);
  });

  test('permission_updated_at changes only when the permission changes', async () => {
    const id = newId('permission-updated');
    const clock = fixedClock();
    const first = await put(id, { provider: { identifier: 'tok' }, platform: 'ios', permission: 'authorized' });
    clock.tick();
    const same = await put(id, { provider: { identifier: 'tok-2' }, platform: 'ios', permission: 'authorized' });
    expect(same.body.data.permission_updated_at).toBe(first.body.data.permission_updated_at);
    clock.tick();
    const changed = await put(id, { provider: { identifier: 'tok-2' }, platform: 'ios', permission: 'denied' });
    expect(changed.body.data.permission).toBe('denied');
    expect(Date.parse(changed.body.data.permission_updated_at)).toBeGreaterThan(
      Date.parse(first.body.data.permission_updated_at),
    );
  });

  test('dropping the permission on a replace resets it to unknown and counts as a permission change', async () => {
    const id = newId('permission-reset');
    const clock = fixedClock();
    const first = await put(id, { provider: { identifier: 'tok' }, platform: 'ios', permission: 'denied' });
    clock.tick();
    const res = await put(id, { provider: { identifier: 'tok' }, platform: 'ios' });
    expect(res.body.data.permission).toBe('unknown');
    expect(Date.parse(res.body.data.permission_updated_at)).toBeGreaterThan(
      Date.parse(first.body.data.permission_updated_at),
    );
  });

  test('permission defaults to unknown', async () => {
    const res = await put(newId('default-permission'), { provider: { identifier: 'tok' }, platform: 'android' });
    expect(res.status).toBe(201);
    expect(res.body.data.permission).toBe('unknown');
  });

  test.each([
    ['ios', 'apns_token'],
    ['android', 'fcm_token'],
  ])('provider_identifier_type for %s is %s', async (platform, type) => {
    const res = await put(newId(`type-${platform}`), { provider: { identifier: 'tok' }, platform });
    expect(res.status).toBe(201);
    expect(res.body.data.provider_identifier_type).toBe(type);
  });

  test('switching platform on a replace switches provider_identifier_type', async () => {
    const id = newId('switch-platform');
    await put(id, { provider: { identifier: 'tok' }, platform: 'ios' }).expect(201);
    const res = await put(id, { provider: { identifier: 'tok' }, platform: 'android' });
    expect(res.status).toBe(200);
    expect(res.body.data.platform).toBe('android');
    expect(res.body.data.provider_identifier_type).toBe('fcm_token');
  });

  test('the device identifier never appears in any response', async () => {
    const id = newId('secret-identifier');
    const identifier = 'a1b2c3d4e5f60718293a4b5c6d7e8f90deadbeefcafe';
    const responses = [
      await put(id, { provider: { identifier }, platform: 'ios' }),
      await put(id, { provider: { identifier }, platform: 'ios', user_id: 'u' }),
      await patch(id, { permission: 'authorized' }),
      await get(id),
    ];
    for (const res of responses) {
      expect(res.status).toBeLessThan(300);
      expect(res.text).not.toContain(identifier);
      expect(JSON.stringify(res.headers)).not.toContain(identifier);
      expect(res.body.data).not.toHaveProperty('provider');
      expect(res.body.data).not.toHaveProperty('identifier');
    }
  });

  describe('an invalidated installation', () => {
    async function invalidate(installationId: string) {
      await harness.orm.em
        .fork()
        .execute(
          `update installations set status = 'invalid', invalidated_at = now(), invalid_reason = 'Unregistered'
           where application_id = ? and installation_id = ?`,
          [applicationId, installationId],
        );
    }

    test('stays invalid when registered again with the same identifier', async () => {
      const id = newId('invalid-same');
      await put(id, { provider: { identifier: 'dead-token' }, platform: 'ios' }).expect(201);
      await invalidate(id);
      const invalid = await get(id);
      expect(invalid.body.data).toMatchObject({ status: 'invalid', invalid_reason: 'Unregistered' });
      expect(invalid.body.data.invalidated_at).toEqual(expect.any(String));

      const res = await put(id, { provider: { identifier: 'dead-token' }, platform: 'ios', user_id: 'u' });
      expect(res.status).toBe(200);
      expect(res.body.data.status).toBe('invalid');
      expect(res.body.data.invalid_reason).toBe('Unregistered');
      expect(res.body.data.invalidated_at).toBe(invalid.body.data.invalidated_at);
      expect(res.body.data.user_id).toBe('u');
    });

    test('is re-activated by a registration with a new identifier', async () => {
      const id = newId('invalid-new');
      await put(id, { provider: { identifier: 'dead-token' }, platform: 'android' }).expect(201);
      await invalidate(id);
      const res = await put(id, { provider: { identifier: 'fresh-token' }, platform: 'android' });
      expect(res.status).toBe(200);
      expect(res.body.data.status).toBe('active');
      expect(res.body.data.invalidated_at).toBeNull();
      expect(res.body.data.invalid_reason).toBeNull();
      const [row] = await rowsFor(id);
      expect(row.status).toBe('active');
      expect(row.providerIdentifier).toBe('fresh-token');
    });
  });
});

describe('PATCH /api/v1/installations/{installationId}', () => {
  test('changes user_id and keeps every other field', async () => {
    const id = newId('patch-user');
    const created = await put(id, {
      provider: { identifier: 'tok' },
      platform: 'ios',
      permission: 'authorized',
      user_id: 'before',
      device: fullDevice,
    });
    const res = await patch(id, { user_id: 'after' });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      user_id: 'after',
      permission: 'authorized',
      device: fullDevice,
      registered_at: created.body.data.registered_at,
      identifier_updated_at: created.body.data.identifier_updated_at,
      permission_updated_at: created.body.data.permission_updated_at,
    });
    expect((await get(id)).body.data.user_id).toBe('after');
  });

  test('user_id null detaches the user', async () => {
    const id = newId('patch-detach');
    await put(id, { provider: { identifier: 'tok' }, platform: 'ios', user_id: 'someone' }).expect(201);
    const res = await patch(id, { user_id: null });
    expect(res.status).toBe(200);
    expect(res.body.data.user_id).toBeNull();
    expect((await rowsFor(id))[0].userId).toBeNull();
  });

  test('a permission change sets permission_updated_at; the same permission does not', async () => {
    const id = newId('patch-permission');
    const clock = fixedClock();
    const created = await put(id, { provider: { identifier: 'tok' }, platform: 'ios', permission: 'authorized' });
    clock.tick();
    const same = await patch(id, { permission: 'authorized' });
    expect(same.status).toBe(200);
    expect(same.body.data.permission_updated_at).toBe(created.body.data.permission_updated_at);
    clock.tick();
    const changed = await patch(id, { permission: 'denied' });
    expect(changed.status).toBe(200);
    expect(changed.body.data.permission).toBe('denied');
    expect(Date.parse(changed.body.data.permission_updated_at)).toBeGreaterThan(
      Date.parse(created.body.data.permission_updated_at),
    );
    expect(changed.body.data.user_id).toBeNull();
  });

  test('both fields can change together', async () => {
    const id = newId('patch-both');
    await put(id, { provider: { identifier: 'tok' }, platform: 'android' }).expect(201);
    const res = await patch(id, { user_id: 'u-both', permission: 'provisional' });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ user_id: 'u-both', permission: 'provisional' });
  });

  test('an empty body is 422', async () => {
    const id = newId('patch-empty');
    await put(id, { provider: { identifier: 'tok' }, platform: 'ios' }).expect(201);
    const res = await patch(id, {});
    expect(res.status).toBe(422);
    expect(res.body.message).toEqual(expect.any(String));
    expect(res.body.errors).toEqual(expect.any(Object));
  });

  test('an unknown field is 422, keyed by that field', async () => {
    const id = newId('patch-unknown');
    await put(id, { provider: { identifier: 'tok' }, platform: 'ios' }).expect(201);
    const res = await patch(id, { user_id: 'u', platform: 'android' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toContain('platform');
    expect((await get(id)).body.data).toMatchObject({ platform: 'ios', user_id: null });
  });

  test('a permission outside the enumeration is 422', async () => {
    const id = newId('patch-bad-permission');
    await put(id, { provider: { identifier: 'tok' }, platform: 'ios' }).expect(201);
    const res = await patch(id, { permission: 'maybe' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toContain('permission');
  });

  test('an absent installation is 404 Not Found', async () => {
    const res = await patch(newId('patch-absent'), { user_id: 'u' });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });
});

describe('GET /api/v1/installations/{installationId}', () => {
  test('returns the installation as registered', async () => {
    const id = newId('get');
    const created = await put(id, { provider: { identifier: 'tok' }, platform: 'android', user_id: 'g' });
    const res = await get(id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created.body);
  });

  test('an absent installation is 404 Not Found', async () => {
    const res = await get(newId('get-absent'));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: 'Not Found' });
  });
});

describe('DELETE /api/v1/installations/{installationId}', () => {
  test('answers 204 with no body, after which GET, PATCH and DELETE are 404', async () => {
    const id = newId('delete');
    await put(id, { provider: { identifier: 'tok' }, platform: 'ios' }).expect(201);
    const res = await del(id);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(await rowsFor(id)).toHaveLength(0);
    expect((await get(id)).status).toBe(404);
    expect((await patch(id, { user_id: 'u' })).status).toBe(404);
    const again = await del(id);
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ message: 'Not Found' });
  });

  test('registering after a delete creates a new installation (201)', async () => {
    const id = newId('delete-recreate');
    const first = await put(id, { provider: { identifier: 'tok' }, platform: 'ios', user_id: 'old' });
    await del(id).expect(204);
    const res = await put(id, { provider: { identifier: 'tok' }, platform: 'ios' });
    expect(res.status).toBe(201);
    expect(res.body.data.id).not.toBe(first.body.data.id);
    expect(res.body.data.user_id).toBeNull();
  });
});

describe('limits', () => {
  const valid = { provider: { identifier: 'tok' }, platform: 'ios' };

  test('installationId of 255 characters is accepted', async () => {
    const id = `${newId('max')}-`.padEnd(255, 'x');
    expect(id).toHaveLength(255);
    const res = await put(id, valid);
    expect(res.status).toBe(201);
    expect(res.body.data.installation_id).toBe(id);
    expect((await get(id)).status).toBe(200);
  });

  test('installationId of 256 characters is 422 where it would be stored (PUT, PATCH), 404 where it is looked up (GET, DELETE)', async () => {
    const id = `${newId('over')}-`.padEnd(256, 'x');
    expect(id).toHaveLength(256);
    for (const res of [await put(id, valid), await patch(id, { user_id: 'u' })]) {
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(['installationId']);
    }
    // No installation can have that id: the spec lists 401/403/404 for these.
    for (const res of [await get(id), await del(id)]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: 'Not Found' });
    }
  });

  test('user_id of 255 characters is accepted, 256 is 422', async () => {
    const id = newId('user-limit');
    const ok = await put(id, { ...valid, user_id: 'u'.repeat(255) });
    expect(ok.status).toBe(201);
    expect(ok.body.data.user_id).toBe('u'.repeat(255));
    const over = await put(id, { ...valid, user_id: 'u'.repeat(256) });
    expect(over.status).toBe(422);
    expect(Object.keys(over.body.errors)).toEqual(['user_id']);
    expect((await get(id)).body.data.user_id).toBe('u'.repeat(255));
  });

  test('PATCH user_id of 255 characters is accepted, 256 is 422', async () => {
    const id = newId('patch-user-limit');
    await put(id, valid).expect(201);
    expect((await patch(id, { user_id: 'p'.repeat(255) })).status).toBe(200);
    const over = await patch(id, { user_id: 'p'.repeat(256) });
    expect(over.status).toBe(422);
    expect(Object.keys(over.body.errors)).toEqual(['user_id']);
  });

  test('an empty user_id is 422', async () => {
    const res = await put(newId('empty-user'), { ...valid, user_id: '' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['user_id']);
  });

  test.each(deviceFields)('device.%s of 255 characters is accepted, 256 is 422', async (field) => {
    const id = newId(`device-${field}`);
    const ok = await put(id, { ...valid, device: { [field]: 'd'.repeat(255) } });
    expect(ok.status).toBe(201);
    expect(ok.body.data.device[field]).toBe('d'.repeat(255));
    const over = await put(id, { ...valid, device: { [field]: 'd'.repeat(256) } });
    expect(over.status).toBe(422);
    expect(Object.keys(over.body.errors)).toEqual([`device.${field}`]);
  });

  test('a platform outside the enumeration is 422 keyed platform', async () => {
    const res = await put(newId('bad-platform'), { ...valid, platform: 'windows' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['platform']);
  });

  test('a missing platform is 422 keyed platform', async () => {
    const id = newId('no-platform');
    const res = await put(id, { provider: { identifier: 'tok' } });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['platform']);
    expect(await rowsFor(id)).toHaveLength(0);
  });

  test('a missing provider.identifier is 422 keyed provider.identifier', async () => {
    const res = await put(newId('no-identifier'), { provider: {}, platform: 'ios' });
    expect(res.status).toBe(422);
    expect(res.body.message).toEqual(expect.any(String));
    expect(Object.keys(res.body.errors)).toEqual(['provider.identifier']);
    expect(res.body.errors['provider.identifier']).toEqual([expect.any(String)]);
  });

  test('an empty provider.identifier is 422 keyed provider.identifier', async () => {
    const res = await put(newId('empty-identifier'), { provider: { identifier: '' }, platform: 'ios' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['provider.identifier']);
  });

  test('a missing provider is 422 keyed provider', async () => {
    const res = await put(newId('no-provider'), { platform: 'ios' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['provider']);
  });

  // Postgres text cannot hold U+0000: these were 500s before the domain refused them.
  test.each([
    ['provider.identifier', { provider: { identifier: 'tok\u0000en' }, platform: 'ios' }],
    ['user_id', { ...valid, user_id: 'user\u0000' }],
    ['device.model', { ...valid, device: { model: 'iPhone\u0000' } }],
  ])('a NUL character in %s is 422 keyed by that field, not a 500', async (field, body) => {
    const id = newId('nul');
    const res = await put(id, body);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
    expect(await rowsFor(id)).toHaveLength(0);
  });

  test('a NUL character in installationId is 422 keyed installationId where it would be stored, 404 where it is looked up', async () => {
    const id = 'phone\u0000one';
    for (const res of [await put(id, valid), await patch(id, { user_id: 'u' })]) {
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(['installationId']);
    }
    for (const res of [await get(id), await del(id)]) expect(res.status).toBe(404);
  });

  test('a NUL character in a PATCH user_id is 422 and changes nothing', async () => {
    const id = newId('patch-nul');
    await put(id, { ...valid, user_id: 'kept' }).expect(201);
    const res = await patch(id, { user_id: 'x\u0000' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['user_id']);
    expect((await get(id)).body.data.user_id).toBe('kept');
  });

  test('an unknown top-level field is 422 keyed by that field', async () => {
    const res = await put(newId('put-unknown'), { ...valid, nickname: 'x' });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['nickname']);
  });
});

test('25 concurrent first registrations of one installation: one 201, the rest 200, one row', async () => {
  const id = newId('race');
  const responses = await Promise.all(
    Array.from({ length: 25 }, (_, i) => put(id, { provider: { identifier: `race-${i}` }, platform: 'ios' })),
  );
  const statuses = responses.map((res) => res.status);
  expect(statuses.filter((status) => status === 201)).toHaveLength(1);
  expect(statuses.filter((status) => status === 200)).toHaveLength(24);
  expect(new Set(responses.map((res) => res.body.data.id)).size).toBe(1);
  expect(await rowsFor(id)).toHaveLength(1);
});

describe('isolation between applications', () => {
  let otherToken: string;
  let otherApplicationId: string;
  beforeAll(async () => {
    const other = await harness.newApplication('installations-other');
    otherApplicationId = other.id;
    otherToken = await other.token(['installations:write', 'installations:read']);
  });

  test("another application's installation is 404 to GET, PATCH and DELETE and stays untouched", async () => {
    const id = newId('isolated');
    const created = await put(id, { provider: { identifier: 'tok' }, platform: 'ios', user_id: 'owner' });
    for (const res of [await get(id, otherToken), await patch(id, { user_id: 'thief' }, otherToken), await del(id, otherToken)]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: 'Not Found' });
    }
    const after = await get(id);
    expect(after.status).toBe(200);
    expect(after.body).toEqual(created.body);
  });

  test('the same installationId registered by another application is a separate installation', async () => {
    const id = newId('shared-id');
    const mine = await put(id, { provider: { identifier: 'tok-a' }, platform: 'ios', user_id: 'a-user' });
    expect(mine.status).toBe(201);
    const theirs = await put(id, { provider: { identifier: 'tok-b' }, platform: 'android' }, otherToken);
    expect(theirs.status).toBe(201);
    expect(theirs.body.data.id).not.toBe(mine.body.data.id);
    expect((await get(id)).body).toEqual(mine.body);
    expect((await get(id, otherToken)).body).toEqual(theirs.body);
    const [row] = await rowsFor(id);
    expect(row.providerIdentifier).toBe('tok-a');
    const [otherRow] = await rowsFor(id, otherApplicationId);
    expect(otherRow.providerIdentifier).toBe('tok-b');
  });
});

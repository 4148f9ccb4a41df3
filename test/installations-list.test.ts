// GET /api/v1/installations?user_id=…: a user's installations, newest registration first, a page at a
// time, over HTTP against real Postgres with responses validated against the document.
import request from 'supertest';
import { invalidateInstallations } from '../src/db/sql/installations.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let application: TestApplication;
let token: string;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('installations-list');
  token = await application.token(['installations:write', 'installations:read', 'installations:list']);
});
afterAll(() => harness.close());

let counter = 0;
/** A fresh user per test, so that tests never see each other's installations. */
const newUser = (label: string) => `${label}-${Date.now()}-${++counter}`;

const register = async (installationId: string, userId: string | null, extra: object = {}, bearer = token) => {
  const res = await request(harness.app)
    .put(`/api/v1/installations/${encodeURIComponent(installationId)}`)
    .set('Authorization', `Bearer ${bearer}`)
    .send({ provider: { identifier: `token-${installationId}` }, platform: 'ios', user_id: userId, ...extra });
  expect([200, 201]).toContain(res.status);
  return res.body.data as { id: string; installation_id: string };
};

/** The list as a client builds its URL: `query` is the raw query string. */
const listRaw = (query: string, bearer = token) =>
  request(harness.app).get(`/api/v1/installations?${query}`).set('Authorization', `Bearer ${bearer}`);
const list = (userId: string, page: { limit?: number; cursor?: string } = {}, bearer = token) =>
  listRaw(new URLSearchParams({ user_id: userId, ...(page.limit ? { limit: String(page.limit) } : {}), ...(page.cursor ? { cursor: page.cursor } : {}) }).toString(), bearer);

const installationIds = (res: request.Response) => (res.body.data as { installation_id: string }[]).map((i) => i.installation_id);

/** Every page of a user's list, following next_cursor. */
async function allPages(userId: string, limit: number): Promise<{ pages: string[][]; cursors: (string | null)[] }> {
  const pages: string[][] = [];
  const cursors: (string | null)[] = [];
  let cursor: string | undefined;
  do {
    const res = await list(userId, { limit, cursor }).expect(200);
    pages.push(installationIds(res));
    cursors.push(res.body.meta.next_cursor);
    cursor = res.body.meta.next_cursor ?? undefined;
  } while (cursor && pages.length < 100);
  return { pages, cursors };
}

describe('what is listed', () => {
  test('every field of an installation is the one GET shows, and the push identifier is never returned', async () => {
    const user = newUser('fields');
    await register('fields-phone', user, {
      platform: 'android',
      permission: 'authorized',
      device: { app_version: '3.2.0', os_version: '15', model: 'Pixel 9', locale: 'de_DE', timezone: 'Europe/Berlin' },
    });
    const res = await list(user).expect(200);
    const one = await request(harness.app).get('/api/v1/installations/fields-phone').set('Authorization', `Bearer ${token}`).expect(200);
    expect(res.body).toEqual({ data: [one.body.data], meta: { next_cursor: null } });
    expect(res.body.data[0]).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      installation_id: 'fields-phone',
      platform: 'android',
      provider_identifier_type: 'fcm_token',
      status: 'active',
      permission: 'authorized',
      device: { app_version: '3.2.0', os_version: '15', model: 'Pixel 9', locale: 'de_DE', timezone: 'Europe/Berlin' },
      registered_at: expect.any(String),
      last_seen_at: expect.any(String),
      identifier_updated_at: expect.any(String),
      user_id: user,
      permission_updated_at: expect.any(String),
      invalidated_at: null,
      invalid_reason: null,
      tags: {},
    });
    expect(JSON.stringify(res.body)).not.toContain('token-fields-phone');
  });

  test('newest registration first; a replace keeps its place (its registration stays the first one)', async () => {
    const user = newUser('order');
    for (const id of ['order-a', 'order-b', 'order-c']) await register(id, user);
    await register('order-a', user, { platform: 'android', provider: { identifier: 'a-new-token' } });
    const res = await list(user).expect(200);
    expect(installationIds(res)).toEqual(['order-c', 'order-b', 'order-a']);
    const registeredAt = (res.body.data as { registered_at: string }[]).map((i) => Date.parse(i.registered_at));
    expect([...registeredAt].sort((a, b) => b - a)).toEqual(registeredAt);
  });

  test('an invalidated installation is listed with its status and reason', async () => {
    const user = newUser('invalid');
    const gone = await register('invalid-old-phone', user);
    await register('invalid-new-phone', user);
    // As the worker does when APNs answers 410 Unregistered.
    await invalidateInstallations(harness.orm.em.fork(), [
      { installationRowId: gone.id, providerIdentifier: 'token-invalid-old-phone', reason: 'Unregistered', providerTimestamp: null },
    ]);
    const res = await list(user).expect(200);
    expect(res.body.data.map((i: { installation_id: string; status: string; invalid_reason: string | null }) => [i.installation_id, i.status, i.invalid_reason])).toEqual([
      ['invalid-new-phone', 'active', null],
      ['invalid-old-phone', 'invalid', 'Unregistered'],
    ]);
    expect(res.body.data[1].invalidated_at).toEqual(expect.any(String));
  });

  test("only this user's installations: not another user's, not one without a user, not a deleted one", async () => {
    const user = newUser('mine');
    await register('mine-1', user);
    await register('mine-other-user', `${user}-2`);
    await register('mine-no-user', null);
    await register('mine-deleted', user);
    await request(harness.app).delete('/api/v1/installations/mine-deleted').set('Authorization', `Bearer ${token}`).expect(204);
    // Moved to another user by PATCH: listed under that user from then on.
    await register('mine-moved', user);
    await request(harness.app).patch('/api/v1/installations/mine-moved').set('Authorization', `Bearer ${token}`).send({ user_id: `${user}-2` }).expect(200);
    expect(installationIds(await list(user).expect(200))).toEqual(['mine-1']);
    expect(installationIds(await list(`${user}-2`).expect(200))).toEqual(['mine-moved', 'mine-other-user']);
  });

  test('a user without installations is an empty page, not a 404', async () => {
    const res = await list(newUser('nobody')).expect(200);
    expect(res.body).toEqual({ data: [], meta: { next_cursor: null } });
  });

  test("another application's installations are never listed, whatever the user id", async () => {
    const user = newUser('shared');
    await register('shared-ours', user);
    const other = await harness.newApplication('installations-list-other');
    const otherToken = await other.token(['*']);
    await register('shared-theirs', user, {}, otherToken);
    await register('shared-ours', user, {}, otherToken);
    expect(installationIds(await list(user).expect(200))).toEqual(['shared-ours']);
    const theirs = await list(user, {}, otherToken).expect(200);
    expect(installationIds(theirs)).toEqual(['shared-ours', 'shared-theirs']);
    const ourRow = (await list(user).expect(200)).body.data[0].id;
    expect(theirs.body.data.map((i: { id: string }) => i.id)).not.toContain(ourRow);
  });

  // Percent-encoded the two ways clients do it: URLSearchParams (form encoding, a space is `+`)
  // and encodeURIComponent (a space is %20).
  const userIds = [
    'plus+sign',
    'plus sign',
    'a&b=c;d',
    '100% sure %2B',
    '  two spaces  ',
    ' ',
    'ünïcødé 用户 🎉',
    '?#/\\[]@!$\'()*,',
    '"quoted" <tag> `tick`',
    'tab\there\nnewline',
    'u'.repeat(255),
  ];

  test.each(userIds)('the user id %j is found exactly, however it is encoded', async (userId) => {
    const installationId = `chars-${++counter}`;
    await register(installationId, userId);
    const form = await listRaw(new URLSearchParams({ user_id: userId }).toString()).expect(200);
    const component = await listRaw(`user_id=${encodeURIComponent(userId)}`).expect(200);
    for (const res of [form, component]) {
      expect(res.body.data.map((i: { installation_id: string; user_id: string }) => [i.installation_id, i.user_id])).toEqual([[installationId, userId]]);
    }
  });

  test('a `+` sent as it is means a space, as in an HTML form: a user id with a `+` is sent as %2B', async () => {
    const user = newUser('form');
    await register('form-space', `${user} x`);
    await register('form-plus', `${user}+x`);
    expect(installationIds(await listRaw(`user_id=${user}+x`).expect(200))).toEqual(['form-space']);
    expect(installationIds(await listRaw(`user_id=${user}%2Bx`).expect(200))).toEqual(['form-plus']);
  });
});

describe('pages', () => {
  test('7 installations at limit 3: pages of 3, 3 and 1, newest first, next_cursor null on the last', async () => {
    const user = newUser('pages');
    const ids = Array.from({ length: 7 }, (_, i) => `pages-${counter}-${i}`);
    for (const id of ids) await register(id, user);
    const { pages, cursors } = await allPages(user, 3);
    expect(pages).toEqual([ids.slice(4).reverse(), ids.slice(1, 4).reverse(), [ids[0]]]);
    expect(cursors[0]).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(cursors[2]).toBeNull();
  });

  test('exactly a page of installations: one page, next_cursor null', async () => {
    const user = newUser('exact');
    for (let i = 0; i < 3; i++) await register(`exact-${counter}-${i}`, user);
    const { pages, cursors } = await allPages(user, 3);
    expect(pages.map((page) => page.length)).toEqual([3]);
    expect(cursors).toEqual([null]);
  });

  test('the default page is 25 and the limit goes up to 100', async () => {
    const user = newUser('default');
    await Promise.all(Array.from({ length: 30 }, (_, i) => register(`default-${counter}-${i}`, user)));
    const first = await list(user).expect(200);
    expect(first.body.data).toHaveLength(25);
    expect(first.body.meta.next_cursor).not.toBeNull();
    const hundred = await list(user, { limit: 100 }).expect(200);
    expect(hundred.body.data).toHaveLength(30);
    expect(hundred.body.meta.next_cursor).toBeNull();
  });

  test('registrations and deletions between two pages neither repeat nor skip an installation of the next page', async () => {
    const user = newUser('stable');
    const ids = Array.from({ length: 6 }, (_, i) => `stable-${counter}-${i}`);
    for (const id of ids) await register(id, user);
    const first = await list(user, { limit: 2 }).expect(200);
    expect(installationIds(first)).toEqual([ids[5], ids[4]]);

    // Meanwhile: two new devices, one replaced, and one of the first page deleted.
    await register(`stable-${counter}-new-1`, user);
    await register(`stable-${counter}-new-2`, user);
    await register(ids[3], user, { platform: 'android' });
    await request(harness.app).delete(`/api/v1/installations/${ids[5]}`).set('Authorization', `Bearer ${token}`).expect(204);

    const second = await list(user, { limit: 2, cursor: first.body.meta.next_cursor }).expect(200);
    expect(installationIds(second)).toEqual([ids[3], ids[2]]);
    const third = await list(user, { limit: 2, cursor: second.body.meta.next_cursor }).expect(200);
    expect(installationIds(third)).toEqual([ids[1], ids[0]]);
    expect(third.body.meta.next_cursor).toBeNull();
    // The new ones are where a new first page starts.
    expect(installationIds(await list(user, { limit: 2 }).expect(200))).toEqual([`stable-${counter}-new-2`, `stable-${counter}-new-1`]);
  });

  test('any cursor of the right form is a position: one past every installation is an empty page', async () => {
    const user = newUser('cursor');
    await register(`cursor-${counter}`, user);
    const res = await list(user, { cursor: 'AAAAAAAAAAAAAAAAAAAAAA' }).expect(200);
    expect(res.body).toEqual({ data: [], meta: { next_cursor: null } });
  });
});

describe('refused', () => {
  const refused = (field: string, message: string) => ({ message, errors: { [field]: [message] } });

  test.each([
    ['no user_id', 'limit=5', refused('user_id', 'The user_id field is required.')],
    ['an empty user_id', 'user_id=', refused('user_id', 'The user_id field must not be empty.')],
    ['a user_id of 256 characters', `user_id=${'u'.repeat(256)}`, refused('user_id', 'The user_id field must not be longer than 255 characters.')],
    ['a NUL in user_id', 'user_id=a%00b', refused('user_id', 'The user_id field must not contain a NUL character (U+0000).')],
    ['limit 0', 'user_id=u&limit=0', refused('limit', 'The limit field must be at least 1.')],
    ['limit 101', 'user_id=u&limit=101', refused('limit', 'The limit field must be at most 100.')],
    ['an empty limit', 'user_id=u&limit=', refused('limit', 'The limit field must not be empty.')],
    ['limit not a number', 'user_id=u&limit=ten', refused('limit', 'The limit field must be an integer.')],
    ['a cursor of another form', 'user_id=u&cursor=0', refused('cursor', 'The cursor field must be a meta.next_cursor of an earlier page.')],
    ['an unknown parameter', 'user_id=u&userId=u', refused('userId', 'The userId parameter is not allowed.')],
  ])('%s is 422', async (_name, query, body) => {
    const res = await listRaw(query);
    expect(res.status).toBe(422);
    expect(res.body).toEqual(body);
  });

  test('user_id given twice is 422, never a list of either user', async () => {
    const res = await listRaw('user_id=a&user_id=b');
    expect(res.status).toBe(422);
    expect(res.body).toEqual(refused('user_id', 'The user_id field must be a string.'));
  });

  test('without a token 401; without installations:list 403, even with installations:read and every other ability', async () => {
    const res = await request(harness.app).get('/api/v1/installations?user_id=u');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ message: 'Unauthenticated.' });
    const appToken = await application.token(['installations:write', 'installations:read', 'events:write']);
    const everyOther = await application.token(['installations:write', 'installations:read', 'events:write', 'notifications:send', 'notifications:read']);
    for (const bearer of [appToken, everyOther]) {
      const forbidden = await listRaw('user_id=u', bearer);
      expect(forbidden.status).toBe(403);
      expect(forbidden.body).toEqual({ message: 'This action is unauthorized.' });
      expect(forbidden.headers['www-authenticate']).toBe('Bearer realm="herald", error="insufficient_scope", scope="installations:list"');
    }
    expect((await listRaw('user_id=u', await application.token(['installations:list']))).status).toBe(200);
  });
});

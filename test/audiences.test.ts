// Tags, audience sends, segments and audience counts over HTTP against real Postgres, answers
// validated against the document: PUT/PATCH tag semantics and every 422, the abilities a body makes
// necessary, the exclusivity of user_ids / audience / segment, a segment copied when sent, and
// another application's installations and segments never reached.
import request from 'supertest';
import { startHarness, type Harness } from './support/harness.ts';

let harness: Harness;
let token: string;
let otherToken: string;

beforeAll(async () => {
  harness = await startHarness();
  token = await (await harness.newApplication('audiences-http')).token(['*']);
  otherToken = await (await harness.newApplication('audiences-other')).token(['*']);
});
afterAll(() => harness.close());

let counter = 0;
const newId = (label: string) => `${label}-${Date.now()}-${++counter}`;
const call = (method: 'get' | 'put' | 'patch' | 'post' | 'delete', path: string, body?: unknown, bearer = token) => {
  const req = request(harness.app)[method](path).set('Authorization', `Bearer ${bearer}`);
  return body === undefined ? req : req.send(body as object);
};
const installation = (id: string) => `/api/v1/installations/${encodeURIComponent(id)}`;
const register = (id: string, extra: object = {}, bearer = token) =>
  call('put', installation(id), { platform: 'android', provider: { identifier: `token-${id}` }, ...extra }, bearer);

describe('tags on installations', () => {
  test('every answer carries tags, {} when none', async () => {
    const id = newId('none');
    expect((await register(id)).body.data.tags).toEqual({});
    expect((await call('get', installation(id))).body.data.tags).toEqual({});
  });

  test('PUT with tags replaces them; PUT without keeps them; tags: {} clears them', async () => {
    const id = newId('put');
    expect((await register(id, { tags: { plan: 'pro', team: 'red' } })).body.data.tags).toEqual({ plan: 'pro', team: 'red' });
    expect((await register(id, { tags: { plan: 'free' } })).body.data.tags).toEqual({ plan: 'free' });
    const relaunch = await register(id, { user_id: 'u-1' });
    expect(relaunch.status).toBe(200);
    expect(relaunch.body.data.tags).toEqual({ plan: 'free' });
    expect((await register(id, { tags: {} })).body.data.tags).toEqual({});
    expect((await call('get', installation(id))).body.data.tags).toEqual({});
  });

  test('PATCH merges: a string sets a key, null removes it, other keys are kept', async () => {
    const id = newId('patch');
    await register(id, { tags: { plan: 'pro', team: 'red', beta: 'yes' } });
    const patched = await call('patch', installation(id), { tags: { team: 'blue', beta: null, country: 'de', absent: null } });
    expect(patched.status).toBe(200);
    expect(patched.body.data.tags).toEqual({ plan: 'pro', team: 'blue', country: 'de' });
    // A PATCH without tags keeps them.
    expect((await call('patch', installation(id), { user_id: 'u-2' })).body.data.tags).toEqual({ plan: 'pro', team: 'blue', country: 'de' });
  });

  test('keys and values are case-sensitive', async () => {
    const id = newId('case');
    expect((await register(id, { tags: { Plan: 'Pro', plan: 'pro' } })).body.data.tags).toEqual({ Plan: 'Pro', plan: 'pro' });
  });

  test.each<[string, unknown, string]>([
    ['a bad key', { 'bad key': 'x' }, 'tags.bad key'],
    ['a key over 64 characters', { ['k'.repeat(65)]: 'x' }, `tags.${'k'.repeat(65)}`],
    ['a value over 255 characters', { plan: 'x'.repeat(256) }, 'tags.plan'],
    ['a number value', { plan: 5 }, 'tags.plan'],
    ['a null value in a PUT', { plan: null }, 'tags.plan'],
    ['an object value', { plan: { a: 'b' } }, 'tags.plan'],
    ['more than 64 tags', Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])), 'tags'],
    ['not an object', ['plan'], 'tags'],
  ])('PUT with %s is 422 naming it', async (_, tags, field) => {
    const id = newId('bad-put');
    const res = await register(id, { tags });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
    expect((await call('get', installation(id))).status).toBe(404);
  });

  test.each<[string, unknown, string]>([
    ['a bad key', { 'bad/key': 'x' }, 'tags.bad/key'],
    ['a value over 255 characters', { plan: 'x'.repeat(256) }, 'tags.plan'],
    ['a boolean value', { plan: true }, 'tags.plan'],
    ['more than 64 keys in the patch', Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, null])), 'tags'],
  ])('PATCH with %s is 422 naming it', async (_, tags, field) => {
    const id = newId('bad-patch');
    await register(id, { tags: { plan: 'pro' } });
    const res = await call('patch', installation(id), { tags });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
    expect((await call('get', installation(id))).body.data.tags).toEqual({ plan: 'pro' });
  });

  test('a PATCH whose merge would hold more than 64 tags is 422 and writes nothing', async () => {
    const id = newId('merge-limit');
    await register(id, { tags: Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`k${i}`, 'v'])) });
    const res = await call('patch', installation(id), { user_id: 'someone', tags: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`new${i}`, 'v'])) });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['tags']);
    const after = (await call('get', installation(id))).body.data;
    expect(Object.keys(after.tags)).toHaveLength(60);
    expect(after.user_id).toBeNull();
    // Replacing keys that exist, or removing some first, fits.
    const fits = await call('patch', installation(id), { tags: { k0: null, k1: null, k2: null, k3: null, new0: 'v', new1: 'v', new2: 'v', new3: 'v', k4: 'w' } });
    expect(fits.status).toBe(200);
    expect(Object.keys(fits.body.data.tags)).toHaveLength(60);
  });

  test('a PATCH of tags on an unknown installation is 404', async () => {
    expect((await call('patch', installation(newId('unknown')), { tags: { plan: 'pro' } })).status).toBe(404);
  });

  test('writing tags needs installations:tag; without tags, a PUT or PATCH does not', async () => {
    const app = await harness.newApplication('tag-ability');
    const appToken = await app.token(['installations:write', 'installations:read']);
    const id = newId('ability');
    const put = await register(id, { tags: { plan: 'pro' } }, appToken);
    expect(put.status).toBe(403);
    expect(put.headers['www-authenticate']).toContain('scope="installations:tag"');
    expect((await register(id, {}, appToken)).status).toBe(201);
    expect((await call('patch', installation(id), { tags: { plan: 'pro' } }, appToken)).status).toBe(403);
    expect((await call('patch', installation(id), { user_id: 'u' }, appToken)).status).toBe(200);
    const tagger = await app.token(['installations:write', 'installations:tag']);
    expect((await call('patch', installation(id), { tags: { plan: 'pro' } }, tagger)).body.data.tags).toEqual({ plan: 'pro' });
    // The device re-registering without tags keeps what the backend set.
    expect((await register(id, {}, appToken)).body.data.tags).toEqual({ plan: 'pro' });
  });
});

describe('who a send reaches', () => {
  const send = (recipients: unknown, bearer = token) => call('post', '/api/v1/notifications', { recipients, notification: { title: 'Hi' } }, bearer);

  test('a request shaped like the spec\'s is answered as before: user_ids required, 422 naming recipients.user_ids', async () => {
    for (const recipients of [{}, { user_ids: [] }, { user_ids: 'u' }]) {
      const res = await send(recipients);
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(['recipients.user_ids']);
    }
    const sent = await send({ user_ids: ['a', 'b'] });
    expect(sent.status).toBe(202);
    expect(sent.body.data.target_users).toBe(2);
    expect(sent.body.data).not.toHaveProperty('audience');
    expect(sent.body.data).not.toHaveProperty('segment');
  });

  test.each<[string, object]>([
    ['user_ids and audience', { user_ids: ['a'], audience: { all: true } }],
    ['user_ids and segment', { user_ids: ['a'], segment: 'x' }],
    ['audience and segment', { audience: { all: true }, segment: 'x' }],
    ['all three', { user_ids: ['a'], audience: { all: true }, segment: 'x' }],
    ['user_ids and installation_ids', { user_ids: ['a'], installation_ids: ['i'] }],
    ['audience and installation_ids', { audience: { all: true }, installation_ids: ['i'] }],
    ['segment and installation_ids', { segment: 'x', installation_ids: ['i'] }],
  ])('%s together is 422 naming recipients', async (_, recipients) => {
    const res = await send(recipients);
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual({ recipients: ['The recipients field must have exactly one of user_ids, audience, segment or installation_ids.'] });
  });

  test.each<[string, object, string[]]>([
    ['an empty audience', {}, ['recipients.audience']],
    ['all: false alone', { all: false }, ['recipients.audience.all']],
    ['empty condition lists', { platforms: [], tags: [] }, ['recipients.audience.platforms', 'recipients.audience.tags']],
    ['all: true with a condition', { all: true, platforms: ['ios'] }, ['recipients.audience']],
    ['eq without value', { tags: [{ key: 'plan', op: 'eq' }] }, ['recipients.audience.tags.0.value']],
    ['ne with values', { tags: [{ key: 'plan', op: 'ne', value: 'a', values: ['b'] }] }, ['recipients.audience.tags.0.values']],
    ['in without values', { tags: [{ key: 'plan', op: 'in' }] }, ['recipients.audience.tags.0.values']],
    ['in with value', { tags: [{ key: 'plan', op: 'in', values: ['a'], value: 'a' }] }, ['recipients.audience.tags.0.value']],
    ['exists with a value', { tags: [{ key: 'plan', op: 'exists', value: 'a' }] }, ['recipients.audience.tags.0.value']],
    ['not_exists with values', { tags: [{ key: 'plan', op: 'not_exists', values: ['a'] }] }, ['recipients.audience.tags.0.values']],
    ['an unknown op', { tags: [{ key: 'plan', op: 'like', value: 'a' }] }, ['recipients.audience.tags.0.op']],
    ['a bad key', { tags: [{ key: 'a b', op: 'exists' }] }, ['recipients.audience.tags.0.key']],
    ['more than 20 tag conditions', { tags: Array.from({ length: 21 }, () => ({ key: 'k', op: 'exists' })) }, ['recipients.audience.tags']],
    ['more than 100 values', { tags: [{ key: 'k', op: 'in', values: Array.from({ length: 101 }, (_, i) => `v${i}`) }] }, ['recipients.audience.tags.0.values']],
    ['a value over 255 characters', { tags: [{ key: 'k', op: 'eq', value: 'x'.repeat(256) }] }, ['recipients.audience.tags.0.value']],
    ['an unknown platform', { platforms: ['windows'] }, ['recipients.audience.platforms.0']],
    ['a malformed locale', { locales: ['not a tag'] }, ['recipients.audience.locales.0']],
    ['active_within_days of 0', { active_within_days: 0 }, ['recipients.audience.active_within_days']],
    ['an unknown condition', { country: 'de' }, ['recipients.audience.country']],
  ])('an audience with %s is 422 naming it', async (_, audience, fields) => {
    const res = await send({ audience });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(fields.sort());
  });

  test('a send to an audience or a segment needs notifications:broadcast; a user_ids send does not', async () => {
    const app = await harness.newApplication('broadcast-ability');
    const sender = await app.token(['notifications:send']);
    for (const recipients of [{ audience: { all: true } }, { segment: 'anything' }]) {
      const res = await send(recipients, sender);
      expect(res.status).toBe(403);
      expect(res.headers['www-authenticate']).toContain('scope="notifications:broadcast"');
    }
    expect((await send({ user_ids: ['a'] }, sender)).status).toBe(202);
    const broadcaster = await app.token(['notifications:send', 'notifications:broadcast']);
    expect((await send({ audience: { all: true } }, broadcaster)).status).toBe(202);
  });

  test('a send to an audience answers 202 with target_users 0, its audience and a progress not counted yet', async () => {
    const audience = { platforms: ['android'], tags: [{ key: 'plan', op: 'in', values: ['pro', 'team'] }], active_within_days: 30 };
    const res = await send({ audience });
    expect(res.status).toBe(202);
    const notCounted = { installations: null, walked: 0, walk_ended_at: null, waves: [] };
    expect(res.body.data).toMatchObject({ target_users: 0, audience, status: 'queued', progress: notCounted });
    expect(res.body.data).not.toHaveProperty('segment');
    const read = await call('get', `/api/v1/notifications/${res.body.data.id}`);
    expect(read.body.data).toMatchObject({ target_users: 0, audience, progress: notCounted });
    const listed = await call('get', '/api/v1/notifications?limit=1');
    expect(listed.body.data[0]).toMatchObject({ id: res.body.data.id, progress: notCounted });
  });

  test('a send to user ids has no progress: its fanout is one step', async () => {
    const res = await send({ user_ids: [newId('user')] });
    expect(res.status).toBe(202);
    expect(res.body.data).not.toHaveProperty('progress');
  });

  test("a send to a segment keeps the segment's definition as it was when sent", async () => {
    const name = newId('seg');
    await call('put', `/api/v1/segments/${name}`, { audience: { platforms: ['ios'] } });
    const res = await send({ segment: name });
    expect(res.status).toBe(202);
    expect(res.body.data).toMatchObject({ target_users: 0, audience: { platforms: ['ios'] }, segment: name });
    await call('put', `/api/v1/segments/${name}`, { audience: { platforms: ['android'] } });
    await call('delete', `/api/v1/segments/${name}`);
    const read = await call('get', `/api/v1/notifications/${res.body.data.id}`);
    expect(read.body.data).toMatchObject({ audience: { platforms: ['ios'] }, segment: name });
  });

  test("an unknown segment, or another application's, is 422 naming recipients.segment", async () => {
    const name = newId('theirs');
    await call('put', `/api/v1/segments/${name}`, { audience: { all: true } }, otherToken);
    for (const segment of [newId('unknown'), name]) {
      const res = await send({ segment });
      expect(res.status).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(['recipients.segment']);
    }
  });
});

describe('segments', () => {
  const segment = (name: string) => `/api/v1/segments/${encodeURIComponent(name)}`;

  test('PUT creates (201) then replaces (200); GET reads it; the list is by name; DELETE removes it', async () => {
    const app = await harness.newApplication('segments-crud');
    const own = await app.token(['segments:write', 'notifications:read']);
    const created = await call('put', segment('pro.users'), { audience: { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] } }, own);
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: 'pro.users', audience: { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] } });
    const replaced = await call('put', segment('pro.users'), { audience: { all: true } }, own);
    expect(replaced.status).toBe(200);
    expect(replaced.body.data.audience).toEqual({ all: true });
    expect(replaced.body.data.created_at).toBe(created.body.data.created_at);
    await call('put', segment('Android:all'), { audience: { platforms: ['android'] } }, own);
    expect((await call('get', segment('pro.users'), undefined, own)).body.data.audience).toEqual({ all: true });
    const list = await call('get', '/api/v1/segments', undefined, own);
    expect(list.body.data.map((s: { name: string }) => s.name)).toEqual(['Android:all', 'pro.users']);
    expect((await call('delete', segment('pro.users'), undefined, own)).status).toBe(204);
    expect((await call('get', segment('pro.users'), undefined, own)).status).toBe(404);
    expect((await call('delete', segment('pro.users'), undefined, own)).status).toBe(404);
  });

  test("another application's segments are never seen", async () => {
    const name = newId('private');
    await call('put', segment(name), { audience: { all: true } }, otherToken);
    expect((await call('get', segment(name))).status).toBe(404);
    expect((await call('delete', segment(name))).status).toBe(404);
    expect((await call('get', '/api/v1/segments')).body.data.map((s: { name: string }) => s.name)).not.toContain(name);
  });

  test('a bad name or a bad audience is 422', async () => {
    const badName = await call('put', segment('a b'), { audience: { all: true } });
    expect(badName.status).toBe(422);
    expect(Object.keys(badName.body.errors)).toEqual(['name']);
    const empty = await call('put', segment(newId('empty')), { audience: {} });
    expect(empty.status).toBe(422);
    expect(Object.keys(empty.body.errors)).toEqual(['audience']);
    const missing = await call('put', segment(newId('missing')), {});
    expect(Object.keys(missing.body.errors)).toEqual(['audience']);
  });

  test('managing segments needs segments:write, reading them notifications:read', async () => {
    const app = await harness.newApplication('segments-abilities');
    const reader = await app.token(['notifications:read']);
    const writer = await app.token(['segments:write']);
    expect((await call('put', segment('s'), { audience: { all: true } }, reader)).status).toBe(403);
    expect((await call('put', segment('s'), { audience: { all: true } }, writer)).status).toBe(201);
    expect((await call('get', segment('s'), undefined, writer)).status).toBe(403);
    expect((await call('get', '/api/v1/segments', undefined, writer)).status).toBe(403);
    expect((await call('post', '/api/v1/audiences/count', { segment: 's' }, writer)).status).toBe(403);
    expect((await call('get', segment('s'), undefined, reader)).status).toBe(200);
    expect((await call('post', '/api/v1/audiences/count', { segment: 's' }, reader)).status).toBe(200);
    expect((await call('delete', segment('s'), undefined, reader)).status).toBe(403);
  });
});

describe('POST /api/v1/audiences/count', () => {
  test("counts the application's eligible installations and users, never another application's", async () => {
    const app = await harness.newApplication('count-http');
    const own = await app.token(['*']);
    await register(newId('c'), { user_id: 'ann', tags: { plan: 'pro' } }, own);
    await register(newId('c'), { user_id: 'ann', platform: 'ios', permission: 'authorized', tags: { plan: 'pro' } }, own);
    await register(newId('c'), { user_id: 'bob', tags: { plan: 'pro' }, permission: 'denied' }, own);
    await register(newId('c'), { tags: { plan: 'free' } }, own);
    await register(newId('c'), { user_id: 'ann', tags: { plan: 'pro' } }, otherToken);
    const count = (body: object) => call('post', '/api/v1/audiences/count', body, own);
    expect((await count({ audience: { all: true } })).body).toEqual({ data: { installations: 3, users: 2 } });
    expect((await count({ audience: { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] } })).body).toEqual({ data: { installations: 2, users: 1 } });
    await call('put', '/api/v1/segments/android', { audience: { platforms: ['android'] } }, own);
    expect((await count({ segment: 'android' })).body).toEqual({ data: { installations: 2, users: 2 } });
  });

  test.each<[string, string, object]>([
    ['neither audience nor segment', 'body', {}],
    ['both', 'body', { audience: { all: true }, segment: 's' }],
    ['an empty audience', 'audience', { audience: {} }],
    ['a bad segment name', 'segment', { segment: 'a b' }],
  ])('%s is 422 naming %s', async (_, field, body) => {
    const res = await call('post', '/api/v1/audiences/count', body);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual([field]);
  });

  test("an unknown segment, or another application's, is 404, as an unknown resource a body names is elsewhere", async () => {
    const name = newId('their-count');
    await call('put', `/api/v1/segments/${name}`, { audience: { all: true } }, otherToken);
    for (const segment of [newId('no-such-segment'), name]) {
      const res = await call('post', '/api/v1/audiences/count', { segment });
      expect([res.status, res.body]).toEqual([404, { message: 'Not Found' }]);
    }
  });
});

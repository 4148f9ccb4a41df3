// Bearer authentication and abilities on every operation of the document: what is 401, what is
// 403, what gets through, and how tokens are kept.
import request from 'supertest';
import { randomBytes, randomUUID } from 'node:crypto';
import { revokeToken, tokenCacheMs } from '../src/domain/applications.ts';
import { setSendPolicy } from '../src/domain/rate-limits.ts';
import { ApiToken } from '../src/db/entities.ts';
import { abilities, clientAbilities, parseToken } from '../src/domain/tokens.ts';
import { insertDelivery } from './support/deliveries.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let application: TestApplication;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('auth');
});
afterAll(() => harness.close());

type Method = 'put' | 'patch' | 'get' | 'delete' | 'post';
/** `ability` null: any valid token may call it. */
type Operation = { name: string; method: Method; path: string; ability: string | null; body?: object };

const installationPath = '/api/v1/installations/auth-phone';
const operations: Operation[] = [
  {
    name: 'registerInstallation',
    method: 'put',
    path: installationPath,
    ability: 'installations:write',
    body: { provider: { identifier: 'auth-token' }, platform: 'ios' },
  },
  {
    name: 'updateInstallation',
    method: 'patch',
    path: installationPath,
    ability: 'installations:write',
    body: { user_id: 'auth-user' },
  },
  { name: 'getInstallation', method: 'get', path: installationPath, ability: 'installations:read' },
  { name: 'listInstallations', method: 'get', path: '/api/v1/installations?user_id=auth-user', ability: 'installations:list' },
  { name: 'deleteInstallation', method: 'delete', path: installationPath, ability: 'installations:write' },
  {
    name: 'sendNotification',
    method: 'post',
    path: '/api/v1/notifications',
    ability: 'notifications:send',
    body: { recipients: { user_ids: ['auth-user'] }, notification: { title: 'Hello' } },
  },
  { name: 'listNotifications', method: 'get', path: '/api/v1/notifications', ability: 'notifications:read' },
  {
    name: 'getNotification',
    method: 'get',
    path: '/api/v1/notifications/0192f6c1-0000-7000-8000-000000000000',
    ability: 'notifications:read',
  },
  {
    name: 'cancelNotification',
    method: 'post',
    path: '/api/v1/notifications/0192f6c1-0000-7000-8000-000000000000/cancel',
    ability: 'notifications:send',
  },
  {
    name: 'listDeliveries',
    method: 'get',
    path: '/api/v1/notifications/0192f6c1-0000-7000-8000-000000000000/deliveries',
    ability: 'notifications:read',
  },
  { name: 'listUserDeliveries', method: 'get', path: '/api/v1/deliveries?user_id=auth-user', ability: 'notifications:read' },
  { name: 'listWebhooks', method: 'get', path: '/api/v1/webhooks', ability: 'notifications:read' },
  {
    name: 'listWebhookDeliveries',
    method: 'get',
    path: '/api/v1/webhooks/0192f6c1-0000-7000-8000-000000000000/deliveries',
    ability: 'notifications:read',
  },
  {
    name: 'getNotificationBreakdown',
    method: 'get',
    path: '/api/v1/notifications/0192f6c1-0000-7000-8000-000000000000/breakdown',
    ability: 'notifications:read',
  },
  {
    name: 'reportEvent',
    method: 'post',
    path: '/api/v1/events',
    ability: 'events:write',
    body: {
      event_id: randomUUID(),
      delivery_id: randomUUID(),
      installation_id: 'auth-phone',
      type: 'opened',
      occurred_at: new Date().toISOString(),
    },
  },
  { name: 'getApp', method: 'get', path: '/api/v1/app', ability: null },
  { name: 'listSegments', method: 'get', path: '/api/v1/segments', ability: 'notifications:read' },
  { name: 'putSegment', method: 'put', path: '/api/v1/segments/auth-segment', ability: 'segments:write', body: { audience: { all: true } } },
  { name: 'getSegment', method: 'get', path: '/api/v1/segments/auth-segment', ability: 'notifications:read' },
  { name: 'deleteSegment', method: 'delete', path: '/api/v1/segments/auth-segment', ability: 'segments:write' },
  { name: 'countAudience', method: 'post', path: '/api/v1/audiences/count', ability: 'notifications:read', body: { audience: { all: true } } },
  { name: 'listTags', method: 'get', path: '/api/v1/tags', ability: 'notifications:read' },
  { name: 'hourlyStats', method: 'get', path: '/api/v1/stats/hourly', ability: 'notifications:read' },
];

/** Exactly the operation's ability, or for one that needs none, a token with a single unrelated one. */
const exactly = (operation: Operation) => [operation.ability ?? 'events:write'];

function call(operation: Operation, authorization?: string) {
  let req = request(harness.app)[operation.method](operation.path);
  if (authorization !== undefined) req = req.set('Authorization', authorization);
  return operation.body ? req.send(operation.body) : req;
}

const unauthenticated = { message: 'Unauthenticated.' };
const forbidden = { message: 'This action is unauthorized.' };
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

async function tokenId(plaintext: string): Promise<string> {
  const parts = parseToken(plaintext);
  if (!parts) throw new Error('the harness issued a malformed token');
  const row = await harness.orm.em.fork().findOneOrFail(ApiToken, { publicId: parts.publicId });
  return row.id;
}

test('the table covers every operation of the document that requires a token', async () => {
  const res = await request(harness.app).get('/openapi.json');
  const documented: string[] = [];
  for (const item of Object.values(res.body.paths as Record<string, Record<string, { operationId?: string; security?: unknown[] }>>)) {
    for (const op of Object.values(item)) {
      if (op && typeof op === 'object' && op.operationId && (op.security?.length ?? 1) > 0) documented.push(op.operationId);
    }
  }
  expect(documented.sort()).toEqual(operations.map((op) => op.name).sort());
});

describe.each(operations)('$name ($method $path) requires a token with $ability', (operation) => {
  test('no Authorization header is 401 Unauthenticated.', async () => {
    const res = await call(operation);
    expect(res.status).toBe(401);
    expect(res.body).toEqual(unauthenticated);
  });

  test('a Basic credential is 401', async () => {
    const res = await call(operation, 'Basic xyz');
    expect(res.status).toBe(401);
    expect(res.body).toEqual(unauthenticated);
  });

  test('a Basic credential carrying a valid token is 401', async () => {
    const token = await application.token();
    const res = await call(operation, `Basic ${token}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual(unauthenticated);
  });

  test('a garbage bearer token is 401', async () => {
    const res = await call(operation, 'Bearer garbage');
    expect(res.status).toBe(401);
    expect(res.body).toEqual(unauthenticated);
  });

  test('an empty bearer token is 401', async () => {
    const res = await call(operation, 'Bearer ');
    expect(res.status).toBe(401);
    expect(res.body).toEqual(unauthenticated);
  });

  test('a well-formed but unknown token is 401', async () => {
    const res = await call(operation, `Bearer hrld_${hex(8)}_${hex(32)}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual(unauthenticated);
  });

  test('the right public id with a wrong secret is 401', async () => {
    const token = await application.token();
    const parts = parseToken(token)!;
    const res = await call(operation, `Bearer hrld_${parts.publicId}_${hex(32)}`);
    expect(res.status).toBe(401);
    expect(res.body).toEqual(unauthenticated);
  });

  test('a revoked token is 401 on the very next request', async () => {
    const token = await application.token(exactly(operation));
    const before = await call(operation, `Bearer ${token}`);
    expect([401, 403]).not.toContain(before.status);
    expect(await revokeToken(harness.orm.em.fork(), await tokenId(token))).toBe(true);
    const after = await call(operation, `Bearer ${token}`);
    expect(after.status).toBe(401);
    expect(after.body).toEqual(unauthenticated);
  });

  if (operation.ability !== null) {
    const ability = operation.ability;
    test('a token with every ability but this one is 403 This action is unauthorized.', async () => {
      const token = await application.token(abilities.filter((held) => held !== ability));
      const res = await call(operation, `Bearer ${token}`);
      expect(res.status).toBe(403);
      expect(res.body).toEqual(forbidden);
    });
  } else {
    test.each(abilities)('a token with only %s gets through', async (held) => {
      const res = await call(operation, `Bearer ${await application.token([held])}`);
      expect(res.status).toBe(200);
    });
  }

  test('a token with exactly this ability gets through', async () => {
    const token = await application.token(exactly(operation));
    const res = await call(operation, `Bearer ${token}`);
    expect([401, 403]).not.toContain(res.status);
    expect(res.status).toBeLessThan(500);
  });

  test('a token with the * ability gets through', async () => {
    const token = await application.token(['*']);
    const res = await call(operation, `Bearer ${token}`);
    expect([401, 403]).not.toContain(res.status);
    expect(res.status).toBeLessThan(500);
  });
});

test('the bearer scheme name is case-insensitive', async () => {
  const token = await application.token(['installations:read']);
  const res = await request(harness.app).get(installationPath).set('Authorization', `bearer ${token}`);
  expect([401, 403]).not.toContain(res.status);
});

test("a client token can register, read and report but cannot send, read notifications or list a user's installations", async () => {
  const token = await application.token([...clientAbilities]);
  const send = operations.find((op) => op.name === 'sendNotification')!;
  const res = await call(send, `Bearer ${token}`);
  expect(res.status).toBe(403);
  expect(res.body).toEqual(forbidden);
  const list = await call(operations.find((op) => op.name === 'listNotifications')!, `Bearer ${token}`);
  expect(list.status).toBe(403);
  // With it, anyone who took the token out of the app could find other users' installation ids.
  const installations = await call(operations.find((op) => op.name === 'listInstallations')!, `Bearer ${token}`);
  expect(installations.status).toBe(403);
  const put = await call(operations.find((op) => op.name === 'registerInstallation')!, `Bearer ${token}`);
  expect([200, 201]).toContain(put.status);
});

test('revoking one token leaves the application’s other tokens working', async () => {
  const revoked = await application.token(['installations:read']);
  const kept = await application.token(['installations:read']);
  await revokeToken(harness.orm.em.fork(), await tokenId(revoked));
  const get = operations.find((op) => op.name === 'getInstallation')!;
  expect((await call(get, `Bearer ${revoked}`)).status).toBe(401);
  expect([401, 403]).not.toContain((await call(get, `Bearer ${kept}`)).status);
});

test("a token's last use is written at most once a minute, not on every request", async () => {
  const token = await application.token(['notifications:read']);
  const id = await tokenId(token);
  // Raw: the exact stored value, microseconds included.
  const lastUsed = async () =>
    (await harness.orm.em.fork().execute<{ last_used_at: string | null }[]>('select last_used_at::text from api_tokens where id = ?', [id]))[0]
      .last_used_at;
  const use = async () => expect((await request(harness.app).get('/api/v1/notifications').set('Authorization', `Bearer ${token}`)).status).toBe(200);

  expect(await lastUsed()).toBeNull();
  await use();
  const first = await lastUsed();
  expect(first).not.toBeNull();
  await use();
  await use();
  expect(await lastUsed()).toBe(first);

  // A minute later (backdated, not slept), the next request writes it again.
  await harness.orm.em.fork().execute("update api_tokens set last_used_at = last_used_at - interval '61 seconds' where id = ?", [id]);
  const backdated = await lastUsed();
  await use();
  const again = await lastUsed();
  expect(new Date(again!).getTime()).toBeGreaterThan(new Date(backdated!).getTime() + 60_000);
  expect(new Date(again!).getTime()).toBeGreaterThanOrEqual(new Date(first!).getTime());
});

test('requests that arrive together, each reading a stale last use, all succeed and set it', async () => {
  const token = await application.token(['notifications:read']);
  const id = await tokenId(token);
  const statuses = await Promise.all(
    Array.from({ length: 8 }, async () => (await request(harness.app).get('/api/v1/notifications').set('Authorization', `Bearer ${token}`)).status),
  );
  expect(statuses).toEqual(Array(8).fill(200));
  const [row] = await harness.orm.em.fork().execute<{ last_used_at: Date | null }[]>('select last_used_at from api_tokens where id = ?', [id]);
  expect(row.last_used_at).not.toBeNull();
});

test('tokens are stored hashed: neither the token nor its secret appears in any column', async () => {
  const fresh = await harness.newApplication('auth-hashing');
  const plaintexts = [await fresh.token(), await fresh.token(['events:write'])];
  const rows = await harness.orm.em
    .fork()
    .execute<Record<string, unknown>[]>('select * from api_tokens where application_id = ?', [fresh.id]);
  expect(rows).toHaveLength(2);
  const stored = JSON.stringify(rows).toLowerCase();
  for (const plaintext of plaintexts) {
    const { publicId, secret } = parseToken(plaintext)!;
    expect(stored).not.toContain(plaintext);
    expect(stored).not.toContain(secret);
    // The public id is stored (it finds the row); only the secret must not be.
    expect(stored).toContain(publicId);
  }
});

describe("a token of another application, with every ability, never reaches this application's data", () => {
  let owner: { token: string; installationRowId: string; notificationId: string; deliveryId: string };
  let intruder: string;
  const as = (token: string) => ({ Authorization: `Bearer ${token}` });

  beforeAll(async () => {
    const ownerApp = await harness.newApplication('owner');
    const token = await ownerApp.token(['*']);
    const put = await request(harness.app)
      .put('/api/v1/installations/owned-phone')
      .set(as(token))
      .send({ provider: { identifier: 'owner-token' }, platform: 'ios', user_id: 'owner-user' })
      .expect(201);
    const sent = await request(harness.app)
      .post('/api/v1/notifications')
      .set(as(token))
      .send({ recipients: { user_ids: ['owner-user'] }, notification: { title: 'Mine' } })
      .expect(202);
    const deliveryId = await insertDelivery(harness.orm, {
      applicationId: ownerApp.id,
      notificationId: sent.body.data.id,
      installationRowId: put.body.data.id,
      clientInstallationId: 'owned-phone',
      userId: 'owner-user',
      state: 'accepted',
    });
    owner = { token, installationRowId: put.body.data.id, notificationId: sent.body.data.id, deliveryId };
    intruder = await (await harness.newApplication('intruder')).token(['*']);
  });

  test('installations: GET, PATCH and DELETE are 404, and a PUT of the same id creates the intruder’s own', async () => {
    const path = '/api/v1/installations/owned-phone';
    expect((await request(harness.app).get(path).set(as(intruder))).status).toBe(404);
    expect((await request(harness.app).patch(path).set(as(intruder)).send({ user_id: 'stolen' })).status).toBe(404);
    expect((await request(harness.app).delete(path).set(as(intruder))).status).toBe(404);
    const put = await request(harness.app).put(path).set(as(intruder)).send({ provider: { identifier: 'x' }, platform: 'android' });
    expect(put.status).toBe(201);
    expect(put.body.data.id).not.toBe(owner.installationRowId);
    const mine = await request(harness.app).get(path).set(as(owner.token)).expect(200);
    expect(mine.body.data).toMatchObject({ id: owner.installationRowId, platform: 'ios', user_id: 'owner-user' });
  });

  test('notifications: GET one and its deliveries are 404, and the list does not show it', async () => {
    const one = await request(harness.app).get(`/api/v1/notifications/${owner.notificationId}`).set(as(intruder));
    expect(one.status).toBe(404);
    const deliveries = await request(harness.app).get(`/api/v1/notifications/${owner.notificationId}/deliveries`).set(as(intruder));
    expect(deliveries.status).toBe(404);
    const list = await request(harness.app).get('/api/v1/notifications').set(as(intruder)).expect(200);
    expect(list.body.data.map((n: { id: string }) => n.id)).not.toContain(owner.notificationId);
  });

  test('events: reporting on the owner’s delivery is 404 and counts nothing', async () => {
    const res = await request(harness.app)
      .post('/api/v1/events')
      .set(as(intruder))
      .send({ event_id: randomUUID(), delivery_id: owner.deliveryId, installation_id: 'owned-phone', type: 'opened', occurred_at: new Date().toISOString() });
    expect(res.status).toBe(404);
    const mine = await request(harness.app).get(`/api/v1/notifications/${owner.notificationId}`).set(as(owner.token)).expect(200);
    expect(mine.body.data.statistics.opened).toBe(0);
  });

  test("a user's installations: the intruder's list of the owner's user is empty", async () => {
    const theirs = await request(harness.app).get('/api/v1/installations?user_id=owner-user').set(as(intruder)).expect(200);
    expect(theirs.body.data).toEqual([]);
    const mine = await request(harness.app).get('/api/v1/installations?user_id=owner-user').set(as(owner.token)).expect(200);
    expect(mine.body.data.map((i: { id: string }) => i.id)).toEqual([owner.installationRowId]);
  });

  test('the application: each token reads its own', async () => {
    const theirs = await request(harness.app).get('/api/v1/app').set(as(intruder)).expect(200);
    const mine = await request(harness.app).get('/api/v1/app').set(as(owner.token)).expect(200);
    expect(theirs.body.data.name).toBe('intruder');
    expect(mine.body.data.name).toBe('owner');
    expect(theirs.body.data.id).not.toBe(mine.body.data.id);
  });

  test('sending: the intruder’s notification is its own, invisible to the owner', async () => {
    const sent = await request(harness.app)
      .post('/api/v1/notifications')
      .set(as(intruder))
      .send({ recipients: { user_ids: ['owner-user'] }, notification: { title: 'Theirs' } })
      .expect(202);
    expect((await request(harness.app).get(`/api/v1/notifications/${sent.body.data.id}`).set(as(owner.token))).status).toBe(404);
  });
});

test('every answer carries the common security headers', async () => {
  const res = await request(harness.app).get('/healthz');
  expect(res.headers).toMatchObject({
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'SAMEORIGIN',
    'strict-transport-security': expect.stringContaining('max-age='),
    'content-security-policy': expect.stringContaining("default-src 'self'"),
    'referrer-policy': 'no-referrer',
  });
  expect(res.headers).not.toHaveProperty('x-powered-by');
});

test('error answers never carry SQL or a stack, even when the database refuses the input', async () => {
  const token = await application.token(['*']);
  const res = await request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${token}`)
    .send({ recipients: { user_ids: ['x\u0000'] }, notification: { title: 't' } });
  expect(res.status).toBe(422);
  expect(JSON.stringify(res.body)).not.toMatch(/select|insert|update|violates|syntax|\bat .*\.ts:\d+/i);
});

describe('the token cache of an API process (as served)', () => {
  let cached: Harness;
  beforeAll(async () => {
    cached = await startHarness({ tokenCacheMs });
  });
  afterAll(() => cached.close());

  const read = (token: string) =>
    request(cached.app).get('/api/v1/notifications').set('Authorization', `Bearer ${token}`);

  // Each waits out the cache's lifetime: the two wait together.
  test.concurrent(`a revoked token stops working within ${tokenCacheMs} ms, and a wrong secret is never served from the cache`, async () => {
    const app = await cached.newApplication('cache');
    const token = await app.token(['notifications:read']);
    expect((await read(token)).status).toBe(200);
    const parts = parseToken(token)!;
    expect((await read(`hrld_${parts.publicId}_${hex(32)}`)).status).toBe(401);

    const revokedAt = Date.now();
    await revokeToken(cached.orm.em.fork(), await tokenId(token));
    // The process still trusts what it read: the revocation is not seen at once...
    expect((await read(token)).status).toBe(200);
    // ...but within the cache's lifetime.
    let status = 200;
    while (status === 200 && Date.now() - revokedAt < tokenCacheMs + 2_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = (await read(token)).status;
    }
    expect(status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(tokenCacheMs + 1_000);
  }, 20_000);

  test.concurrent('a new send policy applies within the same bound: it is read with the token', async () => {
    const app = await cached.newApplication('cache-policy');
    const token = await app.token(['notifications:send']);
    const send = () =>
      request(cached.app)
        .post('/api/v1/notifications')
        .set('Authorization', `Bearer ${token}`)
        .send({ recipients: { user_ids: ['nobody'] }, notification: { title: 'Hi' } });
    expect((await send()).headers['ratelimit-policy']).toBe('"send";q=100000;w=60');
    const setAt = Date.now();
    await setSendPolicy(cached.orm.em.fork(), app.id, { quota: 7, windowSeconds: 30 });
    let policy: string | undefined;
    while (Date.now() - setAt < tokenCacheMs + 2_000) {
      policy = (await send()).headers['ratelimit-policy'];
      if (policy !== '"send";q=100000;w=60') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(policy).toBe('"send";q=7;w=30');
    expect(Date.now() - setAt).toBeLessThan(tokenCacheMs + 1_000);
  }, 20_000);
});

// The edges of the contract an outside audit found: the order of checks, inputs that must never be
// a 500, HEAD, canonical paths, free idempotent replays, and a database outage.
import express from 'express';
import request from 'supertest';
import { revokeToken } from '../src/domain/applications.ts';
import { ApiToken } from '../src/db/entities.ts';
import { watchDatabase } from '../src/db/outage.ts';
import { errorHandler, lastResortHandler } from '../src/http/errors.ts';
import { createLogger } from '../src/logging/logger.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';
import { countNotifications } from './support/deliveries.ts';
import { waitFor } from './support/receiver.ts';

let harness: Harness;
let application: TestApplication;
let all: string;

beforeAll(async () => {
  harness = await startHarness({ sendPolicy: { quota: 1000, windowSeconds: 60 } });
  application = await harness.newApplication('edges');
  all = await application.token();
});

afterAll(async () => {
  await harness.close();
});

const bearer = (token: string) => `Bearer ${token}`;
const send = { recipients: { user_ids: ['u-1'] }, notification: { title: 'Hi' } };

/** Sends the text as it is (JSON.stringify of a value, or hand-written JSON), so odd input reaches the server. */
const postSend = (raw: string, token = all) =>
  request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', bearer(token))
    .set('Content-Type', 'application/json')
    .send(raw);

describe('authentication and abilities are decided before the body is read', () => {
  const malformed = '{"recipients": ';
  const oversized = JSON.stringify({ ...send, data: { blob: 'x'.repeat(1_100_000) } });

  async function revokedToken(): Promise<string> {
    const token = await application.token();
    const row = await harness.orm.em.fork().findOneOrFail(ApiToken, { publicId: token.split('_')[1] });
    await revokeToken(harness.orm.em.fork(), row.id);
    return token;
  }

  test.each([
    ['no token', async () => undefined],
    ['a malformed token', async () => 'hrld_nope'],
    ['a revoked token', revokedToken],
  ])('with %s, a malformed body, an oversized body and a wrong Content-Type are all 401', async (_name, token) => {
    const authorization = await token();
    for (const [body, type] of [
      [malformed, 'application/json'],
      [oversized, 'application/json'],
      ['hello', 'text/plain'],
    ]) {
      const req = request(harness.app).post('/api/v1/notifications').set('Content-Type', type);
      if (authorization) req.set('Authorization', bearer(authorization));
      const res = await req.send(body);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ message: 'Unauthenticated.' });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer realm="herald"/);
    }
  });

  test('a token without the ability is 403 before the body is parsed, and WWW-Authenticate names the scope', async () => {
    const appToken = await application.token(['installations:write', 'events:write']);
    for (const body of [malformed, oversized]) {
      const res = await postSend(body, appToken);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ message: 'This action is unauthorized.' });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="herald", error="insufficient_scope", scope="notifications:send"');
    }
  });

  test('an undecodable path without a token is 401; with one, 400', async () => {
    const path = '/api/v1/installations/%E0%A4%A';
    expect((await request(harness.app).get(path)).status).toBe(401);
    const res = await request(harness.app).get(path).set('Authorization', bearer(all));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'Malformed URI.' });
  });

  test('an invalid token is told apart from a missing one (RFC 6750 invalid_token)', async () => {
    const res = await request(harness.app).get('/api/v1/notifications').set('Authorization', 'Bearer hrld_nope');
    expect(res.headers['www-authenticate']).toBe('Bearer realm="herald", error="invalid_token"');
  });
});

describe('no input is a 500', () => {
  const hostileNames = ['__proto__', 'constructor', 'toString', 'hasOwnProperty'];
  const routes: [string, string][] = [
    ['get', '/healthz'],
    ['get', '/readyz'],
    ['get', '/openapi.json'],
    ['get', '/api/v1/notifications'],
    ['get', '/api/v1/notifications/01960000-0000-7000-8000-000000000000'],
    ['get', '/api/v1/notifications/01960000-0000-7000-8000-000000000000/deliveries'],
    ['get', '/api/v1/notifications/01960000-0000-7000-8000-000000000000/breakdown'],
    ['get', '/api/v1/installations/phone-1'],
    ['delete', '/api/v1/installations/phone-1'],
    ['get', '/api/v1/installations?user_id=u-1'],
    ['get', '/api/v1/app'],
  ];

  test.each(hostileNames)('a query parameter named %s is a 422 in the error body on every route', async (name) => {
    for (const [method, path] of routes) {
      const res = await request(harness.app)[method as 'get'](`${path}${path.includes('?') ? '&' : '?'}${name}=1`).set('Authorization', bearer(all));
      expect({ path, status: res.status }).toEqual({ path, status: 422 });
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body.errors[name]).toEqual([`The ${name} parameter is not allowed.`]);
    }
  });

  test.each(hostileNames)('a body key named %s, at the top and nested, is a clean 4xx on every body route', async (name) => {
    const raw = (body: string) => body.replace('"HOSTILE"', JSON.stringify(name));
    const cases: [string, string, string][] = [
      ['post', '/api/v1/notifications', raw('{"recipients":{"user_ids":["u"]},"notification":{"title":"t"},"HOSTILE":1}')],
      ['post', '/api/v1/notifications', raw('{"recipients":{"user_ids":["u"],"HOSTILE":1},"notification":{"title":"t","HOSTILE":1}}')],
      ['put', '/api/v1/installations/phone-1', raw('{"platform":"ios","provider":{"identifier":"t"},"HOSTILE":{"a":1}}')],
      ['patch', '/api/v1/installations/phone-1', raw('{"HOSTILE":null}')],
      ['post', '/api/v1/events', raw('{"HOSTILE":1}')],
    ];
    for (const [method, path, body] of cases) {
      const res = await request(harness.app)[method as 'post'](path)
        .set('Authorization', bearer(all))
        .set('Content-Type', 'application/json')
        .send(body);
      expect({ path, status: res.status }).toEqual({ path, status: 422 });
      expect(Object.keys(res.body.errors).some((field) => field.endsWith(name))).toBe(true);
    }
  });

  test.each(hostileNames)('a data key named %s is sent like any other key', async (name) => {
    const res = await postSend(`{"recipients":{"user_ids":["u"]},"notification":{},"data":{${JSON.stringify(name)}:{${JSON.stringify(name)}:"v"}}}`);
    expect(res.status).toBe(202);
    expect(Object.keys(res.body.data.data)).toEqual([name]);
  });

  test('an error whose every property throws is still answered with the JSON error body and no stack', async () => {
    for (const env of ['development', 'production']) {
      const previous = process.env.NODE_ENV;
      process.env.NODE_ENV = env;
      const app = express();
      app.get('/boom', () => {
        throw new Proxy({}, { get: () => { throw new Error('hostile getter'); } });
      });
      app.use(errorHandler(watchDatabase({ probe: async () => undefined, logger: createLogger('silent'), roles: { api: true, worker: false } })));
      app.use(lastResortHandler);
      const res = await request(app).get('/boom');
      process.env.NODE_ENV = previous;
      expect(res.status).toBe(500);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual({ message: 'Server Error' });
    }
  });

  test.each([
    ['data', { ...send, data: { note: 'a\ud800b' } }, 'data.note'],
    ['the title', { ...send, notification: { title: '\udc00' } }, 'notification.title'],
    ['a user id', { ...send, recipients: { user_ids: ['u\ud83d'] } }, 'recipients.user_ids.0'],
    ['a data key', { ...send, data: { 'k\ud800': 1 } }, 'data'],
  ])('a lone UTF-16 surrogate in %s is a 422 naming the field', async (_name, body, field) => {
    const res = await postSend(JSON.stringify(body));
    expect(res.status).toBe(422);
    expect(res.body.errors[field]).toEqual([expect.stringMatching(/unpaired UTF-16 surrogate/)]);
  });

  test('a lone surrogate in an installation device field is a 422 too; a well-formed emoji is stored', async () => {
    const put = (model: string) =>
      request(harness.app)
        .put('/api/v1/installations/surrogate-1')
        .set('Authorization', bearer(all))
        .set('Content-Type', 'application/json')
        .send(JSON.stringify({ platform: 'ios', provider: { identifier: 't' }, device: { model } }));
    const refused = await put('x\udfff');
    expect(refused.status).toBe(422);
    expect(Object.keys(refused.body.errors)).toEqual(['device.model']);
    const stored = await put('📱 phone');
    expect(stored.status).toBe(201);
    expect(stored.body.data.device.model).toBe('📱 phone');
  });

  test.each([5_000, 20_000, 200_000])('data nested %i levels deep is a 422 naming data, and takes no send quota', async (depth) => {
    const before = await request(harness.app).post('/api/v1/notifications').set('Authorization', bearer(all)).send({});
    const body = `{"recipients":{"user_ids":["u"]},"notification":{},"data":{"a":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
    const res = await postSend(body);
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual({ data: ['The data field is nested more than 32 levels deep.'] });
    const remaining = (header: string) => /r=(\d+)/.exec(header)?.[1];
    expect(remaining(res.headers.ratelimit)).toBe(remaining(before.headers.ratelimit));
  });

  test('32 levels is the limit: a body nesting exactly 32 containers is accepted', async () => {
    // body (1) > data (2) > 30 arrays (3..32)
    const body = `{"recipients":{"user_ids":["u"]},"notification":{},"data":{"a":${'['.repeat(30)}1${']'.repeat(30)}}}`;
    const res = await postSend(body);
    expect(res.status).toBe(202);
  });
});

describe('HEAD and canonical paths', () => {
  test.each(['/healthz', '/openapi.json', '/api/v1/notifications', '/api/v1/installations/head-1', '/api/v1/installations?user_id=u-1', '/api/v1/app'])(
    'HEAD %s answers like GET, without a body',
    async (path) => {
      const get = await request(harness.app).get(path).set('Authorization', bearer(all));
      const head = await request(harness.app).head(path).set('Authorization', bearer(all));
      expect(head.status).toBe(get.status);
      expect(head.headers['content-type']).toBe(get.headers['content-type']);
      expect(head.text ?? '').toBe('');
    },
  );

  test('HEAD needs the same token as GET', async () => {
    expect((await request(harness.app).head('/api/v1/notifications')).status).toBe(401);
  });

  test.each(['/healthz/', '/HEALTHZ', '/api/v1/notifications/', '/API/v1/notifications', '/api/v1/Notifications', '/api/v1/installations/x/', '/api/v1/installations/', '/api/v1/app/', '/api/v1/App'])(
    '%s is not a canonical path: 404 like any unknown path',
    async (path) => {
      const res = await request(harness.app).get(path).set('Authorization', bearer(all));
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: 'Not Found' });
    },
  );
});

describe('idempotent retries are free', () => {
  /** A harness of its own (not the file's) whose applications may send `quota` an hour, with one application and its keyed send. */
  async function withQuota(
    quota: number,
    run: (sender: { limited: Harness; applicationId: string; token: string; post: (key: string, body?: object) => request.Test }) => Promise<void>,
  ): Promise<void> {
    const limited = await startHarness({ sendPolicy: { quota, windowSeconds: 3600 } });
    try {
      const app = await limited.newApplication('quota');
      const token = await app.token();
      const post = (key: string, body: object = send) =>
        request(limited.app).post('/api/v1/notifications').set('Authorization', bearer(token)).set('Idempotency-Key', key).send(body);
      await run({ limited, applicationId: app.id, token, post });
    } finally {
      await limited.close();
    }
  }

  test('a replay is answered with the original even when the quota is used up, and takes nothing from it', () =>
    withQuota(2, async ({ post }) => {
      const first = await post('order-1');
      expect(first.status).toBe(202);
      expect(first.headers.ratelimit).toMatch(/^"send";r=1;/);
      const second = await post('order-2');
      expect(second.headers.ratelimit).toMatch(/^"send";r=0;/);
      expect((await post('order-3')).status).toBe(429);
      for (let i = 0; i < 3; i++) {
        const replay = await post('order-1');
        expect(replay.status).toBe(202);
        expect(replay.body.data.id).toBe(first.body.data.id);
        expect(replay.body.meta).toEqual({ accepted: false });
        expect(replay.headers.ratelimit).toMatch(/^"send";r=0;/);
        expect(replay.headers['ratelimit-policy']).toBe('"send";q=2;w=3600');
      }
      // A reused key with another body is still refused, and takes nothing either.
      const other = await post('order-1', { ...send, notification: { title: 'Other' } });
      expect(other.status).toBe(409);
      expect(other.body).toEqual({ message: 'This Idempotency-Key was already used for a different request.' });
      expect(other.headers.ratelimit).toMatch(/^"send";r=0;/);
    }));

  test('with quota left, a replay and a reused key (409) take nothing from it either', () =>
    withQuota(5, async ({ limited, applicationId, post }) => {
      expect((await post('left-1')).headers.ratelimit).toMatch(/^"send";r=4;/);
      const replay = await post('left-1');
      expect(replay.body.meta).toEqual({ accepted: false });
      expect(replay.headers.ratelimit).toMatch(/^"send";r=4;/);
      const reused = await post('left-1', { ...send, notification: { title: 'Other' } });
      expect(reused.status).toBe(409);
      expect(reused.headers.ratelimit).toMatch(/^"send";r=4;/);
      expect((await post('left-2')).headers.ratelimit).toMatch(/^"send";r=3;/);
      expect(await countNotifications(limited.orm, applicationId)).toBe(2);
    }));

  test('concurrent first sends with one key create one notification and take one send from the quota', () =>
    withQuota(100, async ({ limited, token, post }) => {
      const answers = await Promise.all(Array.from({ length: 10 }, () => post('race-1')));
      expect(new Set(answers.map((res) => res.body.data.id)).size).toBe(1);
      expect(answers.filter((res) => res.body.meta.accepted)).toHaveLength(1);
      const after = await request(limited.app).post('/api/v1/notifications').set('Authorization', bearer(token)).send({});
      expect(after.status).toBe(422);
      expect(after.headers.ratelimit).toMatch(/^"send";r=99;/);
    }));

  test('every send answer past authentication announces the quota, schema 422 and malformed JSON included', async () => {
    const schema = await request(harness.app).post('/api/v1/notifications').set('Authorization', bearer(all)).send({ recipients: {} });
    expect(schema.status).toBe(422);
    expect(schema.headers['ratelimit-policy']).toBe('"send";q=1000;w=60');
    const malformed = await postSend('{');
    expect(malformed.status).toBe(400);
    expect(malformed.headers.ratelimit).toMatch(/^"send";r=\d+;t=\d+$/);
  });
});

describe('readable messages and exact formats', () => {
  const post = (body: unknown) => postSend(JSON.stringify(body));

  test('a repeated user id is named in the message', async () => {
    const res = await post({ ...send, recipients: { user_ids: ['a', 'b', 'a'] } });
    expect(res.body.errors['recipients.user_ids']).toEqual(['The recipients.user_ids field must be unique: "a" appears twice.']);
  });

  test('type, size and emptiness are said in words, not in validator wording', async () => {
    const res = await post({ recipients: { user_ids: ['u'] }, notification: { title: 5, body: 'b'.repeat(4097) } });
    expect(res.body.errors).toEqual({
      'notification.title': ['The notification.title field must be a string or null.'],
      'notification.body': ['The notification.body field must not be longer than 4096 characters.'],
    });
    const empty = await request(harness.app)
      .patch('/api/v1/installations/phone-1')
      .set('Authorization', bearer(all))
      .send({});
    expect(empty.body.errors).toEqual({ body: ['The body must have at least 1 field.'] });
  });

  test('nothing to show is refused by the document itself, with the rule in words', async () => {
    const res = await post({ recipients: { user_ids: ['u'] }, notification: { title: '', body: null }, data: {} });
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual({ notification: ['The notification must have a title, a body, or a non-empty data object.'] });
  });

  test('an event_id written as urn:uuid: is refused (the format is a bare UUID)', async () => {
    const res = await request(harness.app)
      .post('/api/v1/events')
      .set('Authorization', bearer(all))
      .send({
        event_id: 'urn:uuid:3d0ca315-aff9-4fc2-be61-3b76b9a2d798',
        delivery_id: '01960000-0000-7000-8000-000000000000',
        installation_id: 'phone-1',
        type: 'opened',
        occurred_at: '2026-11-02T10:03:41Z',
      });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['event_id']);
  });

  test('any cursor of the documented form is a position (200); anything else is 422', async () => {
    const page = await request(harness.app).get('/api/v1/notifications?cursor=AAAAAAAAAAAAAAAAAAAAAA').set('Authorization', bearer(all));
    expect(page.status).toBe(200);
    expect(page.body.data).toEqual([]);
    const last = await request(harness.app).get('/api/v1/notifications?cursor=_____________________w').set('Authorization', bearer(all));
    expect(last.status).toBe(200);
    const bad = await request(harness.app).get('/api/v1/notifications?cursor=0').set('Authorization', bearer(all));
    expect(bad.status).toBe(422);
    expect(bad.body.errors).toEqual({ cursor: ['The cursor field must be a meta.next_cursor of an earlier page.'] });
  });
});

describe('a database that cannot be reached', () => {
  test('a valid token gets 503 with Retry-After (never 401), /healthz stays 200, the outage is logged once, and service resumes by itself', async () => {
    const proxy = await startTcpProxy(harness.url);
    const lines: { level: number; msg: string; status?: number }[] = [];
    const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const behind = await startHarness({ databaseUrl: proxy.url, logger });
    try {
      const app = await behind.newApplication('outage');
      const token = await app.token();
      expect((await request(behind.app).get('/api/v1/notifications').set('Authorization', bearer(token))).status).toBe(200);
      await proxy.cut();
      for (const path of ['/api/v1/notifications', '/api/v1/installations/x']) {
        const res = await request(behind.app).get(path).set('Authorization', bearer(token));
        expect(res.status).toBe(503);
        expect(res.headers['retry-after']).toBe('5');
        expect(res.body).toEqual({ message: 'Service Unavailable' });
      }
      const sent = await request(behind.app).post('/api/v1/notifications').set('Authorization', bearer(token)).send(send);
      expect(sent.status).toBe(503);
      expect((await request(behind.app).get('/healthz')).status).toBe(200);
      expect((await request(behind.app).get('/readyz')).status).toBe(503);
      await proxy.restore();
      const status = await waitFor(
        async () => (await request(behind.app).get('/api/v1/notifications').set('Authorization', bearer(token))).status,
        (answered) => answered === 200,
        10_000,
      );
      expect(status).toBe(200);
      // However many requests were refused: one line for the outage, one when it ended, and no error.
      const outageLines = () => lines.filter((line) => line.msg.startsWith('database'));
      await waitFor(() => outageLines().length, (count) => count >= 2, 10_000);
      expect(outageLines().map(({ level, msg }) => [level, msg])).toEqual([
        [40, 'database unreachable: the API answers 503 until it answers again'],
        [30, 'database reachable again'],
      ]);
      const refused = lines.filter((line) => line.status === 503);
      expect(refused.length).toBeGreaterThanOrEqual(4);
      expect(refused.filter((line) => line.level !== 40 || 'err' in line)).toEqual([]);
      expect(lines.filter((line) => line.level >= 50)).toEqual([]);
    } finally {
      await proxy.restore().catch(() => undefined);
      await behind.close();
      await proxy.close();
    }
  });
});

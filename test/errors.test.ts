// The error body and the HTTP edges: malformed JSON, oversized and non-JSON bodies, unknown
// routes and methods, validation field paths, request ids, system endpoints, and what the logs
// must never hold.
import type { Request } from 'express';
import request from 'supertest';
import { loadDocument } from '../src/http/document.ts';
import { fieldName, toHttpError } from '../src/http/errors.ts';
import { createLogger } from '../src/logging/logger.ts';
import { startHarness, type Harness } from './support/harness.ts';

let harness: Harness;
let token: string;

beforeAll(async () => {
  harness = await startHarness();
  token = await (await harness.newApplication('errors')).token();
});
afterAll(() => harness.close());

const auth = () => `Bearer ${token}`;
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const stackTrace = /\n\s+at |node_modules|\.[jt]s:\d+|\bstack\b/;

const validSend = { recipients: { user_ids: ['user-1'] }, notification: { title: 'Hello' } };

describe('malformed and unacceptable bodies', () => {
  test('malformed JSON is 400 with a message', async () => {
    const res = await request(harness.app)
      .put('/api/v1/installations/errors-malformed')
      .set('Authorization', auth())
      .set('Content-Type', 'application/json')
      .send('{"provider": {"identifier": ');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'Malformed JSON in request body.' });
  });

  test.each([
    ['null', 'null'],
    ['a bare string', '"hello"'],
    ['a bare number', '42'],
    ['an array', '[1]'],
  ])('a JSON body that is %s is valid JSON, so a 422 naming the body, not "Malformed JSON"', async (_name, raw) => {
    const res = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', auth())
      .set('Content-Type', 'application/json')
      .send(raw);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: 'The body must be an object.', errors: { body: ['The body must be an object.'] } });
  });

  test('a JSON array where an object is expected is 422 keyed body', async () => {
    const res = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', auth())
      .set('Content-Type', 'application/json')
      .send('[]');
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['body']);
  });

  test('a body over the configured limit is 413, and the same body is accepted under the default limit', async () => {
    const small = await startHarness({ bodyLimit: '1kb' });
    try {
      const smallToken = await (await small.newApplication('errors-limit')).token();
      const body = { provider: { identifier: 'x'.repeat(2000) }, platform: 'ios' };
      const tooLarge = await request(small.app)
        .put('/api/v1/installations/errors-large')
        .set('Authorization', `Bearer ${smallToken}`)
        .send(body);
      expect(tooLarge.status).toBe(413);
      expect(tooLarge.body).toEqual({ message: 'Request body is too large.' });

      const accepted = await request(harness.app)
        .put('/api/v1/installations/errors-large')
        .set('Authorization', auth())
        .send(body);
      expect(accepted.status).toBe(201);
    } finally {
      await small.close();
    }
  });

  test('a text/plain body is 415', async () => {
    const res = await request(harness.app)
      .put('/api/v1/installations/errors-text')
      .set('Authorization', auth())
      .set('Content-Type', 'text/plain')
      .send('provider=abc');
    expect(res.status).toBe(415);
    expect(res.body).toEqual({ message: expect.stringContaining('text/plain') });
  });

  test('a JSON body in an unsupported charset is 415', async () => {
    const res = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', auth())
      .set('Content-Type', 'application/json; charset=latin1')
      .send(JSON.stringify(validSend));
    expect(res.status).toBe(415);
    expect(res.body).toEqual({ message: expect.any(String) });
  });
});

describe('routes and methods', () => {
  test.each(['/nope', '/api/v1/nope', '/api/v2/notifications', '/api/v1/installation', '/api/v1/apps'])(
    'an unknown route (%s) is 404 Not Found',
    async (path) => {
      const res = await request(harness.app).get(path).set('Authorization', auth());
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: 'Not Found' });
    },
  );

  test('a method the route does not have is 405 with an Allow header', async () => {
    const res = await request(harness.app).delete('/api/v1/notifications').set('Authorization', auth());
    expect(res.status).toBe(405);
    expect(res.body).toEqual({ message: 'Method Not Allowed' });
    const allowed = res.headers.allow.split(/,\s*/).map((method: string) => method.toUpperCase()).sort();
    expect(allowed).toEqual(['GET', 'HEAD', 'POST']);
  });

  test('405 on the installations list (a user\'s installations) allows only GET', async () => {
    const res = await request(harness.app).post('/api/v1/installations').set('Authorization', auth()).send({});
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
  });

  test('405 on an installation lists the four installation methods', async () => {
    const res = await request(harness.app).post('/api/v1/installations/errors-405').set('Authorization', auth()).send({});
    expect(res.status).toBe(405);
    const allowed = res.headers.allow.split(/,\s*/).map((method: string) => method.toUpperCase()).sort();
    expect(allowed).toEqual(['DELETE', 'GET', 'HEAD', 'PATCH', 'PUT']);
  });

  test('a path that cannot be percent-decoded is 400, not a 422 keyed by the URL', async () => {
    const res = await request(harness.app).get('/api/v1/installations/%E0%A4%A').set('Authorization', auth());
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'Malformed URI.' });
  });
});

describe('validation errors', () => {
  test('a 422 carries message and errors keyed by field path, several reported together', async () => {
    const res = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', auth())
      .send({
        recipients: { user_ids: [] },
        notification: { title: 't'.repeat(256) },
        options: { ttl: 2419201 },
      });
    expect(res.status).toBe(422);
    expect(res.body.message).toEqual(expect.any(String));
    expect(res.body.message.length).toBeGreaterThan(0);
    expect(Object.keys(res.body.errors).sort()).toEqual(['notification.title', 'options.ttl', 'recipients.user_ids']);
    for (const messages of Object.values(res.body.errors)) {
      expect(messages).toEqual([expect.any(String)]);
    }
  });

  test('an element of an array is keyed by its index', async () => {
    const res = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', auth())
      .send({ recipients: { user_ids: ['ok', 'u'.repeat(256)] }, notification: { title: 'x' } });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['recipients.user_ids.1']);
  });

  test('a header is keyed by its canonical name', async () => {
    const res = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', auth())
      .set('Idempotency-Key', 'k'.repeat(256))
      .send(validSend);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['Idempotency-Key']);
  });

  test('a query parameter and a path parameter are keyed by their names', async () => {
    const limit = await request(harness.app).get('/api/v1/notifications?limit=101').set('Authorization', auth());
    expect(limit.status).toBe(422);
    expect(Object.keys(limit.body.errors)).toEqual(['limit']);
    const id = await request(harness.app).get('/api/v1/notifications/not-a-uuid').set('Authorization', auth());
    expect(id.status).toBe(422);
    expect(Object.keys(id.body.errors)).toEqual(['notificationId']);
  });
});

test('error responses never contain a stack trace, only message and errors', async () => {
  const app = harness.app;
  const responses = [
    await request(app).put('/api/v1/installations/e').set('Authorization', auth()).set('Content-Type', 'application/json').send('{'),
    await request(app).get('/api/v1/installations/e'),
    await request(app).get('/api/v1/installations/e').set('Authorization', `Bearer ${await (await harness.newApplication()).token(['events:write'])}`),
    await request(app).get('/api/v1/installations/errors-absent').set('Authorization', auth()),
    await request(app).delete('/api/v1/notifications').set('Authorization', auth()),
    await request(app).put('/api/v1/installations/e').set('Authorization', auth()).set('Content-Type', 'text/plain').send('x'),
    await request(app).put('/api/v1/installations/e').set('Authorization', auth()).send({ platform: 'bb' }),
    await request(app).get('/api/v1/installations/%E0%A4%A').set('Authorization', auth()),
    await request(app).get('/nope'),
  ];
  expect(responses.map((res) => res.status)).toEqual([400, 401, 403, 404, 405, 415, 422, 400, 404]);
  for (const res of responses) {
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(Object.keys(res.body).every((key) => key === 'message' || key === 'errors')).toBe(true);
    expect(res.body.message).toEqual(expect.any(String));
    expect(res.text).not.toMatch(stackTrace);
  }
});

describe('X-Request-Id', () => {
  test('every response carries one, success or error', async () => {
    const responses = [
      await request(harness.app).get('/healthz'),
      await request(harness.app).get('/nope'),
      await request(harness.app).get('/api/v1/notifications'),
      await request(harness.app).get('/api/v1/notifications').set('Authorization', auth()),
      await request(harness.app).post('/api/v1/notifications').set('Authorization', auth()).set('Content-Type', 'application/json').send('{'),
    ];
    const ids = responses.map((res) => res.headers['x-request-id']);
    for (const id of ids) expect(id).toMatch(uuidPattern);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('a valid incoming X-Request-Id is echoed', async () => {
    const res = await request(harness.app).get('/api/v1/installations/errors-absent').set('Authorization', auth()).set('X-Request-Id', 'trace-42.abc:def_7');
    expect(res.status).toBe(404);
    expect(res.headers['x-request-id']).toBe('trace-42.abc:def_7');
  });

  test.each([
    ['with spaces', 'has spaces in it'],
    ['too long', 'x'.repeat(129)],
    ['with markup', '<script>'],
  ])('an invalid incoming X-Request-Id (%s) is replaced by a fresh one', async (_name, given) => {
    const res = await request(harness.app).get('/healthz').set('X-Request-Id', given);
    expect(res.headers['x-request-id']).toMatch(uuidPattern);
  });
});

describe('system endpoints', () => {
  test('GET /healthz is 200 {status: ok} without a token', async () => {
    const res = await request(harness.app).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  test('GET /readyz is 200 {status: ok} when the database answers', async () => {
    const res = await request(harness.app).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  test('GET /openapi.json serves the document unaltered', async () => {
    const res = await request(harness.app).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body.info.version).toBe('1.5.0');
    expect(res.body).toEqual(loadDocument());
  });
});

test('logs never contain the Authorization header or a device identifier', async () => {
  let captured = '';
  const logger = createLogger('trace', { write: (line: string) => void (captured += line) });
  const logged = await startHarness({ logger });
  try {
    const bearer = await (await logged.newApplication('errors-logs')).token();
    const identifier = 'f00dfacefeedbeef0123456789abcdef0123456789abcdefdistinctive';
    const app = logged.app;
    const statuses = [
      (await request(app).put('/api/v1/installations/log-phone').set('Authorization', `Bearer ${bearer}`).send({ provider: { identifier }, platform: 'ios' })).status,
      (await request(app).put('/api/v1/installations/log-phone').set('Authorization', `Bearer ${bearer}`).send({ provider: { identifier }, platform: 'ios', user_id: 'u' })).status,
      (await request(app).put('/api/v1/installations/log-phone').set('Authorization', `Bearer ${bearer}`).send({ provider: { identifier }, platform: 'windows' })).status,
      (await request(app).get('/api/v1/installations/log-phone').set('Authorization', `Bearer ${bearer}`)).status,
      (await request(app).get('/api/v1/installations/log-phone').set('Authorization', `Bearer ${bearer}x`)).status,
      (await request(app).put('/api/v1/installations/log-phone').set('Authorization', `Bearer ${bearer}`).set('Content-Type', 'application/json').send(`{"provider":{"identifier":"${identifier}"`)).status,
    ];
    expect(statuses).toEqual([201, 200, 422, 200, 401, 400]);
    // The logger did write the requests (by route, without headers); what it wrote holds neither secret.
    expect(captured).toContain('"route":"/api/v1/installations/{installationId}"');
    expect(captured).not.toMatch(/authorization/i);
    expect(captured).not.toContain(bearer);
    expect(captured).not.toContain(bearer.split('_')[2]);
    expect(captured).not.toContain(identifier);
  } finally {
    await logged.close();
  }
});

describe('fieldName', () => {
  test.each([
    ['/body/recipients/user_ids', 'recipients.user_ids'],
    ['/body/recipients/user_ids/0', 'recipients.user_ids.0'],
    ['/body/notification/title', 'notification.title'],
    ['/body/options/ttl', 'options.ttl'],
    ['/body/provider/identifier', 'provider.identifier'],
    ['/body/platform', 'platform'],
    ['/params/installationId', 'installationId'],
    ['/query/limit', 'limit'],
    ['/headers/idempotency-key', 'Idempotency-Key'],
    ['/headers/x-request-id', 'X-Request-Id'],
    ['/body', 'body'],
    ['', 'body'],
    [undefined, 'body'],
  ])('%p → %p', (path, expected) => {
    expect(fieldName(path)).toBe(expected);
  });
});

describe('toHttpError', () => {
  // What the mapping reads of a request: its body (quoted in messages) and its Content-Type.
  const fakeRequest = { body: {}, get: () => undefined } as unknown as Request;

  test('a validator 400 with field issues becomes a 422 with errors', () => {
    const error = toHttpError({ status: 400, errors: [{ path: '/body/platform', message: 'must be equal to one of the allowed values' }] }, fakeRequest);
    expect(error?.status).toBe(422);
    expect(Object.keys(error?.errors ?? {})).toEqual(['platform']);
  });

  test('a validator 400 that names no field (a malformed URI) stays a 400 without errors', () => {
    const error = toHttpError({ status: 400, message: "malformed uri'", errors: [{ path: '/api/v1/installations/%E0', message: "malformed uri'" }] }, fakeRequest);
    expect(error?.status).toBe(400);
    expect(error?.errors).toBeUndefined();
  });

  test('anything that is not an HTTP error is left for the masked 500', () => {
    expect(toHttpError(new Error('boom'), fakeRequest)).toBeNull();
    expect(toHttpError({ status: 503 }, fakeRequest)).toBeNull();
    expect(toHttpError(undefined, fakeRequest)).toBeNull();
  });
});

describe('characters Postgres cannot store', () => {
  test('a NUL character anywhere in a send is 422 keyed by its field, and nothing is stored', async () => {
    const application = await harness.newApplication('nul');
    const sendToken = await application.token(['notifications:send']);
    const res = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${sendToken}`)
      .send({
        recipients: { user_ids: ['user-\u0000'] },
        notification: { title: 'Hi\u0000' },
        data: { 'k\u0000': 'v', nested: { deep: '\u0000' } },
      });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(
      ['data', 'data.nested.deep', 'notification.title', 'recipients.user_ids.0'].sort(),
    );
    const [{ count }] = await harness.orm.em
      .fork()
      .execute<{ count: number }[]>('select count(*)::int as count from notifications where application_id = ?', [
        application.id,
      ]);
    expect(count).toBe(0);
  });

  test('a NUL character in a path parameter is never a 500: 422 where the id would be stored, 404 where it is only looked up', async () => {
    const put = await request(harness.app)
      .put('/api/v1/installations/a%00b')
      .set('Authorization', auth())
      .send({ platform: 'ios', provider: { identifier: 'token' } });
    expect(put.status).toBe(422);
    expect(put.body.errors).toHaveProperty('installationId');
    // No installation can have such an id: a lookup names none (the spec lists 404 there).
    const get = await request(harness.app).get('/api/v1/installations/a%00b').set('Authorization', auth());
    expect(get.status).toBe(404);
  });
});

test('a 401 names the Bearer scheme in WWW-Authenticate', async () => {
  const res = await request(harness.app).get('/api/v1/notifications');
  expect(res.status).toBe(401);
  expect(res.headers['www-authenticate']).toBe('Bearer realm="herald"');
});

test('a body without a Content-Type is 415 with a message that says what is expected', async () => {
  const res = await request(harness.app)
    .put('/api/v1/installations/no-content-type')
    .set('Authorization', auth())
    .send(Buffer.from('{}'));
  expect(res.status).toBe(415);
  expect(res.body).toEqual({ message: expect.stringContaining('expected application/json') });
});

test('a validation message is one readable sentence per field', async () => {
  const res = await request(harness.app)
    .put('/api/v1/installations/readable')
    .set('Authorization', auth())
    .send({ provider: {}, extra: true });
  expect(res.status).toBe(422);
  expect(res.body.errors).toEqual({
    platform: ['The platform field is required.'],
    'provider.identifier': ['The provider.identifier field is required.'],
    extra: ['The extra field is not allowed.'],
  });
});

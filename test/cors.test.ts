// CORS for pages: the operations an app token uses in a browser (GET the application, PUT/PATCH an
// installation, POST an event) answer preflights from the origins an operator allows (`herald apps set
// --allowed-origins`), and their answers carry CORS headers only when the token's own application
// allows the page's origin. Other origins and other operations get no CORS headers at all.
import request from 'supertest';
import { setAllowedOrigins } from '../src/domain/applications.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let shop: TestApplication;
let other: TestApplication;
const shopOrigin = 'https://shop.example';

beforeAll(async () => {
  harness = await startHarness();
  shop = await harness.newApplication('shop');
  other = await harness.newApplication('other');
  await setAllowedOrigins(harness.orm.em.fork(), shop.id, [shopOrigin, 'http://localhost:5173']);
});
afterAll(() => harness.close());

const preflight = (path: string, origin: string, method: string) =>
  request(harness.app)
    .options(path)
    .set('Origin', origin)
    .set('Access-Control-Request-Method', method)
    .set('Access-Control-Request-Headers', 'authorization, content-type');

const corsHeaders = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('access-control-')));

describe('preflights', () => {
  test.each([
    ['/api/v1/installations/browser-1', 'PUT', 'PUT, PATCH'],
    ['/api/v1/installations/browser-1', 'PATCH', 'PUT, PATCH'],
    ['/api/v1/events', 'POST', 'POST'],
    ['/api/v1/app', 'GET', 'GET'],
  ])('%s %s from an allowed origin is answered 204 with what the page may send', async (path, method, methods) => {
    const res = await preflight(path, shopOrigin, method);
    expect(res.status).toBe(204);
    expect(corsHeaders(res.headers)).toEqual({
      'access-control-allow-origin': shopOrigin,
      'access-control-allow-methods': methods,
      'access-control-allow-headers': 'Authorization, Content-Type, Content-Encoding, X-Request-Id',
      'access-control-max-age': '600',
    });
    expect(res.headers.vary).toMatch(/Origin/);
  });

  test.each([
    ['another origin', '/api/v1/installations/browser-1', 'https://evil.example', 'PUT'],
    ['an allowed origin on http', '/api/v1/installations/browser-1', 'http://shop.example', 'PUT'],
    ['a send', '/api/v1/notifications', shopOrigin, 'POST'],
    ['a delete', '/api/v1/installations/browser-1', shopOrigin, 'DELETE'],
    ['a read', '/api/v1/installations/browser-1', shopOrigin, 'GET'],
    ['a change of the application', '/api/v1/app', shopOrigin, 'PATCH'],
  ])('%s gets no CORS headers', async (_name, path, origin, method) => {
    const res = await preflight(path, origin, method);
    expect(res.status).not.toBe(204);
    expect(corsHeaders(res.headers)).toEqual({});
  });
});

describe('requests', () => {
  const put = (token: string, origin: string, body: object = { platform: 'ios', provider: { identifier: 'a'.repeat(64) } }) =>
    request(harness.app).put('/api/v1/installations/cors-browser').set('Authorization', `Bearer ${token}`).set('Origin', origin).send(body);

  test("the token's application allows the origin: the answer is readable by the page, an error's too", async () => {
    const token = await shop.token(['installations:write']);
    const res = await put(token, shopOrigin);
    expect(res.status).toBeLessThan(300);
    expect(corsHeaders(res.headers)).toEqual({ 'access-control-allow-origin': shopOrigin, 'access-control-expose-headers': 'X-Request-Id' });
    const refused = await put(token, shopOrigin, { platform: 'web', provider: { identifier: 'https://evil.example/push' } });
    expect(refused.status).toBe(422);
    expect(refused.headers['access-control-allow-origin']).toBe(shopOrigin);
    const local = await put(token, 'http://localhost:5173');
    expect(local.headers['access-control-allow-origin']).toBe('http://localhost:5173');
  });

  test("another application's token from the same origin, another origin, or a server operation: no CORS headers", async () => {
    const otherToken = await other.token(['installations:write']);
    expect(corsHeaders((await put(otherToken, shopOrigin)).headers)).toEqual({});
    expect(corsHeaders((await put(await shop.token(['installations:write']), 'https://evil.example')).headers)).toEqual({});
    const sent = await request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${await shop.token(['notifications:send'])}`)
      .set('Origin', shopOrigin)
      .send({ recipients: { user_ids: ['u'] }, notification: { title: 'Hi' } });
    expect(sent.status).toBe(202);
    expect(corsHeaders(sent.headers)).toEqual({});
  });
});

test('allowed origins are scheme, host and port only; http only for this machine', async () => {
  const em = harness.orm.em.fork();
  const application = await harness.newApplication('origins');
  expect(await setAllowedOrigins(em, application.id, [' https://a.example ', 'https://a.example', '', 'https://b.example:8443'])).toEqual([
    'https://a.example',
    'https://b.example:8443',
  ]);
  await expect(setAllowedOrigins(em, application.id, ['https://a.example/'])).rejects.toThrow('"https://a.example/" is not an origin');
  await expect(setAllowedOrigins(em, application.id, ['https://a.example/shop'])).rejects.toThrow('is not an origin');
  await expect(setAllowedOrigins(em, application.id, ['*'])).rejects.toThrow('is not an origin');
  await expect(setAllowedOrigins(em, application.id, ['http://a.example'])).rejects.toThrow('only pages on this machine');
  expect(await setAllowedOrigins(em, application.id, ['http://127.0.0.1:8080'])).toEqual(['http://127.0.0.1:8080']);
  expect(await setAllowedOrigins(em, application.id, [])).toEqual([]);
});

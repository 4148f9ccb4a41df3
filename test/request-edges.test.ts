// Contract edges of document 1.2.0: what a malformed or odd request is told, in words that name
// the field or header at fault, and what each token is shown of its application.
import { gzipSync } from 'node:zlib';
import request from 'supertest';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let application: TestApplication;
let all: string;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('request-edges');
  all = await application.token();
});
afterAll(() => harness.close());

const send = (body: string | Buffer, headers: Record<string, string> = {}) => {
  const req = request(harness.app).post('/api/v1/notifications').set('Authorization', `Bearer ${all}`).set('Content-Type', 'application/json');
  for (const [name, value] of Object.entries(headers)) req.set(name, value);
  // As given: superagent would serialize a Buffer to JSON.
  return req.serialize((raw: string | Buffer) => raw as string).send(body);
};

describe('a notification that is not an object', () => {
  test.each(['null', '"hello"', '[]', '3'])('notification: %s is a 422 that names notification and says it must be an object', async (value) => {
    const res = await send(`{"recipients":{"user_ids":["u-1"]},"notification":${value}}`);
    expect(res.status).toBe(422);
    expect(res.body.message).toBe('The notification field must be an object.');
    expect(res.body.errors).toEqual({ notification: ['The notification field must be an object.'] });
  });
});

describe('one rule for every date-time field', () => {
  const range = '0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z in UTC';
  const sendAt = (value: string) => send(JSON.stringify({ recipients: { user_ids: ['u-1'] }, notification: { title: 'Hi' }, options: { send_at: value } }));
  const event = (value: string) =>
    request(harness.app)
      .post('/api/v1/events')
      .set('Authorization', `Bearer ${all}`)
      .send({ event_id: '3d0ca315-aff9-4fc2-be61-3b76b9a2d798', delivery_id: '5a1c7e2b-8d4f-4b6a-9e3c-1f2d3e4a5b6c', installation_id: 'phone', type: 'opened', occurred_at: value });

  test.each([
    ['options.send_at', sendAt],
    ['occurred_at', event],
  ] as const)('%s: a leap second is refused as one, year 0000 and year 10000 in UTC as out of range', async (field, call) => {
    const leap = await call('2030-12-31T23:59:60Z');
    expect(leap.status).toBe(422);
    expect(leap.body.errors).toEqual({
      [field]: [`The ${field} field names a leap second (2030-12-31T23:59:60Z), which Herald cannot store: it keeps UTC without leap seconds; give the second before or after it.`],
    });
    for (const value of ['0000-06-01T00:00:00Z', '9999-12-31T23:00:00-05:00']) {
      const res = await call(value);
      expect(res.status).toBe(422);
      expect(res.body.errors).toEqual({ [field]: [`The ${field} field is out of range: a date-time must name an instant from ${range}, and ${value} does not.`] });
    }
  });
});

describe('body decoding', () => {
  const body = JSON.stringify({ recipients: { user_ids: ['u-1'] }, notification: { title: 'Hi' } });

  test.each(['gzip', 'br', 'deflate', 'zstd'])('a body that is not the %s its Content-Encoding says is a 400 that says so', async (encoding) => {
    const res = await send(body, { 'Content-Encoding': encoding });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: `The Content-Encoding header says ${encoding}, but the body is not valid ${encoding} data.` });
  });

  test('a gzip body cut short is a 400 that says so', async () => {
    const res = await send(gzipSync(body).subarray(0, 12), { 'Content-Encoding': 'gzip' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: 'The Content-Encoding header says gzip, but the body is not valid gzip data.' });
  });

  test('a gzip body that is one is read', async () => {
    expect((await send(gzipSync(body), { 'Content-Encoding': 'gzip' })).status).toBe(202);
  });

  test.each(['compress', 'gzip, br'])('Content-Encoding: %s is a 415 that names the Content-Encoding header', async (encoding) => {
    const res = await send(body, { 'Content-Encoding': encoding });
    expect(res.status).toBe(415);
    expect(res.body).toEqual({ message: `Unsupported Content-Encoding: ${encoding}; expected one of gzip, deflate, br, zstd or identity.` });
  });

  test('a charset other than UTF-8 is a 415 that names the charset', async () => {
    const res = await send(body, { 'Content-Type': 'application/json; charset=latin9' });
    expect(res.status).toBe(415);
    expect(res.body).toEqual({ message: 'Unsupported charset in Content-Type: latin9; expected utf-8.' });
  });
});

describe('an installation id longer than any installation can have', () => {
  const long = 'i'.repeat(256);
  const call = (method: 'get' | 'delete' | 'put' | 'patch', body?: object) =>
    request(harness.app)[method](`/api/v1/installations/${long}`).set('Authorization', `Bearer ${all}`).send(body);

  test.each(['get', 'delete'] as const)('%s is 404: no such installation can exist', async (method) => {
    for (const id of [long, 'a%00b']) {
      const res = await request(harness.app)[method](`/api/v1/installations/${id}`).set('Authorization', `Bearer ${all}`);
      expect({ id, status: res.status, body: res.body }).toEqual({ id, status: 404, body: { message: 'Not Found' } });
    }
  });

  test('255 characters outside the BMP are an id an installation can have', async () => {
    const id = '😀'.repeat(255);
    const path = `/api/v1/installations/${encodeURIComponent(id)}`;
    const put = await request(harness.app).put(path).set('Authorization', `Bearer ${all}`).send({ platform: 'ios', provider: { identifier: 't' } });
    expect(put.status).toBe(201);
    expect((await request(harness.app).get(path).set('Authorization', `Bearer ${all}`)).body.data.installation_id).toBe(id);
  });

  test.each([
    ['put', { platform: 'ios', provider: { identifier: 't' } }],
    ['patch', { user_id: 'u' }],
  ] as const)('%s stays a 422 naming installationId: the id is what the body would create or change', async (method, body) => {
    const res = await call(method, body);
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['installationId']);
  });
});

describe('GET /api/v1/app shows each token what its abilities concern', () => {
  const app = async (abilities: string[]) =>
    (await request(harness.app).get('/api/v1/app').set('Authorization', `Bearer ${await application.token(abilities)}`).expect(200)).body.data;

  test('a mobile app token sees its application, abilities and VAPID public key, not the send policy nor the credentials', async () => {
    const data = await app(['installations:write', 'installations:read', 'events:write']);
    expect(Object.keys(data).sort()).toEqual(['created_at', 'id', 'name', 'token', 'vapid_public_key']);
    expect(data.token.abilities).toEqual(['installations:write', 'installations:read', 'events:write']);
    expect(data.id).toBe(application.id);
  });

  test('notifications:read sees the credentials, not the send policy', async () => {
    const data = await app(['notifications:read']);
    expect(Object.keys(data).sort()).toEqual(['created_at', 'credentials', 'id', 'name', 'token', 'vapid_public_key']);
  });

  test.each([[['notifications:send']], [['*']]])('%j sees the send policy and the credentials', async (abilities) => {
    const data = await app(abilities);
    expect(data.send_policy).toEqual({ quota: 100_000, window_seconds: 60 });
    expect(data.credentials.ios.status).toBe('not_configured');
  });
});

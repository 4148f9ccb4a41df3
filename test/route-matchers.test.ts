// The validator's route matching: each route's pattern compiled once, not on every request
// (src/http/route-matchers.ts), with the same answers as before.
import request from 'supertest';
import { validatorPathToRegexp } from '../src/http/route-matchers.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

// The path-to-regexp the validator resolves, with every compile counted: installed before the app
// is created, so that the memo wraps the count.
const pathToRegexp = validatorPathToRegexp();
const original = pathToRegexp.pathToRegexp;
let compiles = 0;
pathToRegexp.pathToRegexp = (path, options) => {
  compiles++;
  return original(path, options);
};

let harness: Harness;
let application: TestApplication;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('route-matchers');
});

afterAll(async () => {
  await harness.close();
  pathToRegexp.pathToRegexp = original;
});

test('after the first request of a route, reading it again compiles no route pattern', async () => {
  const token = await application.token(['notifications:read']);
  const id = '01a21d9e-d95a-778c-bb91-9311226db3b1';
  const read = () => request(harness.app).get(`/api/v1/notifications/${id}`).set('Authorization', `Bearer ${token}`);
  expect((await read()).status).toBe(404);
  const before = compiles;
  for (let i = 0; i < 5; i++) expect((await read()).status).toBe(404);
  expect(compiles).toBe(before);
});

test('the memo keeps routes apart, and parameters with them', async () => {
  const token = await application.token(['installations:read', 'notifications:read']);
  const get = (path: string) => request(harness.app).get(path).set('Authorization', `Bearer ${token}`);
  const installation = await get('/api/v1/installations/never-registered');
  expect([installation.status, installation.body]).toEqual([404, { message: 'Not Found' }]);
  const list = await get('/api/v1/notifications?limit=1');
  expect(list.status).toBe(200);
  // A malformed notification id is the validator's 4xx for that route's parameter, not another route's.
  const malformed = await get('/api/v1/notifications/not-a-uuid/deliveries');
  expect(malformed.status).toBe(422);
  expect(Object.keys(malformed.body.errors)).toEqual(['notificationId']);
});

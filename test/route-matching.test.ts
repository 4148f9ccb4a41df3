// The validator's route matching: a request finds its own route, and that route's parameters.
import request from 'supertest';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let application: TestApplication;

beforeAll(async () => {
  harness = await startHarness();
  application = await harness.newApplication('route-matchers');
});

afterAll(async () => {
  await harness.close();
});

test('routes are kept apart, and parameters with them', async () => {
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

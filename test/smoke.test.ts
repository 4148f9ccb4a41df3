import request from 'supertest';
import { startHarness, type Harness } from './support/harness.ts';

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

test('a registered installation can be read back', async () => {
  const application = await harness.newApplication();
  const token = await application.token();
  const put = await request(harness.app)
    .put('/api/v1/installations/phone-1')
    .set('Authorization', `Bearer ${token}`)
    .send({ platform: 'ios', provider: { identifier: 'abc' }, user_id: 'u1' });
  expect(put.status).toBe(201);
  const get = await request(harness.app).get('/api/v1/installations/phone-1').set('Authorization', `Bearer ${token}`);
  expect(get.status).toBe(200);
  expect(get.body.data.user_id).toBe('u1');
});

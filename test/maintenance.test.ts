import request from 'supertest';
import { deleteExpiredIdempotencyKeys } from '../src/domain/notifications.ts';
import { startHarness, type Harness } from './support/harness.ts';

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

test('idempotency keys older than 24 hours are deleted, younger ones kept', async () => {
  const application = await harness.newApplication();
  const token = await application.token(['notifications:send']);
  const send = (key: string) =>
    request(harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${token}`)
      .set('Idempotency-Key', key)
      .send({ recipients: { user_ids: ['u1'] }, notification: { title: 'hi' } })
      .expect(202);
  await send('old');
  await send('fresh');
  const em = harness.orm.em.fork();
  await em.execute(
    `update idempotency_keys set created_at = now() - interval '24 hours 1 minute' where application_id = ? and key = 'old'`,
    [application.id],
  );

  await deleteExpiredIdempotencyKeys(harness.orm.em.fork());

  const keys = await em.execute<{ key: string }[]>('select key from idempotency_keys where application_id = ?', [
    application.id,
  ]);
  expect(keys.map((row) => row.key)).toEqual(['fresh']);
});

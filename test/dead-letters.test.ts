// Jobs that fail for good still close their notification: nothing stays queued or pending forever.
import { failFanout } from '../src/worker/fanout-job.ts';
import { failDeliver } from '../src/worker/jobs.ts';
import { insertDelivery } from './support/deliveries.ts';
import { startHarness, type Harness } from './support/harness.ts';
import request from 'supertest';

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

async function sent() {
  const application = await harness.newApplication();
  const token = await application.token(['*']);
  const res = await request(harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${token}`)
    .send({ recipients: { user_ids: ['u1'] }, notification: { title: 'Hi' } })
    .expect(202);
  const read = async () =>
    (await request(harness.app).get(`/api/v1/notifications/${res.body.data.id}`).set('Authorization', `Bearer ${token}`).expect(200)).body.data;
  return { applicationId: application.id, notificationId: res.body.data.id as string, read };
}

test('a fanout that failed all its retries fails the notification', async () => {
  const { applicationId, notificationId, read } = await sent();
  await failFanout(harness.orm.em, { webhooks: harness.webhooks, logger: harness.logger }, { applicationId, notificationId });
  const notification = await read();
  expect(notification.status).toBe('failed');
  expect(notification.completed_at).not.toBeNull();
});

test('a deliver batch that failed all its retries fails its pending pushes as internal_error and closes the notification', async () => {
  const { applicationId, notificationId, read } = await sent();
  await harness.orm.em.fork().execute(`update notifications set status = 'processing' where id = ?`, [notificationId]);
  const delivery = (clientInstallationId: string, state: 'pending' | 'accepted') =>
    insertDelivery(harness.orm, { applicationId, notificationId, installationRowId: null, clientInstallationId, userId: 'u1', state });
  const accepted = await delivery('done', 'accepted');
  const stuck = await delivery('stuck', 'pending');

  await failDeliver(harness.orm.em, { webhooks: harness.webhooks, logger: harness.logger }, { applicationId, platform: 'ios', deliveryIds: [accepted, stuck] });

  const notification = await read();
  expect(notification.status).toBe('partial');
  expect(notification.statistics).toMatchObject({ accepted: 1, failed: 1 });
  const rows = await harness.orm.em
    .fork()
    .execute<{ id: string; state: string; reason: string | null }[]>('select id, state, reason from deliveries where notification_id = ?', [notificationId]);
  expect(Object.fromEntries(rows.map((row) => [row.id, [row.state, row.reason]]))).toEqual({
    [accepted]: ['accepted', null],
    [stuck]: ['failed', 'internal_error'],
  });
});

// What a webhook says happened, and for how long it keeps trying: a cancel is its own event, and a
// failing endpoint is tried until the retry window really ends (3 s here, 24 h by default).
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { addWebhookEndpoint } from '../src/domain/webhooks.ts';
import { startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { startReceiver, waitFor, type Receiver } from './support/receiver.ts';

const windowSeconds = 3;
let pipeline: Pipeline;
let receiver: Receiver;

beforeAll(async () => {
  pipeline = await startPipeline({ webhooks: { retryBaseSeconds: 1, timeoutSeconds: 3, windowSeconds } });
  receiver = await startReceiver();
}, 60_000);
afterAll(async () => {
  await pipeline.close();
  await receiver.close();
});

async function endpoint(app: PipelineApplication, path: string, events: string[]): Promise<string> {
  const { endpoint } = await addWebhookEndpoint(
    pipeline.harness.orm.em.fork(),
    { applicationId: app.id, url: `${receiver.url}${path}`, events },
    pipeline.credentialsKey,
    { allowPrivate: true },
  );
  return endpoint.id;
}

const eventTypes = (applicationId: string) =>
  pipeline.harness.orm.em
    .fork()
    .execute<{ type: string }[]>('select type from webhook_events where application_id = ? order by id', [applicationId])
    .then((rows) => rows.map((row) => row.type));

test('a cancel sends notification.cancelled with the cancelled notification, and no notification.completed', async () => {
  const app = await pipeline.newApplication();
  await endpoint(app, '/both', ['notification.completed', 'notification.cancelled']);
  await endpoint(app, '/completed-only', ['notification.completed']);
  const sendAt = new Date(Date.now() + 3_600_000).toISOString();
  const id = await app.send({ recipients: { user_ids: [`later-${randomUUID()}`] }, notification: { title: 'Later' }, options: { send_at: sendAt } });
  await request(pipeline.harness.app).post(`/api/v1/notifications/${id}/cancel`).set('Authorization', `Bearer ${app.server}`).expect(200);

  const [received] = await waitFor(() => receiver.at('/both'), (requests) => requests.length > 0);
  const event = JSON.parse(received.body);
  expect(event).toMatchObject({ type: 'notification.cancelled', data: { notification: { id, status: 'cancelled' } } });
  expect(event.data.notification.completed_at).not.toBeNull();
  // A send that ends by itself still says notification.completed.
  await app.send({ recipients: { user_ids: [`nobody-${randomUUID()}`] }, notification: { title: 'Now' } });
  await waitFor(() => receiver.at('/completed-only'), (requests) => requests.length > 0);
  expect(await eventTypes(app.id)).toEqual(['notification.cancelled', 'notification.completed']);
  expect(receiver.at('/completed-only').map((request) => JSON.parse(request.body).type)).toEqual(['notification.completed']);
});

test('a failing endpoint is tried until the retry window ends, not only while the next backoff step fits in it', async () => {
  const app = await pipeline.newApplication();
  const endpointId = await endpoint(app, '/failing', ['notification.completed']);
  receiver.answer('/failing', { status: 500 });
  await app.send({ recipients: { user_ids: [`nobody-${randomUUID()}`] }, notification: { title: 'Hi' } });

  const [delivery] = await waitFor(
    () => pipeline.harness.orm.em.fork().execute<{ state: string; reason: string | null }[]>('select state, reason from webhook_deliveries where endpoint_id = ?', [endpointId]),
    (rows) => rows.length === 1 && rows[0].state !== 'pending',
    30_000,
  );
  expect(delivery).toEqual({ state: 'failed', reason: 'expired' });
  const attempts = receiver.at('/failing');
  const createdAt = Date.parse(JSON.parse(attempts[0].body).created_at);
  // The last attempt is made when the window ends (backoff 1 s, 2 s, … would otherwise stop short of it).
  expect(attempts.at(-1)!.at).toBeGreaterThanOrEqual(createdAt + windowSeconds * 1000);
  expect(attempts.at(-1)!.at).toBeLessThan(createdAt + windowSeconds * 1000 + 2_500);
});

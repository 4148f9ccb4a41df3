// Webhooks end to end: the pipeline (API, workers, provider simulators) on real Postgres sends
// signed events to a real HTTP receiver on this machine, and the SDK's verifyWebhook checks them.
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { createHerald, HeraldWebhookError, verifyWebhook, type WebhookDelivery, type WebhookEvent } from '../sdk/src/index.ts';
import { addWebhookEndpoint, rotateWebhookSecret } from '../src/domain/webhooks.ts';
import { ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { startReceiver, waitFor, type Receiver, type Received } from './support/receiver.ts';

let pipeline: Pipeline;
let receiver: Receiver;

beforeAll(async () => {
  // Retries 0.2 s, 0.4 s … apart; a request unanswered after 3 s is a failed attempt (1 s was
  // once too short under the whole suite on a loaded machine: an answer made at once missed it).
  pipeline = await startPipeline({ webhooks: { retryBaseSeconds: 0.2, timeoutSeconds: 3 } });
  receiver = await startReceiver();
}, 60_000);
afterAll(async () => {
  await pipeline.close();
  await receiver.close();
});

type Endpoint = { id: string; secret: string; path: string };

async function endpoint(app: PipelineApplication, path: string, events: string[]): Promise<Endpoint> {
  const { endpoint, secret } = await addWebhookEndpoint(
    pipeline.harness.orm.em.fork(),
    { applicationId: app.id, url: `${receiver.url}${path}`, events },
    pipeline.credentialsKey,
    { allowPrivate: true },
  );
  return { id: endpoint.id, secret, path };
}

const verified = (request: Received, secret: string) => verifyWebhook(request.body, request.headers['herald-signature'] as string, secret);

const api = () => request(pipeline.harness.app);
const get = (token: string, path: string) => api().get(path).set('Authorization', `Bearer ${token}`);

async function report(app: PipelineApplication, deliveryId: string, installationId: string, eventId: string = randomUUID()) {
  return api()
    .post('/api/v1/events')
    .set('Authorization', `Bearer ${app.client}`)
    .send({ event_id: eventId, delivery_id: deliveryId, installation_id: installationId, type: 'opened', occurred_at: '2026-11-02T10:03:41.512Z' });
}

/** A send to a user without installations: the notification completes at once (one notification.completed). */
const sendToNobody = (app: PipelineApplication) => app.send({ recipients: { user_ids: [`nobody-${randomUUID()}`] }, notification: { title: 'Hi' } });

async function webhookRows(applicationId: string) {
  return pipeline.harness.orm.em.fork().execute<{ id: string; type: string }[]>('select id, type from webhook_events where application_id = ? order by id', [applicationId]);
}

test('each event type arrives signed, with its data; an endpoint gets only the types it takes', async () => {
  pipeline.apns.setRules([{ prefix: 'wh-dead-', reason: 'Unregistered' }]);
  const app = await pipeline.newApplication();
  const all = await endpoint(app, '/all', ['notification.completed', 'delivery.failed', 'installation.invalidated', 'event.reported']);
  const completedOnly = await endpoint(app, '/completed', ['notification.completed']);
  await app.register('wh-phone', ios('wh-live-1', 'wendy'));
  await app.register('wh-old-phone', ios('wh-dead-1', 'wendy'));

  const id = await app.send({ recipients: { user_ids: ['wendy'] }, notification: { title: 'Your order shipped' }, data: { order: '1042' } });
  const notification = await app.settled(id);
  expect(notification.status).toBe('partial');
  const accepted = (await app.deliveries(id)).find((delivery) => delivery.installation_id === 'wh-phone')!;
  expect((await report(app, accepted.id, 'wh-phone')).status).toBe(201);

  const requests = await waitFor(() => receiver.at('/all'), (got) => got.length >= 4);
  const events = new Map<string, WebhookEvent>();
  for (const got of requests) {
    const event = await verified(got, all.secret);
    events.set(event.type, event);
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['user-agent']).toMatch(/^Herald-Webhooks\//);
    expect(got.headers['herald-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
  }
  expect([...events.keys()].sort()).toEqual(['delivery.failed', 'event.reported', 'installation.invalidated', 'notification.completed']);

  const failed = events.get('delivery.failed')!;
  expect(failed.type === 'delivery.failed' && failed.data).toMatchObject({
    notification_id: id,
    delivery: { installation_id: 'wh-old-phone', user_id: 'wendy', platform: 'ios', state: 'failed', reason: 'Unregistered', attempts: 1 },
  });
  const invalidated = events.get('installation.invalidated')!;
  expect(invalidated.type === 'installation.invalidated' && invalidated.data.installation).toMatchObject({
    installation_id: 'wh-old-phone',
    user_id: 'wendy',
    status: 'invalid',
    invalid_reason: 'Unregistered',
  });
  const completed = events.get('notification.completed')!;
  expect(completed.type === 'notification.completed' && completed.data.notification).toMatchObject({
    id,
    status: 'partial',
    data: { order: '1042' },
    statistics: { users: 1, installations: 2, accepted: 1, failed: 1 },
  });
  const reported = events.get('event.reported')!;
  expect(reported.type === 'event.reported' && reported.data).toMatchObject({
    notification_id: id,
    user_id: 'wendy',
    event: { delivery_id: accepted.id, installation_id: 'wh-phone', type: 'opened', occurred_at: '2026-11-02T10:03:41.512Z' },
  });
  // The notification's delivery.failed was made before its notification.completed (ids are time-ordered).
  expect(failed.id < completed.id).toBe(true);

  // The other endpoint took only notification.completed: the same event, the same id.
  const other = await waitFor(() => receiver.at('/completed'), (got) => got.length >= 1);
  expect(other).toHaveLength(1);
  expect(await verified(other[0], completedOnly.secret)).toEqual(completed);
  // Signed with each endpoint's own secret.
  await expect(verified(other[0], all.secret)).rejects.toThrow(HeraldWebhookError);

  // A replay of the event (200) is not a new event: no second event.reported is made.
  const replayed = await report(app, accepted.id, 'wh-phone', (reported.type === 'event.reported' && reported.data.event.event_id) || '');
  expect(replayed.status).toBe(200);
  expect((await webhookRows(app.id)).map((row) => row.type).sort()).toEqual([
    'delivery.failed',
    'event.reported',
    'installation.invalidated',
    'notification.completed',
  ]);

  // The delivery log and the endpoint's last attempt, through the API.
  const log = await get(app.server, `/api/v1/webhooks/${all.id}/deliveries`).expect(200);
  expect(log.body.data).toHaveLength(4);
  for (const delivery of log.body.data) expect(delivery).toMatchObject({ state: 'succeeded', attempts: 1, status_code: 200, error: null, response_excerpt: 'ok' });
  const listed = await get(app.server, '/api/v1/webhooks').expect(200);
  expect(listed.body.data.map((row: { id: string }) => row.id)).toEqual([all.id, completedOnly.id]);
  expect(listed.body.data[0]).toMatchObject({ status: 'enabled', failing_since: null, last_attempt: { outcome: 'succeeded', status_code: 200, attempt: 1 } });
  expect(JSON.stringify(listed.body)).not.toContain('whsec_');
});

test('an application without endpoints makes no webhook rows, even for failures', async () => {
  pipeline.apns.setRules([{ prefix: 'wh-dead-', reason: 'Unregistered' }]);
  const app = await pipeline.newApplication();
  await app.register('quiet-old', ios('wh-dead-quiet', 'quinn'));
  const notification = await app.settled(await app.send({ recipients: { user_ids: ['quinn'] }, notification: { title: 'Hi' } }));
  expect(notification.statistics).toMatchObject({ failed: 1 });
  expect(await webhookRows(app.id)).toEqual([]);
});

test('a 500 and a timeout are retried with the same event id until the endpoint answers 2xx', async () => {
  const app = await pipeline.newApplication();
  const flaky = await endpoint(app, '/flaky', ['notification.completed']);
  receiver.answer('/flaky', { status: 500, body: 'database down\n' }, { delayMs: 3_500 }, { status: 204 });
  await sendToNobody(app);

  const requests = await waitFor(() => receiver.at('/flaky'), (got) => got.length >= 3);
  const events = await Promise.all(requests.map((got) => verified(got, flaky.secret)));
  expect(new Set(events.map((event) => event.id)).size).toBe(1);
  // Backoff: each attempt after the one before, never at once.
  expect(requests[1].at - requests[0].at).toBeGreaterThanOrEqual(150);

  const [delivery] = (
    await waitFor(
      async () => (await get(app.server, `/api/v1/webhooks/${flaky.id}/deliveries`).expect(200)).body.data,
      (rows: WebhookDelivery[]) => rows[0]?.state === 'succeeded',
    )
  );
  expect(delivery).toMatchObject({ event_id: events[0].id, event_type: 'notification.completed', attempts: 3, status_code: 204, error: null, reason: null });
  const [listed] = (await get(app.server, '/api/v1/webhooks').expect(200)).body.data;
  expect(listed).toMatchObject({ failing_since: null, last_attempt: { outcome: 'succeeded', attempt: 3, status_code: 204 } });
});

test('a failed attempt is in the log with its status, error and the start of the answer, and its next attempt', async () => {
  const app = await pipeline.newApplication();
  const down = await endpoint(app, '/down', ['notification.completed']);
  receiver.answer('/down', { status: 503, body: `upstream unavailable${' x'.repeat(500)}` }, { delayMs: 60_000 });
  await sendToNobody(app);

  const [delivery] = await waitFor(
    async () => (await get(app.server, `/api/v1/webhooks/${down.id}/deliveries`).expect(200)).body.data,
    (rows: WebhookDelivery[]) => rows[0]?.attempts >= 1,
  );
  expect(delivery).toMatchObject({ state: 'pending', status_code: 503, error: 'HTTP 503', completed_at: null });
  expect(delivery.response_excerpt).toMatch(/^upstream unavailable x x/);
  expect(delivery.response_excerpt).toHaveLength(200);
  expect(new Date(delivery.next_attempt_at!).getTime()).toBeGreaterThan(new Date(delivery.last_attempt_at!).getTime());
  const [listed] = (await get(app.server, '/api/v1/webhooks').expect(200)).body.data;
  expect(listed).toMatchObject({ status: 'enabled', last_attempt: { outcome: 'failed', status_code: 503, error: 'HTTP 503' } });
  expect(listed.failing_since).not.toBeNull();
  await pipeline.harness.orm.em.fork().execute('delete from webhook_endpoints where id = ?', [down.id]);
});

test('a redirect is not followed: a 3xx is a failed attempt, and the place it points to gets nothing', async () => {
  const app = await pipeline.newApplication();
  const moved = await endpoint(app, '/moved', ['notification.completed']);
  receiver.answer('/moved', { status: 302, location: `${receiver.url}/elsewhere` });
  await sendToNobody(app);

  const [delivery] = await waitFor(
    async () => (await get(app.server, `/api/v1/webhooks/${moved.id}/deliveries`).expect(200)).body.data,
    (rows: WebhookDelivery[]) => rows[0]?.attempts >= 2,
  );
  expect(delivery).toMatchObject({ state: 'pending', status_code: 302, error: 'redirect not followed (HTTP 302)' });
  expect(receiver.at('/elsewhere')).toEqual([]);
  await pipeline.harness.orm.em.fork().execute('delete from webhook_endpoints where id = ?', [moved.id]);
});

test('after a secret rotation requests carry both signatures until the previous secret expires; without a grace period only the new one', async () => {
  const app = await pipeline.newApplication();
  const rotated = await endpoint(app, '/rotated', ['notification.completed']);
  const em = pipeline.harness.orm.em.fork();
  const { secret: second, previousSecretExpiresAt } = (await rotateWebhookSecret(em, rotated.id, pipeline.credentialsKey, 24))!;
  expect(previousSecretExpiresAt!.getTime() - Date.now()).toBeGreaterThan(23.9 * 3_600_000);
  await sendToNobody(app);

  const [both] = await waitFor(() => receiver.at('/rotated'), (got) => got.length >= 1);
  expect(both.headers['herald-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
  // A receiver still on the old secret and one already on the new one both accept it.
  const event = await verified(both, rotated.secret);
  expect(await verified(both, second)).toEqual(event);
  const [listed] = (await get(app.server, '/api/v1/webhooks').expect(200)).body.data;
  expect(listed.previous_secret_expires_at).toBe(previousSecretExpiresAt!.toISOString());

  const { secret: third } = (await rotateWebhookSecret(pipeline.harness.orm.em.fork(), rotated.id, pipeline.credentialsKey, 0))!;
  await sendToNobody(app);
  const [, only] = await waitFor(() => receiver.at('/rotated'), (got) => got.length >= 2);
  expect(only.headers['herald-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
  expect((await verified(only, third)).type).toBe('notification.completed');
  await expect(verified(only, second)).rejects.toThrow('No signature of the Herald-Signature header matches');
  expect((await get(app.server, '/api/v1/webhooks').expect(200)).body.data[0].previous_secret_expires_at).toBeNull();
});

describe('reading endpoints through the API', () => {
  test('another application sees none of them; a token without notifications:read is refused', async () => {
    const app = await pipeline.newApplication();
    const own = await endpoint(app, '/own', ['delivery.failed']);
    const stranger = await pipeline.newApplication();
    expect((await get(stranger.server, '/api/v1/webhooks').expect(200)).body).toEqual({ data: [] });
    expect((await get(stranger.server, `/api/v1/webhooks/${own.id}/deliveries`)).status).toBe(404);
    expect((await get(app.server, `/api/v1/webhooks/${randomUUID()}/deliveries`)).status).toBe(404);
    expect((await get(app.client, '/api/v1/webhooks')).status).toBe(403);
    const invalid = await get(app.server, `/api/v1/webhooks/${own.id}/deliveries?state=lost`);
    expect(invalid.status).toBe(422);
    expect(invalid.body.errors).toHaveProperty('state');
  });

  test('the delivery log pages newest event first, and the SDK walks it', async () => {
    const app = await pipeline.newApplication();
    const paged = await endpoint(app, '/paged', ['notification.completed']);
    for (let i = 0; i < 3; i++) await sendToNobody(app);
    await waitFor(() => receiver.at('/paged'), (got) => got.length >= 3);
    const eventIds = (await webhookRows(app.id)).map((row) => row.id).reverse();

    const first = await get(app.server, `/api/v1/webhooks/${paged.id}/deliveries?limit=2`).expect(200);
    expect(first.body.data.map((row: { event_id: string }) => row.event_id)).toEqual(eventIds.slice(0, 2));
    const second = await get(app.server, `/api/v1/webhooks/${paged.id}/deliveries?limit=2&cursor=${first.body.meta.next_cursor}`).expect(200);
    expect(second.body.data.map((row: { event_id: string }) => row.event_id)).toEqual(eventIds.slice(2));
    expect(second.body.meta.next_cursor).toBeNull();

    const server: Server = await new Promise((resolve) => {
      const listening = pipeline.harness.app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    try {
      const herald = createHerald({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: app.server });
      expect((await herald.listWebhooks()).map((row) => row.url)).toEqual([`${receiver.url}/paged`]);
      const walked: string[] = [];
      for await (const delivery of herald.webhookDeliveries(paged.id, { limit: 1, state: 'succeeded' })) walked.push(delivery.event_id);
      expect(walked).toEqual(eventIds);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

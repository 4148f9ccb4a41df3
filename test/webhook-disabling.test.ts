// An endpoint that fails every attempt for the whole retry window (3 s here, 24 h by default) is
// disabled and says so; its events are given up, and it gets no new ones until it is enabled again.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import request from 'supertest';
import { addWebhookEndpoint, enableWebhookEndpoint } from '../src/domain/webhooks.ts';
import { databaseUrl } from './support/harness.ts';
import { startPipeline, type Pipeline } from './support/fanout.ts';
import { startReceiver, waitFor, type Receiver } from './support/receiver.ts';

const run = promisify(execFile);
let pipeline: Pipeline;
let receiver: Receiver;

beforeAll(async () => {
  pipeline = await startPipeline({ webhooks: { retryBaseSeconds: 0.2, timeoutSeconds: 1, windowSeconds: 3 } });
  receiver = await startReceiver();
}, 60_000);
afterAll(async () => {
  await pipeline.close();
  await receiver.close();
});

test('failing for the whole window disables the endpoint: the API and the CLI say since when and why; enabling it sends again', async () => {
  const app = await pipeline.newApplication();
  const { endpoint } = await addWebhookEndpoint(
    pipeline.harness.orm.em.fork(),
    { applicationId: app.id, url: `${receiver.url}/failing`, events: ['notification.completed'] },
    pipeline.credentialsKey,
    { allowPrivate: true },
  );
  receiver.answer('/failing', { status: 500, body: 'boom' });
  const listed = async () => (await request(pipeline.harness.app).get('/api/v1/webhooks').set('Authorization', `Bearer ${app.server}`).expect(200)).body.data[0];
  const sendToNobody = () => app.send({ recipients: { user_ids: [`nobody-${randomUUID()}`] }, notification: { title: 'Hi' } });

  // Traffic goes on while every attempt fails.
  const startedAt = Date.now();
  const disabled = await waitFor(
    async () => {
      await sendToNobody();
      await new Promise((resolve) => setTimeout(resolve, 200));
      return listed();
    },
    (view) => view.status === 'disabled',
    30_000,
  );
  expect(Date.now() - startedAt).toBeGreaterThanOrEqual(3_000);
  expect(disabled.disabled_reason).toBe('Every delivery failed for 3 s; the last: HTTP 500.');
  expect(new Date(disabled.disabled_at).getTime() - new Date(disabled.failing_since).getTime()).toBeGreaterThanOrEqual(3_000);
  expect(disabled.last_attempt).toMatchObject({ outcome: 'failed', status_code: 500, error: 'HTTP 500' });

  const cli = await run(process.execPath, ['src/cli/main.ts', 'webhooks', 'list', '--app', app.id], {
    env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl(), LOG_LEVEL: 'warn' },
  });
  expect(cli.stdout).toContain(`${endpoint.id}  app ${app.id}  DISABLED since ${disabled.disabled_at}: Every delivery failed for 3 s; the last: HTTP 500.`);

  // Nothing stays pending: what was left is given up, as expired or because the endpoint is disabled.
  const ended = await waitFor(
    () => pipeline.harness.orm.em.fork().execute<{ state: string; reason: string | null }[]>('select state, reason from webhook_deliveries where endpoint_id = ?', [endpoint.id]),
    (rows) => rows.every((row) => row.state !== 'pending'),
  );
  expect(ended.length).toBeGreaterThan(1);
  for (const row of ended) expect([row.state, ['expired', 'endpoint_disabled'].includes(row.reason!)]).toEqual(['failed', true]);
  // A disabled endpoint gets no new events.
  const events = async () => (await pipeline.harness.orm.em.fork().execute<{ count: number }[]>('select count(*)::int as count from webhook_events where application_id = ?', [app.id]))[0].count;
  const before = await events();
  await app.settled(await sendToNobody());
  expect(await events()).toBe(before);

  await enableWebhookEndpoint(pipeline.harness.orm.em.fork(), endpoint.id);
  receiver.answer('/failing', { status: 200 });
  const seen = receiver.at('/failing').length;
  await sendToNobody();
  await waitFor(() => receiver.at('/failing').length, (count) => count > seen);
  const enabled = await waitFor(listed, (view) => view.last_attempt?.outcome === 'succeeded');
  expect(enabled).toMatchObject({ status: 'enabled', disabled_at: null, disabled_reason: null, failing_since: null });
}, 60_000);

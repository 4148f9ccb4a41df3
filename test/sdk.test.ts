// The generated functions of the SDK (sdk/src/generated, exported from the package root) against
// the real server on a real port: one full flow per resource.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import {
  createClient,
  type Client,
  deleteInstallation,
  getApp,
  getInstallation,
  listInstallations,
  getNotification,
  listNotifications,
  registerInstallation,
  reportEvent,
  sendNotification,
  updateInstallation,
  type Event,
  type Installation,
  type Notification,
  type NotificationSend,
} from '../sdk/src/index.ts';
import { insertDelivery } from './support/deliveries.ts';
import { startHarness, type Harness, type TestApplication } from './support/harness.ts';

let harness: Harness;
let server: Server;
let baseUrl: string;
let application: TestApplication;
let client: Client;

beforeAll(async () => {
  harness = await startHarness();
  server = await new Promise<Server>((resolve) => {
    const listening = harness.app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  application = await harness.newApplication('sdk');
  const token = await application.token();
  client = createClient({ baseUrl, auth: () => token });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  await harness.close();
});

test('an installation is registered, replaced, read, updated and deleted through the SDK', async () => {
  const installationId = `sdk-phone-${randomUUID()}`;
  const created = await registerInstallation({
    client,
    path: { installationId },
    body: {
      platform: 'ios',
      provider: { identifier: 'apns-token-1' },
      permission: 'authorized',
      user_id: 'sdk-user',
      device: { app_version: '3.2.0', os_version: '18.1', model: 'iPhone16,2', locale: 'en_GB', timezone: 'Europe/London' },
    },
  });
  expect(created.error).toBeUndefined();
  expect(created.response?.status).toBe(201);
  const installation: Installation = created.data!.data;
  expect(installation).toMatchObject({
    installation_id: installationId,
    platform: 'ios',
    provider_identifier_type: 'apns_token',
    status: 'active',
    permission: 'authorized',
    user_id: 'sdk-user',
    device: { app_version: '3.2.0', os_version: '18.1', model: 'iPhone16,2', locale: 'en_GB', timezone: 'Europe/London' },
    invalidated_at: null,
    invalid_reason: null,
  });

  const replaced = await registerInstallation({
    client,
    path: { installationId },
    body: { platform: 'ios', provider: { identifier: 'apns-token-2' }, permission: 'authorized' },
  });
  expect(replaced.response?.status).toBe(200);
  expect(replaced.data!.data.id).toBe(installation.id);
  expect(replaced.data!.data.user_id).toBeNull();
  expect(replaced.data!.data.registered_at).toBe(installation.registered_at);

  const read = await getInstallation({ client, path: { installationId } });
  expect(read.response?.status).toBe(200);
  expect(read.data!.data).toEqual(replaced.data!.data);

  const updated = await updateInstallation({ client, path: { installationId }, body: { user_id: 'sdk-user-2', permission: 'denied' } });
  expect(updated.response?.status).toBe(200);
  const afterUpdate: Installation = updated.data!.data;
  expect(afterUpdate.user_id).toBe('sdk-user-2');
  expect(afterUpdate.permission).toBe('denied');

  const deleted = await deleteInstallation({ client, path: { installationId } });
  expect(deleted.error).toBeUndefined();
  expect(deleted.response?.status).toBe(204);

  const gone = await getInstallation({ client, path: { installationId } });
  expect(gone.response?.status).toBe(404);
  expect(gone.data).toBeUndefined();
  expect(gone.error).toEqual({ message: 'Not Found' });
});

test("a user's installations are listed a page at a time through the SDK, whatever characters the user id holds", async () => {
  const userId = `sdk+user & co 100% ${randomUUID()}`;
  const ids = [`sdk-list-1-${randomUUID()}`, `sdk-list-2-${randomUUID()}`, `sdk-list-3-${randomUUID()}`];
  for (const installationId of ids) {
    const put = await registerInstallation({ client, path: { installationId }, body: { platform: 'android', provider: { identifier: installationId }, user_id: userId } });
    expect(put.response?.status).toBe(201);
  }
  const first = await listInstallations({ client, query: { user_id: userId, limit: 2 } });
  expect(first.response?.status).toBe(200);
  expect(first.data!.data.map((installation: Installation) => installation.installation_id)).toEqual([ids[2], ids[1]]);
  const next = await listInstallations({ client, query: { user_id: userId, limit: 2, cursor: first.data!.meta.next_cursor! } });
  expect(next.data).toEqual({ data: [expect.objectContaining({ installation_id: ids[0], user_id: userId })], meta: { next_cursor: null } });

  const missing = await listInstallations({ client, query: { user_id: '' } });
  expect(missing.response?.status).toBe(422);
  expect(missing.error).toEqual({ message: 'The user_id field must not be empty.', errors: { user_id: ['The user_id field must not be empty.'] } });
});

test("the token's application is read through the SDK", async () => {
  const read = await getApp({ client });
  expect(read.response?.status).toBe(200);
  expect(read.data!.data).toMatchObject({ id: application.id, name: 'sdk', token: { name: 'test', abilities: ['*'] } });
});

test('a notification is sent, replayed, read and listed through the SDK', async () => {
  const body: NotificationSend = {
    recipients: { user_ids: ['sdk-user', 'sdk-user-2'] },
    notification: { title: 'From the SDK', body: 'Hello', action_url: 'myapp://inbox' },
    data: { source: 'sdk' },
    options: { ttl: 60, priority: 'high' },
  };
  const key = `sdk-${randomUUID()}`;
  const sent = await sendNotification({ client, headers: { 'Idempotency-Key': key }, body });
  expect(sent.error).toBeUndefined();
  expect(sent.response?.status).toBe(202);
  expect(sent.data!.meta.accepted).toBe(true);
  const notification: Notification = sent.data!.data;
  expect(notification).toMatchObject({
    status: 'queued',
    notification: { title: 'From the SDK', body: 'Hello', image_url: null, action_url: 'myapp://inbox', localizations: {} },
    data: { source: 'sdk' },
    options: { ttl: 60, priority: 'high' },
    target_users: 2,
    statistics: { users: 0, installations: 0, accepted: 0, received: 0, displayed: 0, opened: 0, failed: 0, skipped: 0 },
    processing_started_at: null,
    completed_at: null,
  });

  const replay = await sendNotification({ client, headers: { 'Idempotency-Key': key }, body });
  expect(replay.response?.status).toBe(202);
  expect(replay.data!.meta.accepted).toBe(false);
  expect(replay.data!.data.id).toBe(notification.id);

  const refused = await sendNotification({ client, body: { ...body, recipients: { user_ids: [] } } });
  expect(refused.response?.status).toBe(422);
  expect(refused.error!.errors).toHaveProperty(['recipients.user_ids']);

  const read = await getNotification({ client, path: { notificationId: notification.id } });
  expect(read.response?.status).toBe(200);
  expect(read.data!.data).toEqual(notification);

  const second = await sendNotification({ client, body: { ...body, data: { source: 'sdk', n: 2 } } });
  const firstPage = await listNotifications({ client, query: { limit: 1 } });
  expect(firstPage.response?.status).toBe(200);
  expect(firstPage.data!.data.map((n) => n.id)).toEqual([second.data!.data.id]);
  const cursor = firstPage.data!.meta.next_cursor;
  expect(cursor).toEqual(expect.any(String));
  const secondPage = await listNotifications({ client, query: { limit: 1, cursor: cursor! } });
  expect(secondPage.data!.data.map((n) => n.id)).toEqual([notification.id]);
  expect(secondPage.data!.meta.next_cursor).toBeNull();
});

test('an event is reported, replayed and refused on conflict through the SDK', async () => {
  const installationId = `sdk-event-phone-${randomUUID()}`;
  const registered = await registerInstallation({
    client,
    path: { installationId },
    body: { platform: 'android', provider: { identifier: 'fcm-token' }, user_id: 'event-user' },
  });
  expect(registered.response?.status).toBe(201);
  expect(registered.data!.data.provider_identifier_type).toBe('fcm_token');
  const sent = await sendNotification({ client, body: { recipients: { user_ids: ['event-user'] }, notification: { title: 'Hi' } } });
  const notificationId = sent.data!.data.id;
  const deliveryId = await insertDelivery(harness.orm, {
    applicationId: application.id,
    notificationId,
    installationRowId: registered.data!.data.id,
    clientInstallationId: installationId,
    userId: 'event-user',
    platform: 'android',
    state: 'accepted',
  });

  const body = {
    event_id: randomUUID(),
    delivery_id: deliveryId,
    installation_id: installationId,
    type: 'opened' as const,
    occurred_at: '2026-11-02T10:03:41.512Z',
  };
  const recorded = await reportEvent({ client, body });
  expect(recorded.error).toBeUndefined();
  expect(recorded.response?.status).toBe(201);
  const event: Event = recorded.data!.data;
  expect(event).toEqual({ ...body, received_at: expect.any(String) });

  const replayed = await reportEvent({ client, body });
  expect(replayed.response?.status).toBe(200);
  expect(replayed.data!.data).toEqual(event);

  const conflicting = await reportEvent({ client, body: { ...body, type: 'dismissed' } });
  expect(conflicting.response?.status).toBe(409);
  expect(conflicting.error).toEqual({ message: expect.any(String) });

  const notification = await getNotification({ client, path: { notificationId } });
  expect(notification.data!.data.statistics).toMatchObject({ users: 1, installations: 1, accepted: 1, opened: 1, received: 0 });
});

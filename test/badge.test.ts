// options.badge is bounded only below (as the interface spec has it): a badge past what FCM's
// 32-bit notification_count holds is accepted, pushed as 2147483647 on both platforms, and
// recorded on each delivery like a cut.
import { randomUUID } from 'node:crypto';
import { android, ios, startPipeline, type Pipeline } from './support/fanout.ts';

let pipeline: Pipeline;

beforeAll(async () => {
  pipeline = await startPipeline();
}, 60_000);
afterAll(() => pipeline.close());

const own = (object: unknown, key: string) => Object.getOwnPropertyDescriptor(object, key)?.value;

test.each([
  ['1e300', 2_147_483_647],
  ['2147483648', 2_147_483_647],
  ['2147483647', null],
])('a badge of %s is pushed within range on APNs and FCM, and the delivery says so', async (given, clamped) => {
  const app = await pipeline.newApplication();
  const user = `badge-${randomUUID()}`;
  const apnsToken = `${randomUUID().replaceAll('-', '')}${'c3'.repeat(16)}`;
  const fcmToken = `fcm-${randomUUID()}`;
  await app.register(`${user}-iphone`, ios(apnsToken, user));
  await app.register(`${user}-pixel`, android(fcmToken, user));
  // Written as a client writes it: JSON.stringify would spell 1e300 as 1e+300, which is the same number.
  const id = await app.send(JSON.parse(`{"recipients":{"user_ids":["${user}"]},"notification":{"title":"Hi"},"options":{"badge":${given}}}`));
  const notification = await app.settled(id);
  expect(notification.statistics).toMatchObject({ accepted: 2, failed: 0 });
  expect(notification.options.badge).toBe(Number(given));

  const pushed = 2_147_483_647;
  const apnsPayload = pipeline.apns.received.find((received) => received.token === apnsToken)!.payload;
  expect(own(own(apnsPayload, 'aps'), 'badge')).toBe(pushed);
  const fcmMessage = pipeline.fcm.received.find((received) => received.token === fcmToken)!.message as { android: { notification: object } };
  expect(own(fcmMessage.android.notification, 'notification_count')).toBe(pushed);
  for (const delivery of await app.deliveries(id)) {
    expect(delivery.truncation).toEqual(clamped === null ? null : { title: null, body: null, dropped: [], badge: clamped });
  }
});

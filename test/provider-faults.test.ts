// A provider that stops answering: the batch is given up at the send deadline (not at the job's
// expiry), its pushes retried with a fresh client, and the credential shows the provider
// unreachable meanwhile, without ever being called unhealthy (a network fault is not a bad key).
import { ProviderCredential } from '../src/db/entities.ts';
import { readBatch } from '../src/db/sql/deliveries.ts';
import { createProviderClients } from '../src/worker/clients.ts';
import { android, ios, startPipeline, type Pipeline } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';
import { silentLogger } from './support/simulators.ts';

let pipeline: Pipeline;

beforeAll(async () => {
  pipeline = await startPipeline({ sendDeadlineSeconds: 1 });
});
afterAll(async () => {
  await pipeline.close();
});

const credentialOf = async (applicationId: string) =>
  pipeline.harness.orm.em.fork().findOneOrFail(ProviderCredential, { applicationId, provider: 'apns' }, { disableIdentityMap: true });

test('a hung provider: the batch gives up after the deadline, the push is retried on a new connection and delivered once the provider answers', async () => {
  const app = await pipeline.newApplication();
  await app.register('hung', ios('hung-1', 'hank'));
  pipeline.apns.setLatency(60_000);
  const sessionsBefore = pipeline.apns.counters.sessions;
  const sentAt = Date.now();
  const id = await app.send({ recipients: { user_ids: ['hank'] }, notification: { title: 'Hi' } });

  // The first attempt is given up after ~1 s, not after the 120 s job expiry.
  const credential = await waitFor(() => credentialOf(app.id), (row) => Boolean(row.unreachableSince), 10_000);
  expect(credential.unreachableSince).not.toBeNull();
  expect(Date.now() - sentAt).toBeLessThan(5000);
  expect(credential.unhealthySince).toBeNull();
  const [pending] = await app.deliveries(id);
  expect(pending.state).toBe('pending');

  pipeline.apns.setLatency(0);
  const notification = await app.settled(id, 30_000);
  expect(notification.status).toBe('completed');
  const [delivery] = await app.deliveries(id);
  expect(delivery.state).toBe('accepted');
  expect(delivery.attempts).toBeGreaterThanOrEqual(2);
  // The client that hung was closed; the retry opened a new HTTP/2 session.
  expect(pipeline.apns.counters.sessions).toBeGreaterThan(sessionsBefore + 1);
  const healed = await credentialOf(app.id);
  expect([healed.unreachableSince, healed.unhealthySince]).toEqual([null, null]);
}, 60_000);

/** A new application's FCM clients, as a deliver batch gets them, and a way to get its client again. */
async function fcmClients() {
  const app = await pipeline.newApplication();
  const clients = createProviderClients({ key: pipeline.credentialsKey, endpoints: pipeline.endpoints, logger: silentLogger });
  const em = () => pipeline.harness.orm.em.fork();
  const credential = (await readBatch(em(), { applicationId: app.id, provider: 'fcm', deliveryIds: [] })).credential;
  return { clients, current: async () => (await clients.get(em(), app.id, 'fcm', credential))! };
}

test('a client whose batches cannot reach the provider three times in a row is replaced; one that reaches it again is kept', async () => {
  const { clients, current } = await fcmClients();
  try {
    const first = await current();
    clients.report(first, 'unreachable');
    clients.report(first, 'unreachable');
    clients.report(first, 'reached');
    clients.report(first, 'unreachable');
    clients.report(first, 'unreachable');
    expect(await current()).toBe(first);
    clients.report(first, 'unreachable');
    const second = await current();
    expect(second).not.toBe(first);
    expect(second.credentialId).toBe(first.credentialId);
  } finally {
    await clients.close();
  }
});

test('a batch that read the credential its cached client was opened with reuses it; a changed one opens a new client, a removed one none', async () => {
  const app = await pipeline.newApplication();
  const clients = createProviderClients({ key: pipeline.credentialsKey, endpoints: pipeline.endpoints, logger: silentLogger });
  const em = () => pipeline.harness.orm.em.fork();
  const read = async () => (await readBatch(em(), { applicationId: app.id, provider: 'fcm', deliveryIds: [] })).credential;
  // What an update of the credential does to the version a batch reads: its updated_at moves.
  const changeCredential = () =>
    em().getConnection().execute(`update provider_credentials set updated_at = updated_at + interval '1 second' where application_id = ? and provider = 'fcm'`, [app.id]);
  try {
    const opened = await read();
    expect(opened).not.toBeNull();
    const first = (await clients.get(em(), app.id, 'fcm', opened))!;
    expect(await clients.get(em(), app.id, 'fcm', await read())).toBe(first);

    await changeCredential();
    const changed = await read();
    expect(changed!.version).toBe(opened!.version + 1000);
    const second = (await clients.get(em(), app.id, 'fcm', changed))!;
    expect(second).not.toBe(first);
    expect(await clients.get(em(), app.id, 'fcm', changed)).toBe(second);

    expect(await clients.get(em(), app.id, 'fcm', null)).toBeNull();
    // The removed credential's client was dropped: the same version now opens a fresh one.
    const reopened = await clients.get(em(), app.id, 'fcm', changed);
    expect(reopened).not.toBe(second);

    // Batches asking at once for a client not open yet share the one opened: none closes another's.
    await changeCredential();
    const bumped = await read();
    const concurrent = await Promise.all(Array.from({ length: 4 }, () => clients.get(em(), app.id, 'fcm', bumped)));
    expect(new Set(concurrent).size).toBe(1);
    expect(concurrent[0]).not.toBe(reopened);
  } finally {
    await clients.close();
  }
});

test("a batch whose pushes all timed out replaces its client only if no other batch on it was answered meanwhile", async () => {
  const { clients, current } = await fcmClients();
  try {
    const first = await current();
    // Another batch was answered while this one waited: the provider is slow, the connection works.
    const sentAt = performance.now();
    clients.report(first, 'reached');
    clients.report(first, 'broken', sentAt);
    expect(await current()).toBe(first);
    // Nothing answered on it since this batch was handed over: wedged.
    clients.report(first, 'broken', performance.now());
    const second = await current();
    expect(second).not.toBe(first);
    // A send that never returned is wedged whatever else was answered.
    clients.report(second, 'reached');
    clients.report(second, 'broken');
    expect(await current()).not.toBe(second);
  } finally {
    await clients.close();
  }
});

test('answers spread past the deadline: a push answered in time keeps its answer, only the unanswered ones are sent again', async () => {
  const app = await pipeline.newApplication();
  const users = Array.from({ length: 40 }, (_, index) => `spread-${index}`);
  await app.registerAll(users.map((user) => [`${user}-pixel`, android(`${user}-token`, user)]));
  // The application's FCM connection and token are ready: the deadline then measures answers alone.
  await app.settled(await app.send({ recipients: { user_ids: [users[0]] }, notification: { title: 'Warm-up' } }), 30_000);
  pipeline.fcm.clear();
  // Half the answers come after the 1 s deadline.
  pipeline.fcm.setLatency({ min: 0, max: 2000 });
  const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'Spread' } });
  await waitFor(() => app.deliveries(id), (rows) => rows.some((row) => row.state === 'accepted'), 20_000);
  pipeline.fcm.setLatency(0);
  const notification = await app.settled(id, 30_000);
  expect(notification.statistics).toMatchObject({ installations: 40, accepted: 40, failed: 0 });

  const deliveries = await app.deliveries(id);
  const retried = deliveries.filter((delivery) => delivery.attempts > 1);
  const pushesPerDevice = new Map<string, number>();
  for (const push of pipeline.fcm.received) {
    if (push.token?.startsWith('spread-')) pushesPerDevice.set(push.token, (pushesPerDevice.get(push.token) ?? 0) + 1);
  }
  // The first round kept the answers that came in time: not every delivery was sent twice.
  expect(retried.length).toBeGreaterThan(0);
  expect(retried.length).toBeLessThan(40);
  expect(pushesPerDevice.size).toBe(40);
  // A device got a second copy only when its first answer was late.
  const doubled = [...pushesPerDevice.values()].filter((count) => count > 1).length;
  expect(doubled).toBeLessThanOrEqual(retried.length);
}, 60_000);

test('a connection reset in the middle of a send: only the pushes in flight on it are sent again', async () => {
  const app = await pipeline.newApplication();
  const users = Array.from({ length: 40 }, (_, index) => `reset-${index}`);
  await app.registerAll(users.map((user) => [`${user}-pixel`, android(`${user}-token`, user)]));
  await app.settled(await app.send({ recipients: { user_ids: [users[0]] }, notification: { title: 'Warm-up' } }), 30_000);
  pipeline.fcm.clear();
  // Answers spread below the 1 s deadline: when the connection is cut, some are answered, some not.
  pipeline.fcm.setLatency({ min: 0, max: 700 });
  const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'Reset' } });
  await waitFor(async () => pipeline.fcm.received.length, (count) => count >= 40, 20_000);
  await new Promise((resolve) => setTimeout(resolve, 350));
  const unanswered = pipeline.fcm.resetSessions();
  pipeline.fcm.setLatency(0);
  const notification = await app.settled(id, 30_000);
  expect(notification.statistics).toMatchObject({ installations: 40, accepted: 40, failed: 0 });

  const pushesPerDevice = new Map<string, number>();
  for (const push of pipeline.fcm.received) {
    if (push.token?.startsWith('reset-')) pushesPerDevice.set(push.token, (pushesPerDevice.get(push.token) ?? 0) + 1);
  }
  expect(pushesPerDevice.size).toBe(40);
  const sentAgain = [...pushesPerDevice.values()].reduce((sum, count) => sum + count - 1, 0);
  // Some were cut, some had their answers: the answered ones are not sent again.
  expect(unanswered).toBeGreaterThan(0);
  expect(unanswered).toBeLessThan(40);
  expect(sentAgain).toBeGreaterThan(0);
  expect(sentAgain).toBeLessThanOrEqual(unanswered);
}, 60_000);

test('pushes waiting out a long backoff go out within seconds of the provider answering again', async () => {
  const app = await pipeline.newApplication();
  await app.register('waiting-pixel', android('waiting-token', 'wanda'));
  await app.register('fresh-pixel', android('fresh-token', 'fred'));
  // FCM refuses with a minute's Retry-After: the retry is queued a minute out.
  pipeline.fcm.setRules([{ prefix: 'waiting-', reason: 'UNAVAILABLE', retryAfter: 60 }]);
  const waiting = await app.send({ recipients: { user_ids: ['wanda'] }, notification: { title: 'Waiting' } });
  await waitFor(() => app.deliveries(waiting), ([delivery]) => delivery?.state === 'pending' && delivery.attempts >= 1, 20_000);
  pipeline.fcm.setRules([]);

  // The provider's first good answer since: a push of another notification is accepted.
  const fresh = await app.send({ recipients: { user_ids: ['fred'] }, notification: { title: 'Fresh' } });
  await app.settled(fresh, 20_000);
  const answeredAt = Date.now();
  const notification = await app.settled(waiting, 20_000);
  expect(notification.statistics).toMatchObject({ accepted: 1, failed: 0 });
  expect(Date.now() - answeredAt).toBeLessThan(5000);
}, 60_000);

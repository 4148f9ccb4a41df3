// The SDK's hand-written layer (createHerald) against the real app on a real port, workers and
// provider simulators included: its errors, its retries (a send over quota, a database outage, a
// connection dropped before or after Herald answered, a closed port, a silent server), its
// iterators over every list and waitForCompletion.
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import net from 'node:net';
import type { Express } from 'express';
import { parse } from 'yaml';
import {
  createHerald,
  HeraldError,
  HeraldNetworkError,
  HeraldTimeoutError,
  type Herald,
  type HeraldOptions,
} from '../sdk/src/index.ts';
import { setSendPolicy } from '../src/domain/rate-limits.ts';
import { ios, startPipeline, type Pipeline } from './support/fanout.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { freePort } from './support/ports.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

let pipeline: Pipeline;
let server: Server;
let port: number;

async function listen(app: Express): Promise<{ server: Server; port: number }> {
  const listening = await new Promise<Server>((resolve) => {
    const started = app.listen(0, '127.0.0.1', () => resolve(started));
  });
  return { server: listening, port: (listening.address() as net.AddressInfo).port };
}

async function closeServer(closing: Server): Promise<void> {
  closing.closeAllConnections();
  await new Promise<void>((resolve, reject) => closing.close((error) => (error ? reject(error) : resolve())));
}

beforeAll(async () => {
  pipeline = await startPipeline();
  ({ server, port } = await listen(pipeline.harness.app));
});

afterAll(async () => {
  await closeServer(server);
  await pipeline.close();
});

/** What each attempt got: an HTTP status, or `network` when fetch rejected. The real fetch, counted. */
function attemptLog() {
  const attempts: (number | 'network')[] = [];
  const requests: Request[] = [];
  const responses: Response[] = [];
  const observed: typeof fetch = async (input, init) => {
    const request = input instanceof Request ? input : new Request(input, init);
    requests.push(request.clone());
    try {
      const response = await fetch(request);
      attempts.push(response.status);
      responses.push(response);
      return response;
    } catch (error) {
      attempts.push('network');
      throw error;
    }
  };
  return { attempts, requests, responses, fetch: observed };
}

async function newHerald(options: Partial<HeraldOptions> = {}) {
  const application = await pipeline.newApplication();
  const log = attemptLog();
  const herald = createHerald({ baseUrl: `http://127.0.0.1:${port}`, token: application.server, fetch: log.fetch, ...options });
  return { application, herald, log };
}

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (error: unknown) => error,
  );
}

/**
 * A TCP proxy to the app that ruins its first connection: `drop` closes it before anything reaches
 * Herald; `lose-answer` lets the request through and closes it when Herald answers (the work is
 * done, the caller never hears of it). Later connections pass untouched.
 */
async function firstConnectionSpoiler(mode: 'drop' | 'lose-answer') {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    connections += 1;
    sockets.add(client);
    client.on('error', () => client.destroy());
    if (connections === 1 && mode === 'drop') {
      client.destroy();
      return;
    }
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    if (connections === 1) {
      upstream.once('data', () => {
        client.destroy();
        upstream.destroy();
      });
      client.pipe(upstream);
    } else {
      client.pipe(upstream).pipe(client);
    }
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`,
    get connections() {
      return connections;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

test('every operation under /api/v1 in the document has a method of its name (the send is `send`)', () => {
  const document = parse(readFileSync(new URL('../openapi/openapi.yaml', import.meta.url), 'utf8')) as {
    paths: Record<string, Record<string, { operationId?: string }>>;
  };
  const operations = Object.entries(document.paths)
    .filter(([path]) => path.startsWith('/api/v1/'))
    .flatMap(([, item]) => Object.values(item).flatMap((operation) => operation.operationId ?? []));
  expect(operations.length).toBeGreaterThanOrEqual(11);
  const herald = createHerald({ baseUrl: 'http://127.0.0.1', token: 't' }) as unknown as Record<string, unknown>;
  const missing = operations.map((id) => (id === 'sendNotification' ? 'send' : id)).filter((name) => typeof herald[name] !== 'function');
  expect(missing).toEqual([]);
});

describe('errors', () => {
  test('a refused request is a HeraldError with the status, the message, the field errors and the request id', async () => {
    const { herald, log } = await newHerald();
    const error = await failureOf(herald.send({ recipients: { user_ids: [] }, notification: { title: 'Hi' } }));
    expect(error).toBeInstanceOf(HeraldError);
    expect(error).toBeInstanceOf(Error);
    const refused = error as HeraldError;
    expect(refused.name).toBe('HeraldError');
    expect(refused.status).toBe(422);
    expect(refused.message).toBe('The recipients.user_ids field must have at least 1 item.');
    expect(refused.errors).toEqual({ 'recipients.user_ids': ['The recipients.user_ids field must have at least 1 item.'] });
    expect(refused.requestId).toEqual(expect.any(String));
    expect(refused.requestId).toBe(log.responses[0].headers.get('X-Request-Id'));
    expect(refused.retryAfter).toBeNull();
    expect(refused.stack).toContain('HeraldError');
    // A 422 is an answer, not a failure to get one: never retried.
    expect(log.attempts).toEqual([422]);
  });

  test("a 403 HeraldError names the abilities the token lacks, from Herald's WWW-Authenticate", async () => {
    const application = await pipeline.newApplication();
    const herald = createHerald({ baseUrl: `http://127.0.0.1:${port}`, token: application.client });
    const refused = (await failureOf(herald.send({ recipients: { user_ids: ['u'] }, notification: { title: 'Hi' } }))) as HeraldError;
    expect(refused).toBeInstanceOf(HeraldError);
    expect(refused.status).toBe(403);
    expect(refused.missingAbilities).toEqual(['notifications:send']);
    await expect(herald.getInstallation(`missing-${randomUUID()}`)).rejects.toMatchObject({ status: 404, missingAbilities: null });
  });

  test('a token Herald does not know is a 401 HeraldError; an unknown installation a 404', async () => {
    const stranger = createHerald({ baseUrl: `http://127.0.0.1:${port}`, token: 'hrld_unknown_token' });
    await expect(stranger.getApp()).rejects.toMatchObject({ name: 'HeraldError', status: 401, message: 'Unauthenticated.' });
    const { herald } = await newHerald();
    await expect(herald.getInstallation(`missing-${randomUUID()}`)).rejects.toMatchObject({ status: 404, message: 'Not Found' });
  });

  test('a base URL that is not an http(s) URL is refused when the client is made', () => {
    expect(() => createHerald({ baseUrl: 'localhost:3000', token: 't' })).toThrow(
      new TypeError('baseUrl must be an http or https URL, such as https://push.example.com: got localhost:3000'),
    );
    expect(() => createHerald({ baseUrl: '', token: 't' })).toThrow(TypeError);
  });
});

describe('retries', () => {
  test('a send over the quota waits for Retry-After, then goes through with the same Idempotency-Key', async () => {
    const { application, herald, log } = await newHerald();
    await setSendPolicy(pipeline.harness.orm.em.fork(), application.id, { quota: 1, windowSeconds: 2 });
    const body = { recipients: { user_ids: ['quota-user'] }, notification: { title: 'Hi' } };
    await herald.send(body);
    const startedAt = Date.now();
    const sent = await herald.send(body);
    const elapsed = Date.now() - startedAt;

    expect(sent.meta.accepted).toBe(true);
    expect(log.attempts[1]).toBe(429);
    expect(log.attempts.at(-1)).toBe(202);
    const retryAfter = Number(log.responses[1].headers.get('Retry-After'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(elapsed).toBeGreaterThanOrEqual(retryAfter * 1000 - 20);
    const keys = log.requests.slice(1).map((request) => request.headers.get('Idempotency-Key'));
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys).size).toBe(1);
  });

  test('a 429 whose Retry-After would pass maxWaitMs is thrown at once, with retryAfter', async () => {
    const { application, herald, log } = await newHerald({ retry: { maxWaitMs: 1_000 } });
    await setSendPolicy(pipeline.harness.orm.em.fork(), application.id, { quota: 1, windowSeconds: 60 });
    const body = { recipients: { user_ids: ['quota-user'] }, notification: { title: 'Hi' } };
    await herald.send(body);
    const startedAt = Date.now();
    const error = (await failureOf(herald.send(body))) as HeraldError;
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    expect(error).toBeInstanceOf(HeraldError);
    expect(error.status).toBe(429);
    expect(error.retryAfter).toBeGreaterThan(1);
    expect(log.attempts).toEqual([202, 429]);
  });

  test('a 503 while the database cannot be reached is tried again after Retry-After, and succeeds once it is back', async () => {
    const proxy: TcpProxy = await startTcpProxy(pipeline.harness.url);
    const behind: Harness = await startHarness({ databaseUrl: proxy.url, queueSchema: `pgboss_${randomBytes(4).toString('hex')}` });
    const listening = await listen(behind.app);
    try {
      const application = await behind.newApplication('outage');
      const log = attemptLog();
      const herald = createHerald({ baseUrl: `http://127.0.0.1:${listening.port}`, token: await application.token(), fetch: log.fetch });
      await proxy.cut();
      const startedAt = Date.now();
      const listed = herald.listNotifications();
      setTimeout(() => void proxy.restore(), 500);
      const page = await listed;
      expect(page.data).toEqual([]);
      expect(log.attempts[0]).toBe(503);
      expect(log.responses[0].headers.get('Retry-After')).toBe('5');
      expect(log.attempts.at(-1)).toBe(200);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(4_980);
    } finally {
      await closeServer(listening.server);
      await behind.close();
      await proxy.close();
    }
  }, 40_000);

  test('a read whose connection was dropped is tried again', async () => {
    const spoiler = await firstConnectionSpoiler('drop');
    try {
      const { application, log } = await newHerald();
      await application.register('dropped-read', ios('dd01', 'dropped-user'));
      const herald = createHerald({ baseUrl: spoiler.url, token: application.server, fetch: log.fetch });
      const installation = await herald.getInstallation('dropped-read');
      expect(installation.installation_id).toBe('dropped-read');
      expect(log.attempts).toEqual(['network', 200]);
      expect(spoiler.connections).toBe(2);
    } finally {
      await spoiler.close();
    }
  });

  test('a PATCH whose connection was dropped is not repeated: HeraldNetworkError, with fetch\'s error as its cause', async () => {
    const spoiler = await firstConnectionSpoiler('drop');
    try {
      const { application, log } = await newHerald();
      await application.register('dropped-patch', ios('dd02', 'before'));
      const herald = createHerald({ baseUrl: spoiler.url, token: application.server, fetch: log.fetch });
      const error = await failureOf(herald.updateInstallation('dropped-patch', { user_id: 'after' }));
      expect(error).toBeInstanceOf(HeraldNetworkError);
      expect(error).not.toBeInstanceOf(HeraldError);
      const failure = error as HeraldNetworkError;
      expect(failure.attempts).toBe(1);
      expect(failure.message).toBe('PATCH /api/v1/installations/dropped-patch: no answer (other side closed)');
      expect(failure.cause).toMatchObject({ name: 'TypeError', message: 'fetch failed' });
      expect(log.attempts).toEqual(['network']);
      expect(spoiler.connections).toBe(1);
      expect((await application.installation('dropped-patch')).user_id).toBe('before');
    } finally {
      await spoiler.close();
    }
  });

  test('a send whose answer was lost is repeated with its Idempotency-Key and queued once', async () => {
    const spoiler = await firstConnectionSpoiler('lose-answer');
    try {
      const { application, log } = await newHerald();
      const herald = createHerald({ baseUrl: spoiler.url, token: application.server, fetch: log.fetch });
      const sent = await herald.send({ recipients: { user_ids: ['lost-answer'] }, notification: { title: 'Once' } });
      expect(log.attempts).toEqual(['network', 202]);
      // The first attempt queued it; the retry got it back as a replay.
      expect(sent.meta.accepted).toBe(false);
      const direct = createHerald({ baseUrl: `http://127.0.0.1:${port}`, token: application.server });
      const all = [];
      for await (const notification of direct.notifications()) all.push(notification.id);
      expect(all).toEqual([sent.data.id]);
    } finally {
      await spoiler.close();
    }
  });

  test('a closed port is a HeraldNetworkError naming the reason, after maxAttempts attempts', async () => {
    // From this worker's own ports: one the kernel picks could be another test's listener by now.
    const closedPort = await freePort();
    const log = attemptLog();
    const herald = createHerald({
      baseUrl: `http://127.0.0.1:${closedPort}`,
      token: 't',
      fetch: log.fetch,
      retry: { maxAttempts: 3, backoffMs: 20 },
    });
    const error = (await failureOf(herald.listNotifications())) as HeraldNetworkError;
    expect(error).toBeInstanceOf(HeraldNetworkError);
    expect(error.message).toBe(`GET /api/v1/notifications: no answer (connect ECONNREFUSED 127.0.0.1:${closedPort}) after 3 attempts`);
    expect(error.attempts).toBe(3);
    expect(log.attempts).toEqual(['network', 'network', 'network']);
  });

  test('an attempt that outlives timeoutMs is a HeraldNetworkError; retry: false makes one attempt', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const log = attemptLog();
      const herald = createHerald({
        baseUrl: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`,
        token: 't',
        fetch: log.fetch,
        timeoutMs: 200,
        retry: false,
      });
      const startedAt = Date.now();
      const error = (await failureOf(herald.getNotification(randomUUID()))) as HeraldNetworkError;
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(190);
      expect(error).toBeInstanceOf(HeraldNetworkError);
      expect(error.message).toMatch(/no answer within 200 ms$/);
      expect((error.cause as Error).name).toBe('TimeoutError');
      expect(log.attempts).toEqual(['network']);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});

describe('lists and waiting', () => {
  let herald: Herald;
  let log: ReturnType<typeof attemptLog>;
  let notificationId: string;

  beforeAll(async () => {
    const made = await newHerald();
    ({ herald, log } = made);
    for (const n of [1, 2, 3, 4, 5]) {
      await herald.registerInstallation(`pager-${n}`, { platform: 'ios', provider: { identifier: `ab0${n}` }, user_id: 'pager', permission: n === 5 ? 'denied' : 'authorized' });
    }
    await herald.send({ recipients: { user_ids: ['nobody'] }, notification: { title: 'First' } });
    notificationId = (await herald.send({ recipients: { user_ids: ['pager'] }, notification: { title: 'Second' } })).data.id;
  });

  test('waitForCompletion reads the notification until its status is final', async () => {
    const notification = await herald.waitForCompletion(notificationId, { intervalMs: 50 });
    expect(notification.status).toBe('completed');
    expect(notification.statistics).toMatchObject({ installations: 5, accepted: 4, skipped: 1 });
  });

  test('the iterators walk every page: the notifications, and a notification\'s deliveries by state and user', async () => {
    await herald.waitForCompletion(notificationId, { intervalMs: 50 });
    const before = log.requests.length;
    const titles = [];
    for await (const notification of herald.notifications({ limit: 1 })) titles.push(notification.notification.title);
    expect(titles).toEqual(['Second', 'First']);
    const cursors = log.requests.slice(before).map((request) => new URL(request.url).searchParams.get('cursor'));
    expect(cursors).toEqual([null, expect.any(String)]);

    const accepted = [];
    for await (const delivery of herald.deliveries(notificationId, { state: 'accepted', limit: 3 })) accepted.push(delivery.installation_id);
    expect(accepted.sort()).toEqual(['pager-1', 'pager-2', 'pager-3', 'pager-4']);
    const skipped = [];
    for await (const delivery of herald.deliveries(notificationId, { state: 'skipped', userId: 'pager' })) skipped.push(delivery);
    expect(skipped).toMatchObject([{ installation_id: 'pager-5', state: 'skipped', reason: 'permission_denied' }]);
    const page = await herald.listDeliveries(notificationId, { userId: 'nobody' });
    expect(page).toEqual({ data: [], meta: { next_cursor: null } });
  });

  test("a user's deliveries across notifications, newest first, each with its notification's id and title", async () => {
    await herald.waitForCompletion(notificationId, { intervalMs: 50 });
    const page = await herald.listUserDeliveries({ userId: 'pager', limit: 2 });
    expect(page.data).toHaveLength(2);
    expect(page.meta.next_cursor).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const all = [];
    for await (const row of herald.userDeliveries({ userId: 'pager', limit: 2 })) all.push(row);
    expect(all.map((row) => [row.notification_id, row.notification_title])).toEqual(Array.from({ length: 5 }, () => [notificationId, 'Second']));
    expect(all.map((row) => row.delivery.installation_id).sort()).toEqual(['pager-1', 'pager-2', 'pager-3', 'pager-4', 'pager-5']);
    expect(all.slice(0, 2)).toEqual(page.data);
    expect(await herald.listUserDeliveries({ userId: 'nobody' })).toEqual({ data: [], meta: { next_cursor: null } });
  });

  test('the breakdown and the filters the dashboard uses: by reason and platform, and notifications by status', async () => {
    await herald.waitForCompletion(notificationId, { intervalMs: 50 });
    expect(await herald.getNotificationBreakdown(notificationId)).toEqual([
      { state: 'accepted', platform: 'ios', reason: null, deliveries: 4 },
      { state: 'skipped', platform: 'ios', reason: 'permission_denied', deliveries: 1 },
    ]);
    const denied = await herald.listDeliveries(notificationId, { reason: 'permission_denied', platform: 'ios' });
    expect(denied.data.map((delivery) => delivery.installation_id)).toEqual(['pager-5']);
    expect((await herald.listDeliveries(notificationId, { platform: 'android' })).data).toEqual([]);
    const titles = [];
    for await (const notification of herald.notifications({ status: 'completed' })) titles.push(notification.notification.title);
    expect(titles).toEqual(['Second', 'First']);
  });

  test('an iterator stopped early fetches no further page', async () => {
    const before = log.requests.length;
    for await (const notification of herald.notifications({ limit: 1 })) {
      expect(notification.id).toBe(notificationId);
      break;
    }
    expect(log.requests.length - before).toBe(1);
  });

  test('a user\'s installations, newest registration first, page by page; the token\'s application', async () => {
    const installations = [];
    for await (const installation of herald.installations({ userId: 'pager', limit: 2 })) installations.push(installation.installation_id);
    expect(installations).toEqual(['pager-5', 'pager-4', 'pager-3', 'pager-2', 'pager-1']);
    const app = await herald.getApp();
    expect(app.token.abilities).toEqual(['*']);
  });

  test('cancelNotification cancels a scheduled send, answers the same when repeated, and waitForCompletion ends on cancelled', async () => {
    const sendAt = new Date(Date.now() + 3_600_000).toISOString();
    const { data } = await herald.send({ recipients: { user_ids: ['pager'] }, notification: { title: 'Later' }, options: { send_at: sendAt } });
    expect(data).toMatchObject({ status: 'queued', scheduled_for: sendAt });
    const cancelled = await herald.cancelNotification(data.id);
    expect(cancelled).toMatchObject({ id: data.id, status: 'cancelled', processing_started_at: null });
    expect(await herald.cancelNotification(data.id)).toEqual(cancelled);
    expect(await herald.waitForCompletion(data.id, { timeoutMs: 1000, intervalMs: 50 })).toEqual(cancelled);
    const ended = (await failureOf(herald.cancelNotification(notificationId))) as HeraldError;
    expect(ended).toBeInstanceOf(HeraldError);
    expect(ended.status).toBe(409);
  });

  test('waitForCompletion gives up after timeoutMs with HeraldTimeoutError holding the last state read', async () => {
    // Nothing works this harness's queue: its notifications stay queued.
    const idle = await startHarness({ queueSchema: `pgboss_${randomBytes(4).toString('hex')}` });
    const listening = await listen(idle.app);
    try {
      const application = await idle.newApplication('idle');
      const waiting = createHerald({ baseUrl: `http://127.0.0.1:${listening.port}`, token: await application.token() });
      const { data } = await waiting.send({ recipients: { user_ids: ['u'] }, notification: { title: 'Stuck' } });
      const startedAt = Date.now();
      const error = (await failureOf(waiting.waitForCompletion(data.id, { timeoutMs: 300, intervalMs: 100 }))) as HeraldTimeoutError;
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(300);
      expect(error).toBeInstanceOf(HeraldTimeoutError);
      expect(error.message).toBe(`Notification ${data.id} is still queued after 300 ms.`);
      expect(error.notification).toMatchObject({ id: data.id, status: 'queued' });
    } finally {
      await closeServer(listening.server);
      await idle.close();
    }
  });
});

describe('audiences', () => {
  test('segments are saved, read, listed, counted, sent to and deleted through typed calls', async () => {
    const { herald } = await newHerald();
    await herald.registerInstallation('sdk-audience-1', { platform: 'android', provider: { identifier: 'sdk-audience-1' }, user_id: 'ann', tags: { plan: 'pro' } });
    await herald.registerInstallation('sdk-audience-2', { platform: 'android', provider: { identifier: 'sdk-audience-2' }, tags: { plan: 'free' } });
    expect((await herald.updateInstallation('sdk-audience-2', { tags: { plan: 'pro', beta: null } })).tags).toEqual({ plan: 'pro' });
    const saved = await herald.putSegment('pro', { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] });
    expect(saved.name).toBe('pro');
    expect((await herald.getSegment('pro')).audience).toEqual({ tags: [{ key: 'plan', op: 'eq', value: 'pro' }] });
    expect((await herald.listSegments()).map((segment) => segment.name)).toEqual(['pro']);
    expect(await herald.countAudience({ segment: 'pro' })).toEqual({ installations: 2, users: 2 });
    expect(await herald.countAudience({ audience: { platforms: ['ios'] } })).toEqual({ installations: 0, users: 0 });
    const { data } = await herald.send({ recipients: { segment: 'pro' }, notification: { title: 'Hi' } });
    expect(data).toMatchObject({ segment: 'pro', target_users: 0 });
    await herald.deleteSegment('pro');
    const missing = await failureOf(herald.getSegment('pro'));
    expect(missing).toBeInstanceOf(HeraldError);
    expect((missing as HeraldError).status).toBe(404);
  });
});

describe('test sends, tags and hourly statistics', () => {
  test('a test send to installation ids, the tag summary and the hours through typed calls', async () => {
    const { herald, log } = await newHerald();
    await herald.registerInstallation('sdk-test-phone', { platform: 'ios', provider: { identifier: 'sdk-test-phone' }, user_id: 'ann', permission: 'authorized', tags: { plan: 'pro' } });
    const sentAt = new Date();
    const { data } = await herald.send({ recipients: { installation_ids: ['sdk-test-phone', 'sdk-no-such-phone'] }, notification: { title: 'Test' } });
    expect(data.target_users).toBe(2);
    const done = await herald.waitForCompletion(data.id, { intervalMs: 100 });
    expect(done.statistics).toMatchObject({ installations: 1, accepted: 1 });

    expect(await herald.listTags()).toEqual({ data: [{ key: 'plan', installations: 1, values: [{ value: 'pro', installations: 1 }] }], refreshed_at: expect.any(String) });

    // Dates or strings; a `+` offset reaches the server encoded.
    const from = new Date(sentAt.getTime() - 3_600_000);
    const hours = await herald.hourlyStats({ from, to: new Date(Date.now() + 1) });
    expect(hours.reduce((sum, hour) => sum + hour.sends, 0)).toBe(1);
    expect(hours.reduce((sum, hour) => sum + hour.accepted, 0)).toBe(1);
    expect((await herald.hourlyStats({ from: '2026-12-01T01:00:00+01:00', to: '2026-12-01T02:00:00+01:00' })).map((hour) => hour.hour)).toEqual([
      '2026-12-01T00:00:00.000Z',
    ]);
    expect(log.requests.at(-1)!.url).toContain('from=2026-12-01T01%3A00%3A00%2B01%3A00');
    // The default: the 24 hours before now, from the start of the first.
    expect([24, 25]).toContain((await herald.hourlyStats()).length);

    const tooLong = (await failureOf(herald.hourlyStats({ from: '2026-01-01T00:00:00Z', to: '2026-03-01T00:00:00Z' }))) as HeraldError;
    expect(tooLong).toBeInstanceOf(HeraldError);
    expect(tooLong.status).toBe(422);
    expect(Object.keys(tooLong.errors ?? {})).toEqual(['to']);
  });
});

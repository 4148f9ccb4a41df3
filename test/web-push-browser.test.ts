/**
 * @jest-environment ./test/support/failure-environment.js
 */
// Web Push in a real Chromium, end to end: a page served by this test (its origin allowed for
// CORS) subscribes with @herald/sdk/web and registers with Herald; Herald encrypts a send for that
// subscription and POSTs it to the Web Push simulator, which decrypts it with the subscription's
// private key; the DevTools protocol hands the plaintext to the page's real service worker (built
// from sdk/src/web), which shows the notification and reports to Herald. Only the network hop
// between the push service and the browser is stood in for: Chromium cannot reach a push service
// here, so pushManager.subscribe() is stubbed in the page to give a subscription whose keys this
// test made, and `ServiceWorker.deliverPushMessage` is the push service's delivery. The tests run
// in order on one page, one service worker and one installation, as a visitor's browser would.
import { createECDH, randomBytes } from 'node:crypto';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import { build } from 'esbuild';
import type { CDPSession, Page, Worker } from 'playwright-core';
import { setAllowedOrigins } from '../src/domain/applications.ts';
import type { WebPushReceived } from '../src/providers/simulators/web-push-simulator.ts';
import { launchBrowser, type HeadlessBrowser } from './support/browser.ts';
import { startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

jest.setTimeout(30_000);

const sdkWeb = (file: string) => fileURLToPath(new URL(`../sdk/src/web/${file}`, import.meta.url));

/** The browser entries as the package builds them (sdk/tsup.config.ts): the page's ESM, the worker's importScripts script. */
async function bundle(entry: string, format: 'esm' | 'iife', globalName?: string): Promise<string> {
  const built = await build({ entryPoints: [sdkWeb(entry)], bundle: true, format, globalName, platform: 'browser', target: 'es2022', write: false });
  return built.outputFiles[0].text;
}

// A site as the SDK's README shows it: the page loads the module, the worker imports the script.
// Taking control of open pages at once (skipWaiting, clients.claim) is this site's own choice: it
// lets a click navigate the page that is open.
const serviceWorker = `importScripts('/herald-service-worker.js');
HeraldServiceWorker.heraldServiceWorker(self);
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
`;
const page = (title: string) => `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<script type="module">import * as herald from '/herald-web.js'; window.herald = herald;</script></head><body><h1>${title}</h1></body></html>`;

type Answer = { type: string; body: string };

async function listen(handler: http.RequestListener): Promise<{ server: Server; origin: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

let pipeline: Pipeline;
let app: PipelineApplication;
let browser: HeadlessBrowser;
let site: { server: Server; origin: string };
let herald: { server: Server; origin: string };
let tab: Page;
let cdp: CDPSession;
let worker: Worker;
let registrationId: string;

/** What the browser's Background Sync did, as DevTools records it (event names, metadata by key). */
const syncLog: { eventName: string; metadata: Record<string, string> }[] = [];

/** Herald's answers to POST /api/v1/events, by status; and requests refused while "unreachable". */
const eventAnswers: number[] = [];
let eventsReachable = true;
let eventsRefused = 0;

const installationId = 'browser-1';
const userId = 'reader-1';
let endpointId: string;

beforeAll(async () => {
  const [webScript, workerScript] = await Promise.all([bundle('index.ts', 'esm'), bundle('service-worker.ts', 'iife', 'HeraldServiceWorker')]);
  const files: Record<string, Answer> = {
    '/': { type: 'text/html', body: page('Shop') },
    '/orders/42': { type: 'text/html', body: page('Order 42') },
    '/herald-web.js': { type: 'text/javascript', body: webScript },
    '/herald-service-worker.js': { type: 'text/javascript', body: workerScript },
    '/sw.js': { type: 'text/javascript', body: serviceWorker },
  };
  site = await listen((req, res) => {
    const file = files[new URL(req.url ?? '/', 'http://site').pathname];
    res.writeHead(file ? 200 : 404, { 'Content-Type': file?.type ?? 'text/plain' }).end(file?.body ?? 'not found');
  });

  pipeline = await startPipeline();
  app = await pipeline.newApplication({ webpush: true });
  await setAllowedOrigins(pipeline.harness.orm.em.fork(), app.id, [site.origin]);
  // Herald on its own origin. While "unreachable", its events URL drops every connection unanswered.
  herald = await listen((req, res) => {
    if (req.url?.startsWith('/api/v1/events')) {
      if (!eventsReachable) {
        eventsRefused += 1;
        req.socket.destroy();
        return;
      }
      if (req.method === 'POST') res.on('finish', () => eventAnswers.push(res.statusCode));
    }
    pipeline.harness.app(req, res);
  });

  browser = await launchBrowser({ serviceWorkers: 'allow' });
  await browser.context.grantPermissions(['notifications', 'background-sync'], { origin: site.origin });
  tab = await browser.newPage();
  cdp = await browser.context.newCDPSession(tab);
  const registrations: { registrationId: string; scopeURL: string; isDeleted: boolean }[] = [];
  cdp.on('ServiceWorker.workerRegistrationUpdated', (event) => registrations.push(...event.registrations));
  await cdp.send('ServiceWorker.enable');
  cdp.on('BackgroundService.backgroundServiceEventReceived', ({ backgroundServiceEvent: { eventName, eventMetadata } }) =>
    syncLog.push({ eventName, metadata: Object.fromEntries(eventMetadata.map(({ key, value }) => [key, value])) }),
  );
  await cdp.send('BackgroundService.startObserving', { service: 'backgroundSync' });
  await cdp.send('BackgroundService.setRecording', { shouldRecord: true, service: 'backgroundSync' });
  await tab.goto(`${site.origin}/`);
  const workerStarted = browser.context.waitForEvent('serviceworker');
  await tab.evaluate(async () => {
    await navigator.serviceWorker.register('/sw.js');
    // Controlled by the worker (its clients.claim()), so that a click can navigate this page.
    if (!navigator.serviceWorker.controller) await new Promise((resolve) => navigator.serviceWorker.addEventListener('controllerchange', resolve, { once: true }));
  });
  worker = await workerStarted;
  const scope = `${site.origin}/`;
  registrationId = (await waitFor(() => registrations.find((r) => r.scopeURL === scope && !r.isDeleted), Boolean, 10_000))!.registrationId;
}, 60_000);

afterAll(async () => {
  await browser?.close();
  for (const running of [site, herald]) {
    running?.server.closeAllConnections();
    await new Promise((resolve) => running?.server.close(resolve));
  }
  await pipeline?.close();
});

afterEach(async () => {
  if ((globalThis as { testFailed?: boolean }).testFailed) await browser.keepFailure(expect.getState().currentTestName ?? 'test');
  expect(browser.blocked.splice(0)).toEqual([]);
  expect(browser.errors.splice(0)).toEqual([]);
});

/**
 * A subscription as a browser's push service would make it, its keys made here (an ECDH P-256 pair
 * and 16 auth bytes) and handed to the simulator, which then decrypts what Herald sends to it.
 */
function newSubscription() {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const auth = randomBytes(16).toString('base64url');
  endpointId = randomBytes(16).toString('base64url');
  pipeline.webPush.adopt(endpointId, { privateKey: ecdh.getPrivateKey('base64url'), auth, applicationServerKey: pipeline.credentials.webpush.publicKey });
  return { endpoint: `${pipeline.webPush.url}/push/${endpointId}`, expirationTime: null, keys: { p256dh: ecdh.getPublicKey('base64url'), auth } };
}

/** What Herald pushed for a notification to this test's subscription, as the simulator decrypted it. */
async function pushed(notificationId: string): Promise<WebPushReceived> {
  const mine = () =>
    pipeline.webPush.received.find(
      (got) => got.subscription === endpointId && (got.payload as { herald?: { notification_id?: string } } | undefined)?.herald?.notification_id === notificationId,
    );
  return (await waitFor(mine, Boolean, 20_000))!;
}

/** The push service's delivery: the plaintext, to the page's service worker. */
async function deliver(received: WebPushReceived): Promise<void> {
  await cdp.send('ServiceWorker.deliverPushMessage', { origin: site.origin, registrationId, data: JSON.stringify(received.payload) });
}

type Shown = { title: string; body: string; tag: string; data: { url: string | null; herald: { delivery_id: string; notification_id: string; tag: string } } };
const shownNotifications = () =>
  tab.evaluate(async () =>
    (await (await navigator.serviceWorker.ready).getNotifications()).map(({ title, body, tag, data }) => ({ title, body, tag, data })),
  ) as Promise<Shown[]>;
// Read only once the worker has shown what it was given (the reports it makes after showing have
// left it): Chromium drops a notification whose showing overlaps a getNotifications() call.
const shownWithTag = async (tag: string) => (await waitFor(shownNotifications, (all) => all.some((n) => n.tag === tag), 10_000)).filter((n) => n.tag === tag);

const statistics = (notificationId: string, expected: Record<string, number>) =>
  waitFor(
    () => app.notification(notificationId),
    (notification) => Object.entries(expected).every(([key, count]) => notification.statistics[key] === count),
    15_000,
  );

/** Reports the worker keeps in its IndexedDB outbox. */
const outboxSize = () =>
  worker.evaluate(
    () =>
      new Promise<number>((resolve, reject) => {
        const opening = indexedDB.open('herald-web-push');
        opening.onerror = () => reject(opening.error);
        opening.onsuccess = () => {
          const counting = opening.result.transaction('outbox').objectStore('outbox').count();
          counting.onsuccess = () => {
            opening.result.close();
            resolve(counting.result);
          };
        };
      }),
  );

test('subscribe() registers the stubbed subscription with Herald: platform web, its keys, permission, locale and timezone', async () => {
  const subscription = newSubscription();

  const result = await tab.evaluate(
    async ({ subscription, baseUrl, appToken, installationId, userId }) => {
      const registration = await navigator.serviceWorker.ready;
      const asked: { userVisibleOnly?: boolean; applicationServerKey: number[] }[] = [];
      // The stand-in for the browser's push service: the subscription this test made, which the
      // browser then gives back as the current one.
      let current: PushSubscription | null = null;
      registration.pushManager.subscribe = async (options) => {
        asked.push({ userVisibleOnly: options?.userVisibleOnly, applicationServerKey: [...new Uint8Array(options?.applicationServerKey as ArrayBuffer)] });
        current = { ...subscription, options, toJSON: () => subscription, unsubscribe: async () => true } as unknown as PushSubscription;
        return current;
      };
      registration.pushManager.getSubscription = async () => current;
      const { subscribe } = (window as unknown as { herald: typeof import('../sdk/src/web/index.ts') }).herald;
      // No key given: the module reads it from GET /api/v1/app, across origins.
      const subscribed = await subscribe({ baseUrl, appToken, serviceWorker: registration, installationId, userId });
      const again = await subscribe({ baseUrl, appToken, serviceWorker: registration, userId });
      return {
        asked,
        first: { installationId: subscribed.installationId, registered: subscribed.installation !== null },
        again: { installationId: again.installationId, registered: again.installation !== null },
        locale: navigator.language,
        timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      };
    },
    { subscription, baseUrl: herald.origin, appToken: app.client, installationId, userId },
  );
  expect(result.asked).toEqual([{ userVisibleOnly: true, applicationServerKey: [...Buffer.from(pipeline.credentials.webpush.publicKey, 'base64url')] }]);
  expect(result.first).toEqual({ installationId, registered: true });
  // The same subscription, user and permission on a later visit: the same installation (kept in IndexedDB), not sent again.
  expect(result.again).toEqual({ installationId, registered: false });
  expect(await app.installation(installationId)).toMatchObject({
    platform: 'web',
    provider_identifier_type: 'web_push_subscription',
    status: 'active',
    permission: 'authorized',
    user_id: userId,
    device: { locale: result.locale, timezone: result.timezone },
  });
});

test('a push shows its notification, tagged so a repeat replaces it, and received and displayed reach the statistics', async () => {
  const actionUrl = `${site.origin}/orders/42`;
  const id = await app.send({
    recipients: { user_ids: [userId] },
    notification: { title: 'Order shipped', body: 'Order 42 left the warehouse', action_url: actionUrl },
    options: { collapse_id: 'order-42' },
  });
  const received = await pushed(id);
  await deliver(received);
  await statistics(id, { received: 1, displayed: 1, opened: 0 });
  const [shown] = await shownWithTag('order-42');
  const [delivery] = await app.deliveries(id);
  expect(shown).toEqual({
    title: 'Order shipped',
    body: 'Order 42 left the warehouse',
    tag: 'order-42',
    data: { url: actionUrl, data: {}, herald: { delivery_id: delivery.id, notification_id: id, tag: 'order-42' } },
  });

  // The push service delivers the same push again: one notification still, the same tag (its two
  // reports, new events of the same delivery, say the worker has handled it).
  const answered = eventAnswers.length;
  await deliver(received);
  await waitFor(() => eventAnswers.length - answered, (count) => count === 2, 10_000);
  expect((await shownNotifications()).filter((n) => n.tag === 'order-42')).toHaveLength(1);
});

test('a click on the notification navigates the open page to its action URL and reports opened', async () => {
  const [shown] = await shownWithTag('order-42');
  // Headless Chromium has no notification on screen to click. What stands in for the click: the
  // browser's own NotificationEvent for the shown notification, dispatched in the service worker,
  // its waitUntil kept by this test as the browser would (a script-made event may not extend itself).
  await worker.evaluate(async (tag) => {
    const scope = self as unknown as { registration: ServiceWorkerRegistration };
    const [notification] = await scope.registration.getNotifications({ tag });
    const click = new (globalThis as unknown as { NotificationEvent: new (type: string, init: { notification: Notification }) => Event }).NotificationEvent('notificationclick', { notification });
    const pending: Promise<unknown>[] = [];
    Object.defineProperty(click, 'waitUntil', { value: (promise: Promise<unknown>) => pending.push(promise) });
    self.dispatchEvent(click);
    await Promise.all(pending);
  }, shown.tag);
  await tab.waitForURL(shown.data.url!);
  expect(await tab.locator('h1').innerText()).toBe('Order 42');
  await statistics(shown.data.herald.notification_id, { received: 1, displayed: 1, opened: 1 });
  // The click closed it.
  expect((await shownNotifications()).filter((n) => n.tag === 'order-42')).toEqual([]);
});

test('reports made while Herald is unreachable wait in the outbox and arrive once, at the next Background Sync', async () => {
  eventsReachable = false;
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'While away', body: 'Herald is down' } });
  await deliver(await pushed(id));
  await waitFor(() => eventsRefused, (count) => count > 0, 10_000);
  // Both reports (received, displayed) are kept; Herald has none.
  await waitFor(outboxSize, (size) => size === 2, 10_000);
  await shownWithTag(id);
  expect((await app.notification(id)).statistics).toMatchObject({ received: 0, displayed: 0 });
  // The worker asked for a sync, which the browser fired at once (it is online) and which failed:
  // the browser tries again minutes later, not at once in a loop of requests (a sync registered
  // while one fires is fired again as soon as it ends).
  const failed = await waitFor(() => syncLog.find((event) => /sync event failed/i.test(event.eventName)), Boolean, 10_000);
  expect(Number(failed!.metadata['Next Attempt Delay (ms)'])).toBeGreaterThanOrEqual(60_000);
  expect(syncLog.map((event) => event.eventName.toLowerCase())).toEqual(['registered sync', 'dispatched sync event', 'sync event failed']);

  eventsReachable = true;
  const answered = eventAnswers.length;
  // The browser's Background Sync event for the outbox (it would fire it once online).
  await cdp.send('ServiceWorker.dispatchSyncEvent', { origin: site.origin, registrationId, tag: 'herald-outbox', lastChance: false });
  await statistics(id, { received: 1, displayed: 1 });
  await waitFor(outboxSize, (size) => size === 0, 10_000);
  // Each report arrived once: two new events, no replay of an event_id Herald already had (a 200).
  expect(eventAnswers.slice(answered)).toEqual([201, 201]);
  expect(eventAnswers).not.toContain(200);
});

test('a push of 4,096 bytes of text arrives cut to fit and is shown as it arrived', async () => {
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Long read', body: 'x'.repeat(4096) } });
  const received = await pushed(id);
  const payload = received.payload as { body: string };
  expect(payload.body).toMatch(/^x+…$/);
  expect(Buffer.byteLength(JSON.stringify(payload))).toBeLessThanOrEqual(4096 - 86 - 1 - 16);
  const [delivery] = await app.deliveries(id);
  expect(delivery.truncation).toMatchObject({ body: payload.body.length - 1 });
  await deliver(received);
  await statistics(id, { received: 1, displayed: 1 });
  const [shown] = await shownWithTag(id);
  expect(shown.body).toBe(payload.body);
});

test('closing the notification reports dismissed', async () => {
  const [shown] = await shownWithTag((await shownNotifications())[0].tag);
  const answered = eventAnswers.length;
  await worker.evaluate(async (tag) => {
    const scope = self as unknown as { registration: ServiceWorkerRegistration };
    const [notification] = await scope.registration.getNotifications({ tag });
    // As for the click: the browser's event for the notification, its waitUntil kept by the test.
    const close = new (globalThis as unknown as { NotificationEvent: new (type: string, init: { notification: Notification }) => Event }).NotificationEvent('notificationclose', { notification });
    const pending: Promise<unknown>[] = [];
    Object.defineProperty(close, 'waitUntil', { value: (promise: Promise<unknown>) => pending.push(promise) });
    self.dispatchEvent(close);
    await Promise.all(pending);
  }, shown.tag);
  expect(eventAnswers.slice(answered)).toEqual([201]);
  const types = await pipeline.harness.orm.em.getConnection().execute<{ type: string }[]>('select type from delivery_events where delivery_id = ? order by type', [shown.data.herald.delivery_id]);
  expect(types.map((row) => row.type)).toEqual(['dismissed', 'displayed', 'received']);
});

test("a 410 from the push service invalidates the browser's installation", async () => {
  pipeline.webPush.setRules([{ prefix: endpointId, reason: 'Gone' }]);
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Anyone there?' } });
  const settled = await app.settled(id);
  expect(settled.statistics).toMatchObject({ installations: 1, failed: 1 });
  expect(await app.installation(installationId)).toMatchObject({ invalidated_at: expect.any(String), invalid_reason: expect.any(String) });
  pipeline.webPush.setRules([]);
});

test('a subscription the browser replaced (pushsubscriptionchange) is registered again, and pushes reach it', async () => {
  const replaced = newSubscription();
  // The browser's event, dispatched in the worker with its new subscription; waitUntil kept by the test as for the click.
  await worker.evaluate(async (subscription) => {
    const change = new (globalThis as unknown as { ExtendableEvent: new (type: string) => Event }).ExtendableEvent('pushsubscriptionchange');
    const pending: Promise<unknown>[] = [];
    Object.defineProperty(change, 'waitUntil', { value: (promise: Promise<unknown>) => pending.push(promise) });
    Object.defineProperty(change, 'newSubscription', { value: { ...subscription, toJSON: () => subscription } });
    self.dispatchEvent(change);
    await Promise.all(pending);
  }, replaced);
  // The invalidated installation is active again on the new endpoint, for the same user.
  expect(await app.installation(installationId)).toMatchObject({ status: 'active', invalidated_at: null, user_id: userId, permission: 'authorized' });
  const id = await app.send({ recipients: { user_ids: [userId] }, notification: { title: 'Welcome back' } });
  await deliver(await pushed(id));
  await statistics(id, { accepted: 1, received: 1, displayed: 1 });
  expect((await shownWithTag(id))[0].title).toBe('Welcome back');
});

test('unsubscribe() ends the subscription and detaches the installation from its user', async () => {
  const ended = await tab.evaluate(async () => {
    const registration = await navigator.serviceWorker.ready;
    // This page (the click navigated here) has the browser's own pushManager: the stand-in again.
    let unsubscribed = false;
    const subscription = { unsubscribe: async () => (unsubscribed = true) } as unknown as PushSubscription;
    registration.pushManager.getSubscription = async () => subscription;
    const { unsubscribe } = (window as unknown as { herald: typeof import('../sdk/src/web/index.ts') }).herald;
    await unsubscribe();
    return unsubscribed;
  });
  expect(ended).toBe(true);
  expect(await app.installation(installationId)).toMatchObject({ user_id: null });
});

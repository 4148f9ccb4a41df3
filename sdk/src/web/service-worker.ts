// @herald/sdk/web/service-worker: the service worker's side of Web Push. heraldServiceWorker()
// listens for Herald's pushes, shows them, and reports `received`, `displayed`, `opened` and
// `dismissed` to POST /api/v1/events. A service worker has no lasting timers (the browser stops it
// when idle), so a report Herald did not take waits in an IndexedDB outbox, sent again on the next
// push, activation or Background Sync event.
//
// The worker's types are declared here, structurally, for what is used: the package's TypeScript
// setting has the DOM library, and the WebWorker library cannot sit beside it in one program.
// ServiceWorkerGlobalScope satisfies them.
import type { EventCreate } from '../generated/index.ts';
import { postEvent, putInstallation } from './api.ts';
import { base64urlBytes, heraldPush, installationOf, notificationOf, outboxPlan, permissionOf, reportOutcome, shownData, type ShownNotificationData } from './rules.ts';
import { queueReports, readOutbox, readSettings, removeReports, writeSettings } from './store.ts';

export type { HeraldWebPush, ShownNotificationData } from './rules.ts';

export interface ExtendableEventLike extends Event {
  waitUntil(promise: Promise<unknown>): void;
}
export interface PushEventLike extends ExtendableEventLike {
  readonly data: { json(): unknown } | null;
}
export interface NotificationLike {
  readonly data: unknown;
  close(): void;
}
export interface NotificationEventLike extends ExtendableEventLike {
  readonly notification: NotificationLike;
}
export interface SyncEventLike extends ExtendableEventLike {
  readonly tag: string;
  readonly lastChance: boolean;
}
export interface PushSubscriptionChangeEventLike extends ExtendableEventLike {
  readonly newSubscription?: PushSubscription | null;
}
export interface WindowClientLike {
  readonly url: string;
  focus(): Promise<unknown>;
  navigate(url: string): Promise<unknown>;
}
export interface ServiceWorkerScopeLike {
  readonly registration: {
    readonly scope: string;
    readonly pushManager: PushManager;
    showNotification(title: string, options?: NotificationOptions): Promise<void>;
    /** Background Sync, where the browser has it. */
    readonly sync?: { register(tag: string): Promise<void> };
  };
  readonly clients: {
    matchAll(options: { type: 'window'; includeUncontrolled: boolean }): Promise<readonly unknown[]>;
    openWindow(url: string): Promise<unknown>;
  };
  addEventListener(type: string, listener: (event: Event) => void): void;
}

export type ServiceWorkerOptions = {
  /** The title of a push that has none (a browser must show something for every push): by default none. */
  fallbackTitle?: string;
  /** Opened when a notification without an action URL is clicked; by default the worker's scope. */
  defaultUrl?: string;
};

/** The Background Sync tag under which the outbox is sent. */
export const outboxSyncTag = 'herald-outbox';

type EventType = EventCreate['type'];

/**
 * Makes this service worker Herald's: call it once, at the top level of the worker's script
 * (`heraldServiceWorker(self)`). It listens for `push` (payloads that are not Herald's are left to
 * the worker's other listeners), `notificationclick`, `notificationclose`, `activate`, `sync` and
 * `pushsubscriptionchange`.
 */
export function heraldServiceWorker(scope: ServiceWorkerScopeLike, options: ServiceWorkerOptions = {}): void {
  const outbox = createOutbox(scope);
  // Reports of one delivery are queued in the order they happened and sent in that order.
  const report = async (shown: ShownNotificationData, types: EventType[], occurredAt: Date[]) => {
    const settings = await readSettings();
    if (!settings) return;
    const events = types.map((type, index) => ({
      event_id: crypto.randomUUID(),
      delivery_id: shown.herald.delivery_id,
      installation_id: settings.installationId,
      type,
      occurred_at: occurredAt[index].toISOString(),
    }));
    await queueReports(events, Date.now());
    await outbox.flushOrSyncLater();
  };

  scope.addEventListener('push', (event) => {
    const push = event as PushEventLike;
    const payload = heraldPush(readJson(push));
    if (!payload) return;
    push.waitUntil(
      (async () => {
        const receivedAt = new Date();
        const { title, options: shownOptions } = notificationOf(payload, options.fallbackTitle);
        await scope.registration.showNotification(title, shownOptions);
        await report(shownOptions.data, ['received', 'displayed'], [receivedAt, new Date()]);
      })(),
    );
  });

  scope.addEventListener('notificationclick', (event) => {
    const click = event as NotificationEventLike;
    const shown = shownData(click.notification.data);
    if (!shown) return;
    click.notification.close();
    const url = new URL(shown.url ?? options.defaultUrl ?? scope.registration.scope, scope.registration.scope).href;
    // The window first: a browser lets a worker open one only while the click is being handled.
    click.waitUntil(Promise.all([openPage(scope, url), report(shown, ['opened'], [new Date()])]));
  });

  scope.addEventListener('notificationclose', (event) => {
    const close = event as NotificationEventLike;
    const shown = shownData(close.notification.data);
    if (shown) close.waitUntil(report(shown, ['dismissed'], [new Date()]));
  });

  scope.addEventListener('activate', (event) => (event as ExtendableEventLike).waitUntil(outbox.flushOrSyncLater()));

  scope.addEventListener('sync', (event) => {
    const sync = event as SyncEventLike;
    if (sync.tag !== outboxSyncTag) return;
    // Rejecting asks the browser to fire the sync again later (with its backoff), until its last
    // chance. No sync is registered from here: one registered while it fires is fired again at
    // once, a loop of requests for as long as Herald is unreachable.
    sync.waitUntil(
      outbox.flush().then((left) => {
        if (left > 0 && !sync.lastChance) throw new Error(`${left} Herald event reports still wait.`);
      }),
    );
  });

  scope.addEventListener('pushsubscriptionchange', (event) => {
    const change = event as PushSubscriptionChangeEventLike;
    change.waitUntil(registerAgain(scope, change.newSubscription ?? null));
  });
}

function readJson(event: PushEventLike): unknown {
  try {
    return event.data?.json() ?? null;
  } catch {
    return null;
  }
}

/** A window already showing `url` is focused, else one of this site is sent there, else one opens. */
async function openPage(scope: ServiceWorkerScopeLike, url: string): Promise<void> {
  const windows = (await scope.clients.matchAll({ type: 'window', includeUncontrolled: true })) as WindowClientLike[];
  // A browser refuses focus() outside a click's handling: the page is still where it should be.
  const focus = (client: WindowClientLike) => client.focus().catch(() => undefined);
  const showing = windows.find((client) => client.url === url);
  if (showing) {
    await focus(showing);
    return;
  }
  const sameSite = windows.find((client) => new URL(client.url).origin === new URL(url).origin && typeof client.navigate === 'function');
  // navigate() works only on a window this worker controls; otherwise a new window opens.
  const navigated = sameSite ? await sameSite.navigate(url).catch(() => null) : null;
  if (navigated) {
    await focus(navigated as WindowClientLike);
    return;
  }
  // An app deep link (`myapp://...`) may not open from a browser: nothing more to do then.
  await scope.clients.openWindow(url).catch(() => null);
}

/** The outbox's sender: one flush at a time, oldest report first, stopping at the first Herald must see again. */
function createOutbox(scope: ServiceWorkerScopeLike) {
  let running: Promise<number> = Promise.resolve(0);
  const flushOnce = async (): Promise<number> => {
    const settings = await readSettings();
    const { send, drop } = outboxPlan(await readOutbox(), Date.now());
    await removeReports(drop);
    if (!settings) return send.length;
    let sent = 0;
    for (const entry of send) {
      const outcome = reportOutcome(await postEvent(settings, entry.event));
      if (outcome === 'retry') break;
      await removeReports([entry.key]);
      sent += 1;
    }
    return send.length - sent;
  };
  /** Sends what waits; resolves with how many reports still wait. */
  const flush = (): Promise<number> => {
    running = running.then(flushOnce, flushOnce);
    return running;
  };
  return {
    flush,
    /** Sends what waits, and asks for a Background Sync (where the browser has one) while reports still wait. */
    async flushOrSyncLater(): Promise<void> {
      if ((await flush()) > 0) await scope.registration.sync?.register(outboxSyncTag).catch(() => undefined);
    },
  };
}

/** Registers the subscription the browser replaced (or a new one, when it only ended the old). */
async function registerAgain(scope: ServiceWorkerScopeLike, given: PushSubscription | null): Promise<void> {
  const settings = await readSettings();
  if (!settings) return;
  const subscription =
    given ?? (await scope.registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: base64urlBytes(settings.vapidPublicKey) }));
  const body = installationOf(subscription.toJSON(), {
    permission: permissionOf(typeof Notification === 'undefined' ? undefined : Notification.permission),
    userId: settings.userId,
    locale: navigator.language,
    timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  });
  await putInstallation(settings, settings.installationId, body);
  await writeSettings({ ...settings, registered: { body: JSON.stringify(body), at: Date.now() } });
}

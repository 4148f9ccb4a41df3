// @herald/sdk/web: a page's side of Web Push. subscribe() subscribes the site's service worker with
// the application's VAPID key and registers the subscription with Herald as an installation of
// platform `web`; the service worker (@herald/sdk/web/service-worker) shows what Herald pushes
// and reports what happens to it, with the settings subscribe() leaves in IndexedDB.
import type { Installation } from '../generated/index.ts';
import { patchInstallation, putInstallation, vapidPublicKey } from './api.ts';
import { base64urlBytes, installationOf, permissionOf, registrationDue, sameKey } from './rules.ts';
import { readSettings, writeSettings } from './store.ts';

export { HeraldError } from '../errors.ts';
export type { FieldErrors, Installation, Permission } from '../generated/index.ts';
export { permissionOf, type HeraldWebPush } from './rules.ts';

export type SubscribeOptions = {
  /** Herald's address, e.g. `https://push.example.com` (the page's origin must be in the application's allowed origins). */
  baseUrl: string;
  /** A token of the application with the client abilities (`installations:write`, `events:write`): it is public in the page. */
  appToken: string;
  /** The service worker's registration (`navigator.serviceWorker.register(...)` or `.ready`). */
  serviceWorker: ServiceWorkerRegistration;
  /** The installation's id; by default the one this browser was given before, or a new UUID. */
  installationId?: string;
  /** The signed-in user, whom sends to `user_ids` reach; null or left out: nobody yet. */
  userId?: string | null;
  /**
   * The application's VAPID public key (`herald credentials show`, or `vapid_public_key` of
   * GET /api/v1/app). Left out, it is read from GET /api/v1/app, which a page can do only when
   * Herald answers it at the page's own origin: Herald's CORS covers only registering and
   * reporting.
   */
  vapidPublicKey?: string;
};

export type WebSubscription = {
  installationId: string;
  subscription: PushSubscription;
  /** Herald's installation when this call registered it; null when Herald already had exactly this. */
  installation: Installation | null;
};

/**
 * Subscribes this browser to the application's pushes and registers it with Herald. Asks for the
 * notifications permission when the user has not answered yet (call it from a click: browsers
 * ignore a prompt nobody asked for), and rejects with the browser's `NotAllowedError` when it is
 * refused. Call it again on later visits: it registers again only when the subscription, the user
 * or the permission changed (or a week has passed), and re-subscribes when the application's key
 * changed.
 */
export async function subscribe(options: SubscribeOptions): Promise<WebSubscription> {
  const { baseUrl, appToken, serviceWorker } = options;
  const stored = await readSettings();
  const installationId = options.installationId ?? stored?.installationId ?? crypto.randomUUID();
  const key = options.vapidPublicKey ?? (await vapidPublicKey({ baseUrl, appToken }));
  if (!key) throw new Error('This application has no VAPID key yet: its operator runs `herald credentials set-webpush` first.');
  const serverKey = base64urlBytes(key);

  let subscription = await serviceWorker.pushManager.getSubscription();
  if (subscription && !sameKey(subscription.options.applicationServerKey, serverKey)) {
    await subscription.unsubscribe();
    subscription = null;
  }
  subscription ??= await serviceWorker.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: serverKey });

  const body = installationOf(subscription.toJSON(), {
    permission: permissionOf(typeof Notification === 'undefined' ? undefined : Notification.permission),
    userId: options.userId ?? null,
    locale: navigator.language,
    timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  });
  const sameTarget = stored?.installationId === installationId && stored.baseUrl === baseUrl;
  const settings = { baseUrl, appToken, installationId, userId: options.userId ?? null, vapidPublicKey: key, registered: sameTarget ? stored.registered : undefined };
  // Kept before registering: the worker reports with these even if this page closes mid-call.
  await writeSettings(settings);
  if (!registrationDue(settings.registered, body, Date.now())) return { installationId, subscription, installation: null };
  const installation = await putInstallation({ baseUrl, appToken }, installationId, body);
  await writeSettings({ ...settings, registered: { body: JSON.stringify(body), at: Date.now() } });
  return { installationId, subscription, installation };
}

/**
 * Ends this browser's subscription: the push service forgets it, and Herald's installation is
 * detached from its user at once (the CORS Herald answers allows no delete from a page), so sends
 * to that user stop reaching it; the push service's 410 on the next push to it invalidates it. The
 * installation id is kept, so a later subscribe() comes back as the same installation.
 */
export async function unsubscribe(options: { serviceWorker?: ServiceWorkerRegistration } = {}): Promise<void> {
  const serviceWorker = options.serviceWorker ?? (await navigator.serviceWorker.ready);
  const subscription = await serviceWorker.pushManager.getSubscription();
  await subscription?.unsubscribe();
  const stored = await readSettings();
  if (!stored) return;
  await patchInstallation(stored, stored.installationId, { user_id: null });
  await writeSettings({ ...stored, userId: null, registered: undefined });
}

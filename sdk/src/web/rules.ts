// The browser module's rules as pure functions on plain values, shared by the page's entry
// (index.ts) and the service worker's (service-worker.ts), and tested without a browser: what a
// push of Herald's shows, how a browser's permission reads in Herald's terms, when a subscription
// needs registering again, and what the outbox of event reports sends, keeps or drops.
import type { EventCreate, InstallationPut, Permission } from '../generated/index.ts';

/** What Herald pushes to a browser (its `webPushPayload`), once the push service has decrypted it. */
export type HeraldWebPush = {
  title?: string;
  body?: string;
  image?: string;
  /** The notification's `action_url`: opened on click. */
  url?: string;
  data?: Record<string, unknown>;
  herald: { delivery_id: string; notification_id: string; tag: string };
  /** Anything `platform_overrides.web` added (e.g. `icon`, `badge`, `requireInteraction`). */
  [key: string]: unknown;
};

/** The `data` of a notification the service worker shows: what a click or a close needs. */
export type ShownNotificationData = {
  url: string | null;
  data: Record<string, unknown>;
  herald: HeraldWebPush['herald'];
};

/** Notification options of the Notifications API that `platform_overrides.web` may set as they are. */
const passedOptions = ['icon', 'badge', 'lang', 'dir', 'requireInteraction', 'silent', 'renotify', 'vibrate', 'timestamp', 'actions'] as const;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The payload of a push if it is one of Herald's (it names its delivery), otherwise null. */
export function heraldPush(payload: unknown): HeraldWebPush | null {
  if (!isObject(payload) || !isObject(payload.herald)) return null;
  const { delivery_id, notification_id, tag } = payload.herald;
  if (typeof delivery_id !== 'string' || typeof notification_id !== 'string') return null;
  return { ...payload, herald: { delivery_id, notification_id, tag: typeof tag === 'string' ? tag : notification_id } } as HeraldWebPush;
}

/**
 * The title and options `showNotification` takes for a push. The tag is Herald's (the send's
 * `collapse_id`, else the notification's id), so a repeated push replaces the notification shown
 * instead of stacking a second one. A push without a title still shows one (`userVisibleOnly`
 * promises the browser that every push does): `fallbackTitle`.
 */
export function notificationOf(push: HeraldWebPush, fallbackTitle = ''): { title: string; options: NotificationOptions & { data: ShownNotificationData } } {
  const data: ShownNotificationData = { url: text(push.url) ?? null, data: isObject(push.data) ? push.data : {}, herald: push.herald };
  const options: Record<string, unknown> = {};
  for (const key of passedOptions) if (push[key] !== undefined) options[key] = push[key];
  if (text(push.body) !== undefined) options.body = push.body;
  // `image` is a Notifications API option the DOM library's NotificationOptions does not list.
  if (text(push.image) !== undefined) options.image = push.image;
  return { title: text(push.title) ?? fallbackTitle, options: { ...options, tag: push.herald.tag, data } };
}

/** The data a shown notification carries, when the service worker showed it for Herald. */
export function shownData(data: unknown): ShownNotificationData | null {
  if (!isObject(data) || !isObject(data.herald) || typeof data.herald.delivery_id !== 'string') return null;
  return data as ShownNotificationData;
}

/** Herald's `permission` for a browser's `Notification.permission`. */
export function permissionOf(browser: NotificationPermission | undefined): Permission {
  if (browser === 'granted') return 'authorized';
  if (browser === 'denied') return 'denied';
  if (browser === 'default') return 'not_determined';
  return 'unknown';
}

/** A subscription as `PushSubscription.toJSON()` gives it. */
export type SubscriptionJson = { endpoint?: string; expirationTime?: number | null; keys?: Record<string, string> };

/** The registration (PUT /api/v1/installations/{id}) of a subscription. */
export function installationOf(
  subscription: SubscriptionJson,
  options: { permission: Permission; userId?: string | null; locale?: string; timezone?: string },
): InstallationPut {
  const { endpoint, keys, expirationTime } = subscription;
  if (!endpoint || !keys?.p256dh || !keys.auth) throw new Error('The push subscription has no endpoint or keys: the browser did not give a Web Push subscription.');
  const device: NonNullable<InstallationPut['device']> = {};
  if (options.locale) device.locale = options.locale;
  if (options.timezone) device.timezone = options.timezone;
  return {
    platform: 'web',
    provider: { identifier: endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth }, expirationTime: expirationTime ?? null },
    permission: options.permission,
    user_id: options.userId ?? null,
    device,
  };
}

/** What was last registered: the body sent (as JSON) and when. */
export type Registered = { body: string; at: number };

/** A registration is kept fresh (its `last_seen_at`) at least this often, even when nothing changed. */
export const registrationRefreshMs = 7 * 24 * 60 * 60 * 1000;

/** Whether `body` must be sent: it differs from the last registration, or that one has aged. */
export function registrationDue(previous: Registered | undefined, body: InstallationPut, now: number): boolean {
  return !previous || previous.body !== JSON.stringify(body) || now - previous.at >= registrationRefreshMs;
}

/** A report waiting in the outbox; `key` is IndexedDB's, increasing in the order they were queued. */
export type OutboxEntry = { key: number; event: EventCreate; queuedAt: number };

/** Reports older than this are dropped unsent: a week-old "displayed" tells nobody anything. */
export const outboxMaxAgeMs = 7 * 24 * 60 * 60 * 1000;
/** At most this many reports wait; past it, the oldest go first. */
export const outboxMaxEntries = 200;

/** Which queued reports to send, oldest first, and which to drop (aged, or past the cap). */
export function outboxPlan(entries: readonly OutboxEntry[], now: number): { send: OutboxEntry[]; drop: number[] } {
  const ordered = [...entries].sort((a, b) => a.key - b.key);
  const fresh = ordered.filter((entry) => now - entry.queuedAt < outboxMaxAgeMs);
  const send = fresh.slice(Math.max(0, fresh.length - outboxMaxEntries));
  const kept = new Set(send.map((entry) => entry.key));
  return { send, drop: ordered.filter((entry) => !kept.has(entry.key)).map((entry) => entry.key) };
}

/**
 * What to do with a report after an attempt: Herald's answer's status, or null when there was no
 * answer (Herald unreachable). `sent` and `drop` leave the outbox; `retry` keeps it and stops the
 * flush there, so reports still go in the order they happened. A 401 or 403 is retried: the next
 * subscribe() may bring a new token, which the outbox uses.
 */
export function reportOutcome(status: number | null): 'sent' | 'retry' | 'drop' {
  if (status === 200 || status === 201) return 'sent';
  if (status === null || status === 401 || status === 403 || status === 408 || status === 429 || status >= 500) return 'retry';
  // 400, 404, 409, 422: this report will never be accepted.
  return 'drop';
}

/** A VAPID public key (base64url) as the bytes `applicationServerKey` takes. */
export function base64urlBytes(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
  const binary = atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

/** Whether a subscription was made with this application server key. */
export function sameKey(subscribed: ArrayBuffer | null | undefined, key: Uint8Array): boolean {
  if (!subscribed) return false;
  const bytes = new Uint8Array(subscribed);
  return bytes.length === key.length && bytes.every((byte, index) => byte === key[index]);
}

// What each provider receives for a notification. A device receives the default title and body or
// one localization's (contentFor). The visible text is cut to fit each provider's payload limit
// (fitToPlatform: the fanout records the cut per delivery, the deliver jobs push exactly the cut
// content); only what cannot be cut (data, options, overrides) too large for a provider is refused
// at send time (payloadProblems, 422).
import type { Notification, Truncation } from '../db/entities.ts';
import type { components } from '../generated/api.ts';
import type { Platform } from './platforms.ts';
import { webPushPlaintextLimit } from './web-push.ts';

type Send = components['schemas']['NotificationSend'];
export type PushContent = Pick<Send, 'notification' | 'data' | 'options'>;
export type PushIds = { deliveryId: string; notificationId: string };
export type Localizations = components['schemas']['Localizations'];

/**
 * What the notification shows and carries, as sent: the API echoes it; contentFor makes of it what
 * one device receives.
 */
export function pushContent(
  notification: Pick<Notification, 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options'>,
): Required<PushContent> & Pick<components['schemas']['Notification'], 'notification'> {
  return {
    notification: {
      title: notification.title ?? null,
      body: notification.body ?? null,
      image_url: notification.imageUrl ?? null,
      action_url: notification.actionUrl ?? null,
      localizations: notification.localizations ?? {},
    },
    data: notification.data,
    options: notification.options,
  };
}

/**
 * The content a device receives: the default title and body (`tag` null), or those of the
 * localization `tag`, each falling back to the default's when the localization leaves it absent,
 * null or empty. The URLs, data and options are the notification's. Without the localizations: a
 * push carries one language.
 */
export function contentFor(content: PushContent, tag: string | null): PushContent {
  const { localizations, ...shown } = content.notification;
  const localization = tag === null ? undefined : localizations?.[tag];
  if (!localization) return { ...content, notification: shown };
  return { ...content, notification: { ...shown, title: localization.title || shown.title, body: localization.body || shown.body } };
}
type DroppableUrl = Truncation['dropped'][number];
type JsonObject = Record<string, unknown>;

/**
 * APNs rejects a payload over 4 KB (PayloadTooLarge); FCM a message whose data and notification
 * exceed 4 KB; a Web Push service an encrypted body over 4,096 bytes (domain/web-push.ts).
 */
export const apnsPayloadLimit = 4096;
export const fcmPayloadLimit = 4096;
export const payloadLimits: Record<Platform, number> = { ios: apnsPayloadLimit, android: fcmPayloadLimit, web: webPushPlaintextLimit };
const providerNames: Record<Platform, string> = { ios: 'APNs', android: 'FCM', web: 'Web Push' };

/** Appended to a title or body that was cut. */
export const ellipsis = '\u2026';

/** Keys of `data` that would collide with what Herald itself puts in a push. */
export const reservedDataKeys = ['aps', 'herald'];
export const reservedFcmDataPrefix = 'herald_';
/** FCM v1 refuses these `data` keys ("from", "message_type", anything starting with "google" or "gcm"). */
export const fcmReservedDataKeys = ['from', 'message_type'];
export const fcmReservedDataPrefixes = ['google', 'gcm'];

export function apnsPayload(content: PushContent, ids: PushIds): JsonObject {
  const { title, body, image_url: imageUrl, action_url: actionUrl } = content.notification;
  const options = content.options ?? {};
  const alert = compact({ title, body });
  const aps = compact({
    alert: Object.keys(alert).length > 0 ? alert : undefined,
    sound: options.sound,
    badge: options.badge,
    category: options.ios_category,
    'thread-id': options.collapse_id,
    // A data-only push wakes the app in the background instead of showing an alert.
    'content-available': Object.keys(alert).length === 0 ? 1 : undefined,
    // Lets a notification service extension download the image.
    'mutable-content': imageUrl ? 1 : undefined,
  });
  const payload = {
    ...(content.data ?? {}),
    aps,
    herald: compact({
      delivery_id: ids.deliveryId,
      notification_id: ids.notificationId,
      image_url: imageUrl,
      action_url: actionUrl,
    }),
  };
  return deepMerge(payload, options.platform_overrides?.ios ?? {});
}

/**
 * The FCM v1 message for one Android device. The sender adds the `token` and `android.ttl` (the
 * time left until the push expires, which depends on when it is sent).
 */
export function fcmMessage(content: PushContent, ids: PushIds): JsonObject {
  const { title, body, image_url: imageUrl, action_url: actionUrl } = content.notification;
  const options = content.options ?? {};
  // Built as entries, not assigned key by key: an assignment to `__proto__` sets the prototype and drops the key.
  const data: Record<string, string> = Object.fromEntries(
    Object.entries(content.data ?? {}).map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)]),
  );
  Object.assign(
    data,
    compact({
      herald_delivery_id: ids.deliveryId,
      herald_notification_id: ids.notificationId,
      herald_action_url: actionUrl ?? undefined,
    }),
  );
  const notification = compact({ title, body, imageUrl });
  const shown = nonEmpty(notification) !== undefined;
  const android = compact({
    priority: options.priority,
    collapseKey: options.collapse_id,
    notification: nonEmpty(
      compact({
        // collapse_key only replaces a message still waiting in FCM; the tag replaces a notification
        // still shown, so a repeated push (a retry after a lost answer) does not stack a second one.
        // A data-only push shows nothing: a tag would make it a notification.
        tag: shown ? (options.collapse_id ?? ids.notificationId) : undefined,
        channelId: options.android_channel_id,
        sound: options.sound,
        notificationCount: options.badge,
      }),
    ),
  });
  return compact({
    notification: nonEmpty(notification),
    data,
    android: deepMerge(android, options.platform_overrides?.android ?? {}),
  });
}

/**
 * The JSON a browser's service worker decrypts for one push: what it shows (title, body, image),
 * where a click goes (`url`), the send's `data`, and Herald's ids with the `tag` that makes a
 * repeated push (a retry after a lost answer, or a later push of the same collapse id) replace the
 * notification still shown instead of stacking a second one.
 */
export function webPushPayload(content: PushContent, ids: PushIds): JsonObject {
  const { title, body, image_url: image, action_url: url } = content.notification;
  const options = content.options ?? {};
  const data = content.data ?? {};
  const payload = compact({
    title,
    body,
    image,
    url,
    data: Object.keys(data).length > 0 ? data : undefined,
    herald: { delivery_id: ids.deliveryId, notification_id: ids.notificationId, tag: options.collapse_id ?? ids.notificationId },
  });
  return deepMerge(payload, options.platform_overrides?.web ?? {});
}

/** webPushPayload for the pushes of one content, as its JSON text: what is shared is built once per notification. */
export function webPushPayloads(content: PushContent): (ids: PushIds) => string {
  const overrides = content.options?.platform_overrides?.web;
  if (overrides && 'herald' in overrides) return (ids) => JSON.stringify(webPushPayload(content, ids));
  const shared = new Map<string, JsonObject>();
  return (ids) => {
    let payload = shared.get(ids.notificationId);
    if (!payload) shared.set(ids.notificationId, (payload = webPushPayload(content, { ...sampleIds, notificationId: ids.notificationId })));
    return JSON.stringify({ ...payload, herald: { ...(payload.herald as JsonObject), delivery_id: ids.deliveryId } });
  };
}

/**
 * The largest badge a push carries: FCM's `notification_count` is a 32-bit integer. The document
 * bounds `options.badge` only below (as the interface spec does), so a larger one is accepted and
 * pushed as this, on both platforms, and the delivery's truncation records it.
 */
export const maxBadge = 2_147_483_647;

/** The content with its badge brought within maxBadge, and the badge pushed when that changed it. */
function badgeInRange(content: PushContent): { content: PushContent; badge: number | null } {
  const badge = content.options?.badge;
  if (badge === undefined || badge <= maxBadge) return { content, badge: null };
  return { content: { ...content, options: { ...content.options, badge: maxBadge } }, badge: maxBadge };
}

// Ids have a fixed length (UUIDs), so a sample measures exactly what a real push will weigh.
const sampleIds: PushIds = {
  deliveryId: '00000000-0000-7000-8000-000000000000',
  notificationId: '00000000-0000-7000-8000-000000000000',
};

/**
 * apnsPayload for the pushes of one content, which differ only by their ids: what they have in
 * common is built once and shared by every payload (never modified: payloads are only serialized),
 * each push getting its own `herald`. The same JSON as apnsPayload, key order included.
 */
export function apnsPayloads(content: PushContent): (ids: PushIds) => JsonObject {
  // iOS overrides that name `herald` could rewrite the ids: each payload is then built whole.
  const overrides = content.options?.platform_overrides?.ios;
  if (overrides && 'herald' in overrides) return (ids) => apnsPayload(content, ids);
  const shared = apnsPayload(content, sampleIds);
  const herald = shared.herald as JsonObject;
  return (ids) => ({ ...shared, herald: { ...herald, delivery_id: ids.deliveryId, notification_id: ids.notificationId } });
}

/** fcmMessage for the pushes of one content, built likewise: each push gets its own `data`. */
export function fcmMessages(content: PushContent): (ids: PushIds) => JsonObject {
  // The notification's id is in the message (the tag): what is shared is built once per notification.
  const shared = new Map<string, JsonObject>();
  return (ids) => {
    let message = shared.get(ids.notificationId);
    if (!message) shared.set(ids.notificationId, (message = fcmMessage(content, { ...sampleIds, notificationId: ids.notificationId })));
    const data = message.data as Record<string, string>;
    return { ...message, data: { ...data, herald_delivery_id: ids.deliveryId } };
  };
}

/** Bytes of what the provider counts against its limit: the APNs payload; FCM's data + notification; the Web Push plaintext. */
export function payloadBytes(content: PushContent, platform: Platform): number {
  if (platform === 'ios') return byteLength(apnsPayload(content, sampleIds));
  if (platform === 'web') return byteLength(webPushPayload(content, sampleIds));
  const message = fcmMessage(content, sampleIds);
  return byteLength({ data: message.data, notification: message.notification });
}

/**
 * The content of one platform's pushes, cut to fit its payload limit, and how it was cut (null
 * when it fits whole). Pure and deterministic: the fanout records the truncation, the deliver job
 * calls it again and pushes exactly that content. The order, each step only when the previous
 * one cannot fit:
 *   1. the body is cut to its longest prefix that fits, the title kept whole;
 *   2. the title is cut to its longest prefix that fits, the body cut to nothing;
 *   3. image_url is dropped, and 1–2 are redone with the room it freed (text whole if it fits);
 *   4. action_url is dropped too, and 1–2 are redone likewise.
 * A cut is made between grapheme clusters (never inside a surrogate pair, a combining sequence or
 * an emoji ZWJ sequence) and ends with "…"; a text cut to nothing is "…" alone, so the push still
 * shows an alert. Sizes are measured on the serialized payload, JSON escapes included. Content
 * that cannot fit even then (refused at send, see payloadProblems) is returned in that smallest form.
 * A badge over maxBadge is pushed as maxBadge first, and recorded as part of the cut.
 */
export function fitToPlatform(given: PushContent, platform: Platform): { content: PushContent; truncation: Truncation | null } {
  const { content, badge } = badgeInRange(given);
  const limit = payloadLimits[platform];
  const fits = (candidate: PushContent) => payloadBytes(candidate, platform) <= limit;
  if (fits(content)) return { content, truncation: badge === null ? null : { title: null, body: null, dropped: [], badge } };

  const title = graphemes(content.notification.title);
  const body = graphemes(content.notification.body);
  // kept: graphemes kept before the ellipsis; null: the text whole.
  const build = (dropped: DroppableUrl[], titleKept: number | null, bodyKept: number | null) => {
    const notification = { ...content.notification };
    if (titleKept !== null) notification.title = cut(title, titleKept);
    if (bodyKept !== null) notification.body = cut(body, bodyKept);
    for (const url of dropped) notification[url] = null;
    const truncation: Truncation = {
      title: titleKept === null ? null : codePoints(title, titleKept),
      body: bodyKept === null ? null : codePoints(body, bodyKept),
      dropped,
      badge,
    };
    return { content: { ...content, notification }, truncation };
  };
  // A text with nothing in it cannot be cut: it stays as it is (null when there is no text).
  const cuttable = (text: string[]) => text.length > 0;
  const titleAtMost = cuttable(title) ? 0 : null;
  const bodyAtMost = cuttable(body) ? 0 : null;

  const levels: DroppableUrl[][] = [[]];
  if (content.notification.image_url) levels.push(['image_url']);
  if (content.notification.action_url) levels.push([...levels[levels.length - 1], 'action_url']);
  for (const dropped of levels) {
    if (!fits(build(dropped, titleAtMost, bodyAtMost).content)) continue;
    if (dropped.length > 0 && fits(build(dropped, null, null).content)) return build(dropped, null, null);
    if (cuttable(body)) {
      const kept = longestFitting(body.length - 1, (k) => fits(build(dropped, null, k).content));
      if (kept !== null) return build(dropped, null, kept);
    }
    if (cuttable(title)) {
      const kept = longestFitting(title.length - 1, (k) => fits(build(dropped, k, bodyAtMost).content));
      if (kept !== null) return build(dropped, kept, bodyAtMost);
    }
    // Only reached when neither text can be cut and what is left fits.
    return build(dropped, titleAtMost, bodyAtMost);
  }
  return build(levels[levels.length - 1], titleAtMost, bodyAtMost);
}

/** The largest k in 0..max for which fits(k) holds (fits is monotonic: a longer prefix never weighs less), or null. */
function longestFitting(max: number, fits: (k: number) => boolean): number | null {
  if (max < 0 || !fits(0)) return null;
  let low = 0;
  let high = max;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (fits(middle)) low = middle;
    else high = middle - 1;
  }
  return low;
}

const segmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });

function graphemes(text: string | null | undefined): string[] {
  return text ? Array.from(segmenter.segment(text), (segment) => segment.segment) : [];
}

function cut(text: string[], kept: number): string {
  return text.slice(0, kept).join('') + ellipsis;
}

/** Characters as the document's maxLength counts them: Unicode code points. */
function codePoints(text: string[], kept: number): number {
  let count = 0;
  for (const grapheme of text.slice(0, kept)) count += Array.from(grapheme).length;
  return count;
}

/**
 * Problems that would make a provider refuse pushes of this notification, keyed like 422 errors:
 * reserved data keys, and what cannot be cut (data, options, platform_overrides) being too large
 * alone, measured with the title and body cut to "…" and without the URLs, for the default content
 * and every localization (one that adds a title or body the default lacks weighs an "…" more).
 */
export function payloadProblems(content: PushContent): Record<string, string[]> {
  const problems: Record<string, string[]> = {};
  for (const key of Object.keys(content.data ?? {})) {
    if (reservedDataKeys.includes(key) || key.startsWith(reservedFcmDataPrefix)) {
      problems[`data.${key}`] = [`The data key "${key}" is reserved by Herald.`];
    } else if (fcmReservedDataKeys.includes(key) || fcmReservedDataPrefixes.some((prefix) => key.startsWith(prefix))) {
      problems[`data.${key}`] = [`The data key "${key}" is reserved by FCM.`];
    }
  }
  // Cut to "…", texts differ only by being there or not: one smallest push per such shape, named
  // after the first content (the default, else a localization) that has it.
  const smallest = new Map<string, { tag: string | null; content: PushContent }>();
  for (const tag of [null, ...Object.keys(content.notification.localizations ?? {})]) {
    const { title, body } = contentFor(content, tag).notification;
    const notification = { title: title ? ellipsis : title, body: body ? ellipsis : body, image_url: null, action_url: null };
    const shape = JSON.stringify(notification);
    if (!smallest.has(shape)) smallest.set(shape, { tag, content: { ...badgeInRange(content).content, notification } });
  }
  // Not web: data that fits APNs and FCM but not Web Push's smaller plaintext was accepted before web
  // existed, and still is; such a push fails on web alone (providers/web-push.ts, PayloadTooLarge).
  for (const platform of ['ios', 'android'] as const) {
    const measured = [...smallest.values()].map(({ tag, content }) => ({ tag, bytes: payloadBytes(content, platform) }));
    const largest = measured.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    if (largest.bytes > payloadLimits[platform]) {
      const whose = largest.tag === null ? '' : ` of the "${largest.tag}" localization`;
      (problems.data ??= []).push(
        `The ${providerNames[platform]} payload${whose} would be ${largest.bytes} bytes with the title and body cut to "${ellipsis}" and without the URLs; the limit is ${payloadLimits[platform]}.`,
      );
    }
  }
  return problems;
}

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

function compact<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], null | undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined && v !== null)) as never;
}

function nonEmpty<T extends object>(value: T): T | undefined {
  return Object.keys(value).length > 0 ? value : undefined;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Overrides win; nested objects merge, everything else is replaced. Keys are read and written as
 * own properties, so one named `__proto__` is a key like any other, not the prototype.
 */
export function deepMerge(base: JsonObject, override: JsonObject): JsonObject {
  const merged: JsonObject = { ...base };
  for (const [key, value] of Object.entries(override)) {
    const current = Object.hasOwn(merged, key) ? merged[key] : undefined;
    const next = isObject(value) && isObject(current) ? deepMerge(current, value) : value;
    Object.defineProperty(merged, key, { value: next, enumerable: true, writable: true, configurable: true });
  }
  return merged;
}

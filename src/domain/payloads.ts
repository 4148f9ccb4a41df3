// What each provider receives for a notification. Used at send time to refuse a payload the
// provider would reject (422 rather than a failed fanout), and by the deliver jobs to build pushes.
import type { components } from '../generated/api.ts';

type Send = components['schemas']['NotificationSend'];
export type PushContent = Pick<Send, 'notification' | 'data' | 'options'>;
export type PushIds = { deliveryId: string; notificationId: string };
type JsonObject = Record<string, unknown>;

/** APNs rejects a payload over 4 KB (PayloadTooLarge); FCM a message whose data and notification exceed 4 KB. */
export const apnsPayloadLimit = 4096;
export const fcmPayloadLimit = 4096;

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
  const data: Record<string, string> = {};
  for (const [key, value] of Object.entries(content.data ?? {})) {
    data[key] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  Object.assign(
    data,
    compact({
      herald_delivery_id: ids.deliveryId,
      herald_notification_id: ids.notificationId,
      herald_action_url: actionUrl ?? undefined,
    }),
  );
  const notification = compact({ title, body, imageUrl });
  const android = compact({
    priority: options.priority,
    collapseKey: options.collapse_id,
    notification: nonEmpty(
      compact({ channelId: options.android_channel_id, sound: options.sound, notificationCount: options.badge }),
    ),
  });
  return compact({
    notification: nonEmpty(notification),
    data,
    android: deepMerge(android, options.platform_overrides?.android ?? {}),
  });
}

/** Problems that would make a provider refuse every push of this notification, keyed like 422 errors. */
export function payloadProblems(content: PushContent): Record<string, string[]> {
  const problems: Record<string, string[]> = {};
  // Ids have a fixed length, so a sample measures exactly what a real push will weigh.
  const sample = { deliveryId: '00000000-0000-7000-8000-000000000000', notificationId: '00000000-0000-7000-8000-000000000000' };
  for (const key of Object.keys(content.data ?? {})) {
    if (reservedDataKeys.includes(key) || key.startsWith(reservedFcmDataPrefix)) {
      problems[`data.${key}`] = [`The data key "${key}" is reserved by Herald.`];
    } else if (fcmReservedDataKeys.includes(key) || fcmReservedDataPrefixes.some((prefix) => key.startsWith(prefix))) {
      problems[`data.${key}`] = [`The data key "${key}" is reserved by FCM.`];
    }
  }
  const apnsBytes = byteLength(apnsPayload(content, sample));
  if (apnsBytes > apnsPayloadLimit) {
    problems.notification = [`The APNs payload would be ${apnsBytes} bytes; the limit is ${apnsPayloadLimit}.`];
  }
  const message = fcmMessage(content, sample);
  const fcmBytes = byteLength({ data: message.data, notification: message.notification });
  if (fcmBytes > fcmPayloadLimit) {
    (problems.notification ??= []).push(`The FCM message would be ${fcmBytes} bytes; the limit is ${fcmPayloadLimit}.`);
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

/** Overrides win; nested objects merge, everything else is replaced. */
export function deepMerge(base: JsonObject, override: JsonObject): JsonObject {
  const merged: JsonObject = { ...base };
  for (const [key, value] of Object.entries(override)) {
    merged[key] = isObject(value) && isObject(merged[key]) ? deepMerge(merged[key], value) : value;
  }
  return merged;
}

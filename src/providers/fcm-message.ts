// A message as Herald builds it (fcmMessage, in the field names of firebase-admin's `Message`, which
// `platform_overrides.android` is documented in) turned into the JSON of FCM's HTTP v1 API: the
// renames, duration strings and checks firebase-admin's sendEach applied before it sent. The same
// steps in the same order, so the JSON is the same to the byte (test/providers/fcm-message.test.ts
// compares it with firebase-admin's). Herald's messages have a token, data, a notification and
// android settings only: webpush, apns, fcmOptions and topics are never sent.

/** A message FCM would refuse, found before it is sent (firebase-admin's `messaging/invalid-payload`). */
export class InvalidFcmMessage extends Error {}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const isNonEmptyString = (value: unknown): value is string => typeof value === 'string' && value !== '';
const isNumber = (value: unknown): value is number => typeof value === 'number' && !Number.isNaN(value);
const isNonEmptyArray = (value: unknown): value is unknown[] => Array.isArray(value) && value.length > 0;

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new InvalidFcmMessage(message);
}

/** `{ message }` as FCM's send takes it. Throws InvalidFcmMessage. `message` is not modified. */
export function fcmSendBody(message: Json): { message: Json } {
  const copy = copyChanged(message);
  check([copy.token, copy.topic, copy.condition].filter(isNonEmptyString).length === 1, 'Exactly one of topic, token or condition is required');
  stringMap(copy.data, 'data');
  android(copy.android);
  notification(copy.notification);
  return { message: copy };
}

/**
 * A copy of the objects the steps below change, each shallow and in its key order: the others
 * (data maps, strings) are shared with `message`, which the pushes of a chunk may share in turn.
 * A deep copy of every message cost more than all the steps.
 */
function copyChanged(message: Json): Json {
  const copy = { ...message };
  if (isObject(copy.notification)) copy.notification = { ...copy.notification };
  if (isObject(copy.android)) {
    const android = (copy.android = { ...copy.android });
    if (isObject(android.notification)) {
      const notification = (android.notification = { ...android.notification });
      if (isObject(notification.lightSettings)) notification.lightSettings = { ...notification.lightSettings };
    }
  }
  return copy;
}

function stringMap(map: unknown, label: string): void {
  if (map === undefined) return;
  check(isObject(map), `${label} must be a non-null object`);
  check(
    Object.values(map).every((value) => typeof value === 'string'),
    `${label} must only contain string values`,
  );
}

/** A key renamed moves to the end of its object, as firebase-admin's renameProperties does it. */
function rename(object: Json, names: Record<string, string>): void {
  for (const [from, to] of Object.entries(names)) {
    if (!(from in object)) continue;
    object[to] = object[from];
    delete object[from];
  }
}

/** Milliseconds as a protobuf Duration string: 1500 → "1.500000000s", 30000 → "30s". */
export function durationString(milliseconds: number): string {
  const seconds = Math.floor(milliseconds / 1000);
  const nanos = Math.floor((milliseconds - seconds * 1000) * 1_000_000);
  return nanos > 0 ? `${seconds}.${String(nanos).padStart(9, '0')}s` : `${seconds}s`;
}

function isUrl(text: unknown): boolean {
  if (typeof text !== 'string' || /[^a-z0-9:/?#[\]@!$&'()*+,;=.\-_~%]/i.test(text)) return false;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  const hostname = /^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*$/.test(url.hostname) || /^\[[a-fA-F0-9:.]+\]$/.test(url.hostname);
  return hostname && (url.pathname === '' || url.pathname === '/' || /^(\/[\w\-.~!$'()*+,;=:@%]+)*\/?$/.test(url.pathname));
}

function notification(value: unknown): void {
  if (value === undefined) return;
  check(isObject(value), 'notification must be a non-null object');
  check(value.imageUrl === undefined || isUrl(value.imageUrl), 'notification.imageUrl must be a valid URL string');
  check(!('imageUrl' in value && 'image' in value), 'Multiple specifications for imageUrl in Notification');
  rename(value, { imageUrl: 'image' });
}

function android(config: unknown): void {
  if (config === undefined) return;
  check(isObject(config), 'android must be a non-null object');
  if (config.ttl !== undefined) {
    check(isNumber(config.ttl) && config.ttl >= 0, 'TTL must be a non-negative duration in milliseconds');
    config.ttl = durationString(config.ttl);
  }
  stringMap(config.data, 'android.data');
  androidNotification(config.notification);
  if (config.fcmOptions !== undefined) {
    check(isObject(config.fcmOptions), 'fcmOptions must be a non-null object');
    check(config.fcmOptions.analyticsLabel === undefined || typeof config.fcmOptions.analyticsLabel === 'string', 'analyticsLabel must be a string value');
  }
  rename(config, {
    collapseKey: 'collapse_key',
    restrictedPackageName: 'restricted_package_name',
    directBootOk: 'direct_boot_ok',
    bandwidthConstrainedOk: 'bandwidth_constrained_ok',
    restrictedSatelliteOk: 'restricted_satellite_ok',
  });
}

const upper = (value: unknown, label: string): string => {
  check(typeof value === 'string', `android.notification.${label} must be a string`);
  return value.toUpperCase();
};

function androidNotification(notification: unknown): void {
  if (notification === undefined) return;
  check(isObject(notification), 'android.notification must be a non-null object');
  const { color, bodyLocArgs, bodyLocKey, titleLocArgs, titleLocKey, imageUrl } = notification;
  check(color === undefined || (typeof color === 'string' && /^#[0-9a-fA-F]{6}$/.test(color)), 'android.notification.color must be in the form #RRGGBB');
  check(!isNonEmptyArray(bodyLocArgs) || isNonEmptyString(bodyLocKey), 'android.notification.bodyLocKey is required when specifying bodyLocArgs');
  check(!isNonEmptyArray(titleLocArgs) || isNonEmptyString(titleLocKey), 'android.notification.titleLocKey is required when specifying titleLocArgs');
  check(imageUrl === undefined || isUrl(imageUrl), 'android.notification.imageUrl must be a valid URL string');
  // firebase-admin wants a Date, which JSON cannot carry.
  check(notification.eventTimestamp === undefined, 'android.notification.eventTimestamp must be a valid `Date` object');
  if (notification.vibrateTimingsMillis !== undefined) {
    const timings = notification.vibrateTimingsMillis;
    check(isNonEmptyArray(timings), 'android.notification.vibrateTimingsMillis must be a non-empty array of numbers');
    notification.vibrateTimingsMillis = timings.map((value) => {
      check(isNumber(value) && value >= 0, 'android.notification.vibrateTimingsMillis must be non-negative durations in milliseconds');
      return durationString(value);
    });
  }
  if (notification.priority !== undefined) notification.priority = `PRIORITY_${upper(notification.priority, 'priority')}`;
  if (notification.proxy !== undefined) notification.proxy = upper(notification.proxy, 'proxy');
  if (notification.visibility !== undefined) notification.visibility = upper(notification.visibility, 'visibility');
  lightSettings(notification.lightSettings);
  rename(notification, {
    clickAction: 'click_action',
    bodyLocKey: 'body_loc_key',
    bodyLocArgs: 'body_loc_args',
    titleLocKey: 'title_loc_key',
    titleLocArgs: 'title_loc_args',
    channelId: 'channel_id',
    imageUrl: 'image',
    eventTimestamp: 'event_time',
    localOnly: 'local_only',
    priority: 'notification_priority',
    vibrateTimingsMillis: 'vibrate_timings',
    defaultVibrateTimings: 'default_vibrate_timings',
    defaultSound: 'default_sound',
    lightSettings: 'light_settings',
    defaultLightSettings: 'default_light_settings',
    notificationCount: 'notification_count',
  });
}

function lightSettings(settings: unknown): void {
  if (settings === undefined) return;
  check(isObject(settings), 'android.notification.lightSettings must be a non-null object');
  for (const [key, label] of [
    ['lightOnDurationMillis', 'lightOnDurationMillis'],
    ['lightOffDurationMillis', 'lightOffDurationMillis'],
  ] as const) {
    const value = settings[key];
    check(isNumber(value) && value >= 0, `android.notification.lightSettings.${label} must be a non-negative duration in milliseconds`);
    settings[key] = durationString(value);
  }
  const color = settings.color;
  check(
    typeof color === 'string' && /^#[0-9a-fA-F]{6}([0-9a-fA-F]{2})?$/.test(color),
    'android.notification.lightSettings.color must be in the form #RRGGBB or #RRGGBBAA format',
  );
  const rgba = color.length === 7 ? `${color}FF` : color;
  const channel = (at: number) => parseInt(rgba.slice(at, at + 2), 16) / 255;
  settings.color = { red: channel(1), green: channel(3), blue: channel(5), alpha: channel(7) };
  rename(settings, { lightOnDurationMillis: 'light_on_duration', lightOffDurationMillis: 'light_off_duration' });
}

// Delivery at each device's local time (`options.local_time`): pure rules on time zones, written on
// Node's own time zone data (Intl.DateTimeFormat), so that a zone name the workers accept is one
// they can compute with. No library: the rules wanted (a time inside a daylight-saving gap goes out
// at the first minute after the gap, a repeated time at its first occurrence) are not what the
// common libraries do (luxon moves a gap time forward by the gap's length), and the arithmetic on
// Intl's offsets is small.
import { LRUCache } from 'lru-cache';
import { addFieldError, fieldErrors, type FieldErrors } from './errors.ts';

/** A wall-clock time of day, 24-hour. */
export type LocalTime = { hour: number; minute: number };

/** The zone of installations without a valid `device.timezone`, when the send names none. */
export const defaultTimeZone = 'UTC';

/** `HH:MM`, 24-hour, as the document's pattern states it. */
const localTimeFormat = /^([01][0-9]|2[0-3]):([0-5][0-9])$/;

export function parseLocalTime(text: string): LocalTime | null {
  const match = localTimeFormat.exec(text);
  return match ? { hour: Number(match[1]), minute: Number(match[2]) } : null;
}

/**
 * A formatter of wall-clock parts in one zone, per name given (null: not a zone). Bounded: device
 * time zones are whatever clients registered, and a fanout asks about each distinct one once.
 */
const formatters = new LRUCache<string, { formatter: Intl.DateTimeFormat | null }>({ max: 2_000 });

function formatterOf(zone: string): Intl.DateTimeFormat | null {
  let entry = formatters.get(zone);
  if (!entry) {
    formatters.set(zone, (entry = { formatter: newFormatter(zone) }));
  }
  return entry.formatter;
}

/**
 * Intl refuses a name it does not know with a RangeError, and knows every name of its time zone
 * database, aliases included (`UTC`, `Etc/UTC`, `US/Eastern`), which `Intl.supportedValuesOf`
 * leaves out. It also takes UTC offsets (`+05:00`), which are no zone name: an offset has no
 * daylight saving, and a device reports a zone, so those are refused.
 */
function newFormatter(zone: string): Intl.DateTimeFormat | null {
  if (zone.length === 0 || /^[+\-\u2212]/.test(zone)) return null;
  try {
    return new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
}

/** Whether `zone` names a time zone of the IANA database that Node knows (case-insensitively, aliases included). */
export function isTimeZone(zone: string): boolean {
  return formatterOf(zone) !== null;
}

/** The zone an installation's push is timed in: its own when valid, else the send's fallback. */
export function zoneOf(deviceZone: string | null | undefined, fallbackZone: string): string {
  return deviceZone != null && isTimeZone(deviceZone) ? deviceZone : fallbackZone;
}

const minuteMs = 60_000;
const dayMs = 86_400_000;

type Wall = { year: number; month: number; day: number; hour: number; minute: number; second: number };

function wallAt(formatter: Intl.DateTimeFormat, at: number): Wall {
  const wall: Wall = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatter.formatToParts(at)) {
    if (part.type in wall) wall[part.type as keyof Wall] = Number(part.value);
  }
  return wall;
}

/** The zone's offset from UTC at an instant, in ms (to the second: the instant's milliseconds are left out). */
function offsetAt(formatter: Intl.DateTimeFormat, at: number): number {
  const wall = wallAt(formatter, at);
  const asUtc = Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second);
  return asUtc - Math.floor(at / 1000) * 1000;
}

/**
 * The instant a wall-clock time names in the zone (`wall`: that time written as if it were UTC,
 * in ms). Repeated (the clocks went back): its first occurrence. Skipped (the clocks went
 * forward over it): the first instant after the gap, the transition itself. One transition at
 * most within a day either side is assumed, which every zone's rules keep.
 */
function instantOf(formatter: Intl.DateTimeFormat, wall: number): number {
  const before = offsetAt(formatter, wall - dayMs);
  const after = offsetAt(formatter, wall + dayMs);
  const occurrences = [...new Set([before, after])]
    .map((offset) => wall - offset)
    .filter((at) => wall - offsetAt(formatter, at) === at)
    .sort((a, b) => a - b);
  if (occurrences.length > 0) return occurrences[0];
  if (before === after) return wall - before;
  // In the gap: under the old offset it would come after the transition, under the new one before.
  let lo = wall - after;
  let hi = wall - before;
  const old = offsetAt(formatter, lo);
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (offsetAt(formatter, mid) === old) lo = mid;
    else hi = mid;
  }
  return hi;
}

/**
 * When an installation in `zone` gets a push meant for `localTime`, for a send that starts at
 * `start`: at `start` itself when the installation's wall clock then reads that minute (HH:MM:00
 * to HH:MM:59), else at its next occurrence. A time the zone skips that day (daylight saving
 * starts) comes at the first minute after the gap, and `start` within that minute goes at once
 * too; a time the zone has twice (it ends) comes at its first occurrence only.
 */
export function dueInstant(localTime: LocalTime, zone: string, start: Date): Date {
  const formatter = formatterOf(zone);
  if (!formatter) throw new RangeError(`not a time zone: ${zone}`);
  const at = start.getTime();
  const now = wallAt(formatter, at);
  if (now.hour === localTime.hour && now.minute === localTime.minute) return start;
  const today = Date.UTC(now.year, now.month - 1, now.day) + (localTime.hour * 60 + localTime.minute) * minuteMs;
  // From the day before (a gap that ends after midnight moves yesterday's time into today).
  for (let days = -1; days <= 2; days += 1) {
    const due = instantOf(formatter, today + days * dayMs);
    if (due <= at && at < due + minuteMs) return start;
    if (due > at) return new Date(due);
  }
  throw new Error(`no occurrence of ${localTime.hour}:${localTime.minute} in ${zone} within two days of ${start.toISOString()}`);
}

/** A send's local-time rule, from its stored options; null when it has none. */
export type LocalTimeRule = { localTime: LocalTime; fallbackZone: string };

export function localTimeRule(options: Record<string, unknown>): LocalTimeRule | null {
  const localTime = typeof options.local_time === 'string' ? parseLocalTime(options.local_time) : null;
  if (!localTime) return null;
  const fallbackZone = typeof options.timezone === 'string' && isTimeZone(options.timezone) ? options.timezone : defaultTimeZone;
  return { localTime, fallbackZone };
}

/**
 * When each installation's push is due, by its `device.timezone` as stored (any text, or null),
 * worked out once per distinct value: a fanout's installations share a few dozen zones.
 */
export function dueByTimezone(rule: LocalTimeRule, start: Date): (deviceZone: string | null | undefined) => Date {
  const known = new Map<string | null, Date>();
  return (deviceZone) => {
    const key = deviceZone ?? null;
    let due = known.get(key);
    if (!due) known.set(key, (due = dueInstant(rule.localTime, zoneOf(key, rule.fallbackZone), start)));
    return due;
  };
}

/**
 * A broadcast's waves: its installations' distinct `device.timezone` values grouped by the instant
 * they are due, earliest first. `timezones`: the values a wave covers, as stored (invalid ones
 * included: they take the fallback zone's instant); `coversNull`: whether installations without a
 * time zone are in it (the fallback zone's wave).
 */
export type Wave = { dueAt: Date; timezones: string[]; coversNull: boolean };

export function planWaves(values: readonly (string | null)[], rule: LocalTimeRule, start: Date): Wave[] {
  const dueOf = dueByTimezone(rule, start);
  const waves = new Map<number, Wave>();
  for (const value of new Set(values)) {
    const dueAt = dueOf(value);
    let wave = waves.get(dueAt.getTime());
    if (!wave) waves.set(dueAt.getTime(), (wave = { dueAt, timezones: [], coversNull: false }));
    if (value === null) wave.coversNull = true;
    else wave.timezones.push(value);
  }
  for (const wave of waves.values()) wave.timezones.sort();
  return [...waves.values()].sort((a, b) => a.dueAt.getTime() - b.dueAt.getTime());
}

export const localTimeMessage = 'The options.local_time field must be a 24-hour time HH:MM (for example 09:00 or 18:30).';
export const timezoneNeedsLocalTimeMessage =
  'The options.timezone field needs options.local_time: it is the time zone a local time is read in for installations without a valid device.timezone.';
export const unknownTimezoneMessage = (zone: string) =>
  `The options.timezone field must name a time zone of the IANA database (for example Europe/Berlin, America/New_York or UTC); ${JSON.stringify(zone)} is not one.`;

/** The rules of `options.local_time` and `options.timezone` (the document states all but which zones exist). */
export function localTimeProblems(options: { local_time?: unknown; timezone?: unknown } | undefined): FieldErrors {
  const problems = fieldErrors();
  if (options === undefined) return problems;
  const { local_time: localTime, timezone } = options;
  if (localTime !== undefined && (typeof localTime !== 'string' || !parseLocalTime(localTime))) {
    addFieldError(problems, 'options.local_time', localTimeMessage);
  }
  if (timezone !== undefined) {
    if (typeof timezone !== 'string' || !isTimeZone(timezone)) addFieldError(problems, 'options.timezone', unknownTimezoneMessage(String(timezone)));
    else if (localTime === undefined) addFieldError(problems, 'options.timezone', timezoneNeedsLocalTimeMessage);
  }
  return problems;
}

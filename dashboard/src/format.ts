import type { Audience } from './api.ts';

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const time = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });
const hour = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const number = new Intl.NumberFormat();

export const formatDate = (iso: string | null | undefined): string => (iso ? dateTime.format(new Date(iso)) : '—');
/** The time of day alone, for a table of events minutes apart (the full date is its title). */
export const formatTime = (iso: string | null | undefined): string => (iso ? time.format(new Date(iso)) : '—');
/** The start of an hour, to the minute: "Dec 4, 2026, 1:00 PM". */
export const formatHour = (iso: string): string => hour.format(new Date(iso));
export const formatNumber = (value: number): string => number.format(value);
export const percent = (part: number, whole: number): string => (whole > 0 ? `${Math.round((part / whole) * 100)} %` : '—');

/** "3 s ago", "5 min ago": how fresh a last-seen time is, beside the date itself. */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '';
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86_400)} d ago`;
}

const conditionText: Record<string, (key: string, value?: string, values?: string[]) => string> = {
  eq: (key, value) => `${key} = ${value}`,
  ne: (key, value) => `${key} ≠ ${value}`,
  in: (key, _, values) => `${key} in ${(values ?? []).join(', ')}`,
  exists: (key) => `${key} set`,
  not_exists: (key) => `${key} not set`,
};

/** An audience in words, its conditions joined by "and" as they are ANDed: "android and plan = pro". */
export function describeAudience(audience: Audience): string {
  if (audience.all) return 'every installation';
  const parts = [
    ...(audience.platforms?.length ? [audience.platforms.join(' or ')] : []),
    ...(audience.tags ?? []).map((tag) => conditionText[tag.op](tag.key, tag.value, tag.values)),
    ...(audience.locales?.length ? [`locale ${audience.locales.join(' or ')}`] : []),
    ...(audience.active_within_days ? [`seen within ${audience.active_within_days} d`] : []),
  ];
  return parts.join(' and ');
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const time = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });
const number = new Intl.NumberFormat();

export const formatDate = (iso: string | null | undefined): string => (iso ? dateTime.format(new Date(iso)) : '—');
/** The time of day alone, for a table of events minutes apart (the full date is its title). */
export const formatTime = (iso: string | null | undefined): string => (iso ? time.format(new Date(iso)) : '—');
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

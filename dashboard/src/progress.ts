// How far a running send has got, from what the API says of it: its statistics (installations
// walked, pushes accepted, failed, skipped), its target users, and for a send at each device's local
// time the due instants of its pending deliveries. Pure, so the page's figures can be checked plainly.
import type { Delivery, Notification } from './api.ts';

const finalStatuses: ReadonlySet<Notification['status']> = new Set(['completed', 'partial', 'failed', 'cancelled']);
export const hasEnded = (notification: Notification): boolean => finalStatuses.has(notification.status);

export type Progress = {
  /**
   * A broadcast's walk through its audience: the users of the installations walked so far, of the
   * target users counted when it started (null until they are counted, and for a send to user ids,
   * whose fanout is one step). Users, not installations: the document counts an audience's target in users.
   */
  walk: { users: number; of: number; percent: number } | null;
  /** The installations walked so far and what became of their pushes; `pending` is not pushed yet. */
  pushes: { installations: number; accepted: number; failed: number; skipped: number; pending: number; percent: number };
};

export function progressOf(notification: Notification): Progress {
  const s = notification.statistics;
  const broadcast = Boolean(notification.audience);
  const ofUsers = notification.target_users;
  const walk =
    broadcast && ofUsers > 0
      ? { users: s.users, of: ofUsers, percent: notification.completed_at ? 100 : Math.min(100, Math.floor((s.users / ofUsers) * 100)) }
      : null;
  const done = s.accepted + s.failed + s.skipped;
  const pending = Math.max(0, s.installations - done);
  return {
    walk,
    pushes: {
      installations: s.installations,
      accepted: s.accepted,
      failed: s.failed,
      skipped: s.skipped,
      pending,
      percent: s.installations > 0 ? Math.floor((done / s.installations) * 100) : 0,
    },
  };
}

export type DueHour = { hour: string | null; pushes: number };

/**
 * Pending deliveries counted by the UTC hour they are due in (`scheduled_for`), soonest first; those
 * due at the send's start (`scheduled_for` null) first of all, as `hour: null`.
 */
export function dueByHour(pending: Pick<Delivery, 'scheduled_for'>[]): DueHour[] {
  const counts = new Map<string | null, number>();
  for (const delivery of pending) {
    const hour = delivery.scheduled_for ? `${delivery.scheduled_for.slice(0, 13)}:00:00Z` : null;
    counts.set(hour, (counts.get(hour) ?? 0) + 1);
  }
  return [...counts.entries()]
    .map(([hour, pushes]) => ({ hour, pushes }))
    .sort((a, b) => (a.hour === null ? -1 : b.hour === null ? 1 : a.hour.localeCompare(b.hour)));
}

/** The first delay between two reads of a running send, and the longest it grows to while nothing changes. */
export const followMs = { first: 1000, longest: 30_000 };

/**
 * When to read a notification again: never once it has ended; soon while its figures move; twice
 * as long after each read that found nothing new, up to `followMs.longest` (a local-time send can
 * wait hours between two waves).
 */
export function nextReadMs(ended: boolean, changed: boolean, lastMs: number | null): number | null {
  if (ended) return null;
  if (changed || lastMs === null) return followMs.first;
  return Math.min(followMs.longest, lastMs * 2);
}

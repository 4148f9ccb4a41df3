// How far a running send has got, from what the API says of it: a broadcast's walk through its
// audience (`progress`: installations walked of those it has to read), what became of the pushes of
// the installations walked (its statistics), and for a send at each device's local time how many are
// still due per hour. Pure, so the page's figures can be checked plainly.
import type { Delivery, Notification } from './api.ts';

const finalStatuses: ReadonlySet<Notification['status']> = new Set(['completed', 'partial', 'failed', 'cancelled']);
export const hasEnded = (notification: Notification): boolean => finalStatuses.has(notification.status);

export type Progress = {
  /**
   * A broadcast's walk through its audience: the installations walked so far, of those it has to
   * read (counted as it starts; null until then, and for any other send, whose fanout is one step).
   */
  walk: { walked: number; of: number; percent: number } | null;
  /** The installations walked so far and what became of their pushes; `pending` is not pushed yet. */
  pushes: { installations: number; accepted: number; failed: number; skipped: number; pending: number; percent: number };
};

export function progressOf(notification: Notification): Progress {
  const s = notification.statistics;
  const of = notification.progress?.installations ?? null;
  const walked = notification.progress?.walked ?? 0;
  const walkEnded = Boolean(notification.progress?.walk_ended_at);
  const walk =
    of === null
      ? null
      : { walked, of, percent: walkEnded ? 100 : of > 0 ? Math.min(99, Math.floor((walked / of) * 100)) : 0 };
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

type Wave = NonNullable<Notification['progress']>['waves'][number];

/**
 * A local-time broadcast's installations still to walk, by the UTC hour their wave is due in: each
 * wave not ended counts what it has not walked yet (its deliveries are written when it is walked).
 */
export function wavesDueByHour(waves: Wave[]): DueHour[] {
  const counts = new Map<string, number>();
  for (const wave of waves) {
    if (wave.ended_at !== null) continue;
    const hour = `${wave.due_at.slice(0, 13)}:00:00Z`;
    counts.set(hour, (counts.get(hour) ?? 0) + Math.max(0, wave.installations - wave.walked));
  }
  return [...counts.entries()].map(([hour, pushes]) => ({ hour, pushes })).sort((a, b) => a.hour.localeCompare(b.hour));
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

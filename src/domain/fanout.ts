// The rules of fanout and delivery, free of I/O so that they can be tested directly: who gets a
// push, how long a push may wait, how retries back off, and what a notification ends as.
import type { Notification } from '../db/entities.ts';
import type { Candidate } from '../db/sql/deliveries.ts';
import type { PushContent } from './payloads.ts';

export type SkipReason = 'permission_denied' | 'permission_not_determined' | 'no_credentials' | 'duplicate_identifier';
export type Classified = Candidate & { state: 'pending' | 'skipped'; reason: SkipReason | null };

export function isDataOnly(content: PushContent): boolean {
  return !content.notification.title && !content.notification.body;
}

/**
 * Every active installation of the target users is considered; each becomes a pending delivery
 * or a skipped one with its reason. One device gets one push: when installations share an
 * identifier, the most recently seen one keeps it.
 */
export function classify(
  candidates: Candidate[],
  context: { dataOnly: boolean; platformsWithCredentials: ReadonlySet<string> },
): Classified[] {
  const skipReason = (candidate: Candidate): SkipReason | null => {
    if (candidate.permission === 'denied') return 'permission_denied';
    // iOS shows nothing before the user answers the prompt, but silent pushes still arrive.
    if (candidate.platform === 'ios' && candidate.permission === 'not_determined' && !context.dataOnly) {
      return 'permission_not_determined';
    }
    if (!context.platformsWithCredentials.has(candidate.platform)) return 'no_credentials';
    return null;
  };
  const classified = candidates.map((candidate) => {
    const reason = skipReason(candidate);
    return { ...candidate, state: reason ? ('skipped' as const) : ('pending' as const), reason };
  });
  const newestFirst = [...classified].sort((a, b) => b.lastSeenAt.getTime() - a.lastSeenAt.getTime());
  const claimed = new Set<string>();
  for (const delivery of newestFirst) {
    if (delivery.state !== 'pending') continue;
    const device = `${delivery.platform}:${delivery.providerIdentifier}`;
    if (claimed.has(device)) {
      delivery.state = 'skipped';
      delivery.reason = 'duplicate_identifier';
    } else {
      claimed.add(device);
    }
  }
  return classified;
}

/**
 * How long a push without a ttl keeps being retried. Retries follow the notification's time to
 * live, not an attempt count: a provider outage of minutes must not fail pushes that were
 * meant to arrive whenever they can. 24 h: what a "this happened today" push is worth.
 */
export const defaultRetryHorizonSeconds = 24 * 3600;
const maxDelaySeconds = 300;

/** Exponential backoff (1, 2, 4 … 300 s, ±20 % jitter), never sooner than the provider asked. */
export function retryDelaySeconds(attempt: number, retryAfterSeconds?: number, random = Math.random): number {
  const backoff = Math.min(maxDelaySeconds, 2 ** Math.max(0, attempt - 1));
  const jittered = backoff * (0.8 + 0.4 * random());
  return Math.ceil(Math.max(jittered, retryAfterSeconds ?? 0));
}

/**
 * The queue lane of a notification's jobs: pg-boss fetches higher priorities first, so the fanout
 * and pushes of an `options.priority: high` notification overtake normal ones already queued.
 */
export function jobPriority(options: { priority?: unknown }): number {
  return options.priority === 'high' ? highPriority : 0;
}
export const highPriority = 10;

export function ttlSeconds(notification: Pick<Notification, 'options'>): number | undefined {
  const ttl = notification.options.ttl;
  return typeof ttl === 'number' ? ttl : undefined;
}

/**
 * A push's times: its notification's options, creation and `send_at`, and its delivery's own due
 * time (`dueAt`: a send at each device's local time, domain/local-time.ts), when it has one.
 */
export type Timed = Pick<Notification, 'options' | 'createdAt'> & { scheduledFor?: Date | null; dueAt?: Date | null };

/**
 * What a ttl counts from: the delivery's own due time, else the time a scheduled send was due,
 * else the send (the time queued counts).
 */
function sentAt(notification: Timed): Date {
  return notification.dueAt ?? notification.scheduledFor ?? notification.createdAt;
}

/** A push's times: its notification's, due at the delivery's own time when it has one. */
export function pushTimes(notification: Timed, dueAt: Date | null | undefined): Timed {
  return dueAt ? { options: notification.options, createdAt: notification.createdAt, scheduledFor: notification.scheduledFor, dueAt } : notification;
}

/** When the push stops being worth delivering: sent + ttl. */
export function expiresAt(notification: Timed): Date | null {
  const ttl = ttlSeconds(notification);
  return ttl === undefined ? null : new Date(sentAt(notification).getTime() + ttl * 1000);
}

/** How long before its expiry a push's last retry is due: a due job may start a queue poll late. */
const lastAttemptMarginSeconds = 3;

/**
 * When a push answered transiently (or not at all) is tried again, in seconds from `now`, and the
 * latest its retry job may run: after its backoff, but at the latest just before its expiry (less
 * a margin), so that a push whose backoff would outlast its ttl gets one last attempt rather than
 * none. With no time left for an attempt, the job comes back once the ttl has passed and records
 * the delivery `expired` then, never before. Null: no attempt may follow and the ttl is over (or
 * is 0, "now or never").
 */
export function retryWindow(
  notification: Timed,
  attempt: number,
  now: Date,
  retryAfterSeconds?: number,
): { delay: number; latest: number } | null {
  if (!mayAttempt(notification, attempt + 1, now)) return null;
  const ttl = ttlSeconds(notification) ?? defaultRetryHorizonSeconds;
  const secondsLeft = (sentAt(notification).getTime() + ttl * 1000 - now.getTime()) / 1000;
  const backoff = retryDelaySeconds(attempt, retryAfterSeconds);
  const latest = Math.floor(secondsLeft - lastAttemptMarginSeconds);
  if (backoff <= latest) return { delay: backoff, latest };
  if (latest >= 1) return { delay: latest, latest };
  const pastExpiry = Math.ceil(secondsLeft) + 1;
  return { delay: pastExpiry, latest: pastExpiry };
}

/**
 * Whether an attempt may still be made: until sent + ttl (the default horizon without a ttl). A
 * ttl of 0 means "now or never": one attempt, no retry. `at` lets a retry be judged at the time it
 * would run.
 */
export function mayAttempt(notification: Timed, attempt: number, at: Date = new Date()): boolean {
  const ttl = ttlSeconds(notification);
  if (ttl === 0) return attempt <= 1;
  return at.getTime() <= sentAt(notification).getTime() + (ttl ?? defaultRetryHorizonSeconds) * 1000;
}

/**
 * Whether a push's attempt is written before it goes out rather than with its outcome: for ttl 0
 * (now or never) only, whose single attempt must stay single even if the process dies before the
 * outcome is recorded. Otherwise retries are bounded by time, and one write per push is cheaper.
 */
export function countsAttemptBeforePush(notification: Pick<Notification, 'options'>): boolean {
  return ttlSeconds(notification) === 0;
}

export type FinalStatus = 'completed' | 'partial' | 'failed';

/** Skipped deliveries are nobody's failure: they do not make a notification partial. */
export function finalStatus(counts: { accepted: number; failed: number }): FinalStatus {
  if (counts.failed === 0) return 'completed';
  return counts.accepted > 0 ? 'partial' : 'failed';
}

// The rules a fanout and a deliver batch apply between their reads and their writes, free of I/O
// so that they can be tested with plain values: what each candidate gets (its delivery, its
// localization, its cut), how pending deliveries are put in deliver batches, which claimed
// deliveries can still be pushed, and what a provider's answers leave to record. The job runners
// (worker/fanout-job.ts, worker/jobs.ts) only move data between these and the database.
import { newId } from '../db/ids.ts';
import type { Candidate, ClaimedDelivery, DeliveryResult, MovedCount, NewDelivery, PushedNotification } from '../db/sql/deliveries.ts';
import type { Invalidation } from '../db/sql/installations.ts';
import type { FannedNotification } from '../db/sql/notifications.ts';
import { chunk } from './chunk.ts';
import { classify, isDataOnly, jobPriority, mayAttempt, pushTimes, retryWindow } from './fanout.ts';
import { dueByTimezone, localTimeRule } from './local-time.ts';
import { localeMatcher } from './locales.ts';
import { contentFor, fitToPlatform, pushContent, type PushContent } from './payloads.ts';
import { providerOf, type Platform } from './platforms.ts';
import { throttledChunkSize, throttlePerMinute } from './throttle.ts';

// ---------------------------------------------------------------------------------------------
// Fanout

/** When a candidate's push is due; null: at the send's start. */
export type DueTime = (candidate: Candidate) => Date | null;

/**
 * When each candidate's push is due: for a send at each device's local time (`options.local_time`),
 * the next occurrence of that time in its `device.timezone` (else the send's fallback zone) from
 * the send's start (`send_at`, else its creation), null when that is the start itself; for any
 * other send, null.
 */
export function dueAtLocalTime(notification: Pick<FannedNotification, 'options' | 'createdAt' | 'scheduledFor'>): DueTime {
  const rule = localTimeRule(notification.options);
  if (!rule) return () => null;
  const start = notification.scheduledFor ?? notification.createdAt;
  const dueOf = dueByTimezone(rule, start);
  return (candidate) => {
    const due = dueOf(candidate.deviceTimezone);
    return due.getTime() === start.getTime() ? null : due;
  };
}

/**
 * One notification's fanout: its deliveries to write, and its skips per platform (for the metrics).
 * `dueOf`: when each pending delivery is due (a wave of a broadcast passes its own instant).
 */
export function fanOut(
  notification: FannedNotification,
  candidates: Candidate[],
  dueOf: DueTime = dueAtLocalTime(notification),
): { deliveries: NewDelivery[]; skips: Map<string, MovedCount[]> } {
  const { id: notificationId, applicationId } = notification;
  const tags = Object.keys(notification.localizations ?? {});
  const content = pushContent(notification);
  const withCredentials = new Set(
    Object.entries(providerOf)
      .filter(([, provider]) => notification.credentialProviders.includes(provider))
      .map(([platform]) => platform),
  );
  const classified = classify(candidates, { dataOnly: isDataOnly(content), platformsWithCredentials: withCredentials });
  // Each device gets its localization (or the default content, null); the push is cut to fit
  // once per platform and localization; the deliver jobs cut it the same way (fittedContents).
  const localeOf = tags.length > 0 ? localeMatcher(tags) : () => null;
  const truncationOf = fitsOnce((platform, locale) => fitToPlatform(contentFor(content, locale), platform).truncation);
  const deliveries = classified.map((delivery): NewDelivery => {
    const locale = delivery.state === 'pending' ? localeOf(delivery.deviceLocale) : null;
    return {
      ...delivery,
      applicationId,
      notificationId,
      deliveryId: newId(),
      locale,
      truncation: delivery.state === 'pending' ? truncationOf(delivery.platform, locale) : null,
      // A skipped delivery is not due at all: it ended at the fanout.
      scheduledFor: delivery.state === 'pending' ? dueOf(delivery) : null,
    };
  });
  return { deliveries, skips: skipsByPlatform(classified) };
}

/** The fanout's skipped deliveries, per platform, counted by reason. */
export function skipsByPlatform(classified: readonly { platform: string; state: string; reason: string | null }[]): Map<string, MovedCount[]> {
  const skips = new Map<string, MovedCount[]>();
  for (const { platform, state, reason } of classified) {
    if (state !== 'skipped') continue;
    const counts = skips.get(platform) ?? [];
    skips.set(platform, counts);
    const same = counts.find((count) => count.reason === reason);
    if (same) same.count += 1;
    else counts.push({ state: 'skipped', reason, count: 1 });
  }
  return skips;
}

/** `fit` computed once per platform and localization (null: the default content), however many pushes share them. */
export function fitsOnce<T>(fit: (platform: Platform, locale: string | null) => T): (platform: Platform, locale: string | null) => T {
  const fitted = new Map<string, { value: T }>();
  return (platform, locale) => {
    const key = locale === null ? platform : `${platform}:${locale}`;
    let entry = fitted.get(key);
    if (!entry) fitted.set(key, (entry = { value: fit(platform, locale) }));
    return entry.value;
  };
}

/**
 * A deliver batch before it is queued: its lane (priority), the pending deliveries it pushes, and
 * when they are due (its job is deferred to then; null: now).
 */
export type DeliverBatchPlan = { applicationId: string; priority: number; platform: Platform; startAfter: Date | null; deliveryIds: string[] };

/**
 * The fanned-out notifications' pending deliveries in deliver batches of at most `batchSize`, by
 * application, lane, platform and due time: many small notifications share a batch, one large one
 * fills batches of its own, and a send at each device's local time makes one set of batches per
 * instant its deliveries are due (a few dozen at most: one per UTC offset). A throttled
 * notification's are always in batches of their own: a job that hands back what its pace cannot
 * push yet hands back none of another notification's.
 */
export function deliverBatches(fanouts: { notification: FannedNotification; deliveries: NewDelivery[] }[], batchSize: number): DeliverBatchPlan[] {
  const lanes = new Map<string, DeliverBatchPlan>();
  for (const { notification, deliveries } of fanouts) {
    const { applicationId } = notification;
    const priority = jobPriority(notification.options);
    const ownBatches = throttlePerMinute(notification.options) === null ? '' : `:${notification.id}`;
    for (const { platform, deliveryId, state, scheduledFor } of deliveries) {
      if (state !== 'pending') continue;
      const startAfter = scheduledFor ?? null;
      const key = `${applicationId}:${priority}:${platform}:${startAfter?.getTime() ?? 'now'}${ownBatches}`;
      let lane = lanes.get(key);
      if (!lane) lanes.set(key, (lane = { applicationId, priority, platform, startAfter, deliveryIds: [] }));
      lane.deliveryIds.push(deliveryId);
    }
  }
  return [...lanes.values()].flatMap((lane) => chunk(lane.deliveryIds, batchSize).map((deliveryIds) => ({ ...lane, deliveryIds })));
}

// ---------------------------------------------------------------------------------------------
// Deliver

/** What a deliver job reads of its notifications, by id: what is pushed and until when (not their recipients). */
export type BatchNotifications = ReadonlyMap<string, PushedNotification>;

/** A claimed delivery that can be pushed: its installation is there and active, and its notification still worth it. */
export type SendableDelivery = ClaimedDelivery & { installationRowId: string; providerIdentifier: string; notification: PushedNotification };

export const ended = (deliveryId: string, state: 'skipped' | 'failed', reason: string): DeliveryResult => ({
  deliveryId,
  state,
  reason,
  providerMessageId: null,
});

/** The batch's pending deliveries: those that can still be pushed, and the end of the others. */
export function sortClaimed(
  notifications: BatchNotifications,
  pending: readonly ClaimedDelivery[],
  now: Date = new Date(),
): { sendable: SendableDelivery[]; unsendable: DeliveryResult[] } {
  const sendable: SendableDelivery[] = [];
  const unsendable: DeliveryResult[] = [];
  for (const delivery of pending) {
    const { installationRowId, providerIdentifier } = delivery;
    if (!installationRowId || !providerIdentifier) {
      unsendable.push(ended(delivery.deliveryId, 'skipped', 'installation_deleted'));
      continue;
    }
    if (delivery.installationStatus !== 'active') {
      unsendable.push(ended(delivery.deliveryId, 'skipped', 'installation_invalid'));
      continue;
    }
    const notification = notifications.get(delivery.notificationId);
    // The batch reads its notifications through its deliveries (readBatch): each pending one has its.
    if (!notification) throw new Error(`delivery ${delivery.deliveryId}: its notification ${delivery.notificationId} was not read`);
    if (mayAttempt(pushTimes(notification, delivery.scheduledFor), delivery.attempts, now)) sendable.push({ ...delivery, installationRowId, providerIdentifier, notification });
    else unsendable.push(ended(delivery.deliveryId, 'failed', 'expired'));
  }
  return { sendable, unsendable };
}

/**
 * A deliver job's chunk: pushed and recorded together; `pace` set for a throttled notification's,
 * whose slots it reserves first: one pace per notification and due instant (`dueAt`, null for the
 * send's start), so that with `local_time` each instant's pushes have the cap of their own.
 */
export type DeliverChunk = { deliveries: SendableDelivery[]; pace: Pace | null };
export type Pace = { notificationId: string; dueAt: Date | null; perMinute: number };

/** Which pace a chunk's slots come from: its notification's at its due instant. */
export const paceKey = (pace: Pick<Pace, 'notificationId' | 'dueAt'>): string => `${pace.notificationId}:${pace.dueAt?.getTime() ?? 'start'}`;

/**
 * The sendable deliveries in the chunks a deliver job pushes them in: those of unthrottled
 * notifications first, `size` at a time; then each throttled notification's, a chunk of about a
 * second of its pace (throttle.ts throttledChunkSize), each of one notification and due instant only.
 */
export function deliverChunks(sendable: readonly SendableDelivery[], size: number): DeliverChunk[] {
  const paced = new Map<string, { pace: Pace; deliveries: SendableDelivery[] }>();
  const unpaced: SendableDelivery[] = [];
  for (const delivery of sendable) {
    const perMinute = throttlePerMinute(delivery.notification.options);
    if (perMinute === null) {
      unpaced.push(delivery);
      continue;
    }
    const pace = { notificationId: delivery.notificationId, dueAt: delivery.scheduledFor ?? null, perMinute };
    let own = paced.get(paceKey(pace));
    if (!own) paced.set(paceKey(pace), (own = { pace, deliveries: [] }));
    own.deliveries.push(delivery);
  }
  return [
    ...chunk(unpaced, size).map((deliveries): DeliverChunk => ({ deliveries, pace: null })),
    ...[...paced.values()].flatMap(({ pace, deliveries }) =>
      chunk(deliveries, throttledChunkSize(pace.perMinute, size)).map((part): DeliverChunk => ({ deliveries: part, pace })),
    ),
  ];
}

/**
 * Each notification's content as pushed on a platform in a localization: exactly the content the
 * fanout measured and recorded as the truncation (fanOut), one object per notification, platform
 * and localization, which the providers build one payload from for all its pushes.
 */
export function fittedContents(): (notification: PushedNotification, platform: Platform, locale: string | null) => PushContent {
  const byNotification = new Map<string, (platform: Platform, locale: string | null) => PushContent>();
  return (notification, platform, locale) => {
    let fitted = byNotification.get(notification.id);
    if (!fitted) {
      const content = pushContent(notification);
      byNotification.set(notification.id, (fitted = fitsOnce((p, l) => fitToPlatform(contentFor(content, l), p).content)));
    }
    return fitted(platform, locale);
  };
}

/** A provider's answer for one push (providers/provider.ts hands these to the job runner). */
export type PushOutcome =
  | { deliveryId: string; kind: 'accepted'; providerId?: string }
  /** The push address is dead (BadDeviceToken, Unregistered, UNREGISTERED...): fail and invalidate. */
  | { deliveryId: string; kind: 'invalid_token'; reason: string; invalidatedAt?: Date }
  /** This push can never succeed (payload too large, bad collapse id...): fail, keep the device. */
  | { deliveryId: string; kind: 'rejected'; reason: string }
  /** Our credentials are wrong, revoked or not allowed this app (TopicDisallowed): fail with
   * `provider_credentials`, never touch devices. */
  | { deliveryId: string; kind: 'credentials'; reason: string }
  /** Worth another try later (429, 5xx, timeouts); `retryAfterSeconds` from the provider if given. */
  | { deliveryId: string; kind: 'transient'; reason: string; retryAfterSeconds?: number };

/** What an attempt left to record; `countAttempt`: whether recording it counts the attempt (claimPending). */
export type Attempt = {
  results: DeliveryResult[];
  invalidations: Invalidation[];
  retry: string[];
  /** Seconds until the retry job runs: the longest delay any of its pushes asked for. */
  retryAfter: number;
  /** Why the pushes to retry were not taken: reason → how many. */
  retryReasons: Map<string, number>;
  countAttempt: boolean;
};

export const noAttempt = (countAttempt: boolean): Attempt => ({ results: [], invalidations: [], retry: [], retryAfter: 0, retryReasons: new Map(), countAttempt });

/**
 * A chunk's answers as outcomes to record: accepted, failed (a dead device is invalidated too),
 * or retried after a backoff (fanout.ts retryWindow) while the push may still be attempted (else
 * it fails `expired`). A push the provider gave no answer for is retried like a transient error.
 * The retry job runs after the longest backoff asked, but before the first of its pushes expires.
 */
export function settle(sent: readonly SendableDelivery[], answers: readonly PushOutcome[], countAttempt: boolean, now: Date = new Date()): Attempt {
  const attempt = noAttempt(countAttempt);
  let latest = Infinity;
  const retryOrExpire = (delivery: SendableDelivery, reason: string, retryAfterSeconds?: number) => {
    const window = retryWindow(pushTimes(delivery.notification, delivery.scheduledFor), delivery.attempts, now, retryAfterSeconds);
    if (!window) return fail(delivery.deliveryId, 'expired');
    attempt.retry.push(delivery.deliveryId);
    attempt.retryAfter = Math.max(attempt.retryAfter, window.delay);
    latest = Math.min(latest, window.latest);
    attempt.retryReasons.set(reason, (attempt.retryReasons.get(reason) ?? 0) + 1);
  };
  const fail = (deliveryId: string, reason: string) => attempt.results.push(ended(deliveryId, 'failed', reason));
  const pushes = new Map(sent.map((delivery) => [delivery.deliveryId, delivery]));
  const answered = new Set<string>();
  for (const answer of answers) {
    const delivery = pushes.get(answer.deliveryId);
    // An answer for a push this chunk did not send is not this chunk's to record.
    if (!delivery) continue;
    answered.add(answer.deliveryId);
    switch (answer.kind) {
      case 'accepted':
        attempt.results.push({ deliveryId: answer.deliveryId, state: 'accepted', reason: null, providerMessageId: answer.providerId ?? null });
        break;
      case 'invalid_token':
        fail(answer.deliveryId, answer.reason);
        attempt.invalidations.push({
          installationRowId: delivery.installationRowId,
          providerIdentifier: delivery.providerIdentifier,
          reason: answer.reason,
          providerTimestamp: answer.invalidatedAt ?? null,
        });
        break;
      case 'rejected':
        fail(answer.deliveryId, answer.reason);
        break;
      case 'credentials':
        fail(answer.deliveryId, 'provider_credentials');
        break;
      case 'transient':
        retryOrExpire(delivery, answer.reason, answer.retryAfterSeconds);
        break;
    }
  }
  for (const delivery of sent) {
    if (!answered.has(delivery.deliveryId)) retryOrExpire(delivery, 'unanswered');
  }
  attempt.retryAfter = Math.min(attempt.retryAfter, latest);
  return attempt;
}

/**
 * The lane of a batch's retry: its notifications'. The fanout puts only notifications of one lane
 * in a batch; were they mixed, the highest would keep none of them behind the others.
 */
export function laneOf(notifications: BatchNotifications): number {
  return Math.max(...[...notifications.values()].map((notification) => jobPriority(notification.options)));
}

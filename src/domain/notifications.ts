// Sending (validation the schema cannot express, Idempotency-Key semantics, the transactional
// enqueue) and reading notifications with the statistics counted on their rows.
import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Kysely } from 'kysely';
import type { components } from '../generated/api.ts';
import { decodeCursor, toPage } from './cursor.ts';
import { addFieldError, conflict, fieldErrors, HttpError, notFound, validationFailed, type FieldErrors } from './errors.ts';
import { jobPriority } from './fanout.ts';
import {
  findKey,
  findNotificationRow,
  findUnexpiredKey,
  insertNotification,
  listNotificationRows,
  type FinishedNotification,
  type KeyClaim,
  type KeyRow,
  type BroadcastProgressRow,
  type NotificationRow,
} from '../db/sql/notifications.ts';
import { deleteExpiredKeys } from '../db/sql/retention.ts';
import { observed, type PipelinedPool, type PipelinedSession } from '../db/pipelined-pool.ts';
import type { Logger } from '../logging/logger.ts';
import { notificationFinished } from '../observability/metrics.ts';
import { isUuid } from './ids.ts';
import { newId } from '../db/ids.ts';
import { readDateTime } from './date-times.ts';
import { payloadProblems, pushContent } from './payloads.ts';
import { audienceErrors, type Audience } from './audiences.ts';
import { segmentAudience } from './segments.ts';
import { demand } from './tokens.ts';
import { localTimeProblems } from './local-time.ts';

type Schemas = components['schemas'];
export type SendRequest = Schemas['NotificationSend'];
export type NotificationView = Schemas['Notification'];

export type FanoutJob = { notificationId: string; applicationId: string };
/** Where notifications' fanout jobs wait (worker/queue.ts fanoutQueue); `tx`: the caller's transaction (pg-boss runs in it). */
export type FanoutQueue = {
  /**
   * Enqueues a notification's fanout in the caller's transaction (a rollback drops the job too),
   * in the lane of its priority (fanout.ts jobPriority), due at `startAfter` (null: now). The
   * statement goes out at once, behind the ones already sent.
   */
  enqueue(tx: PipelinedSession, job: FanoutJob, when: { priority: number; startAfter: Date | null }): Promise<void>;
  /** Drops the deferred fanout job of a scheduled notification, in the caller's transaction (a cancel). */
  dropScheduled(tx: Kysely<unknown>, notificationId: string): Promise<void>;
  /** Drops deferred walk jobs (the waves of a broadcast at local time) by id, in the caller's transaction (a cancel). */
  dropDeferredWalks(tx: Kysely<unknown>, jobIds: string[]): Promise<void>;
};

/** How long an Idempotency-Key protects against a duplicate send. */
export const idempotencyWindowHours = 24;

/** The document states this rule too (`not` in NotificationSend), so the validator refuses it first. */
export const nothingToShowMessage = 'The notification must have a title, a body, or a non-empty data object.';

/** Likewise (`not` in NotificationContent): a device whose locale matches none receives the default. */
export const localizationsWithoutDefaultMessage =
  'The notification must have a title or a body of its own to have localizations: devices that match none of them receive it, and a localization falls back to it field by field.';

export const oneRecipientKindMessage = 'The recipients field must have exactly one of user_ids, audience, segment or installation_ids.';

const recipientKinds = ['user_ids', 'audience', 'segment', 'installation_ids'] as const;
export type RecipientsKind = (typeof recipientKinds)[number];

/** Which kind of recipients a send names; null: more than one (none is the schema's: user_ids is then required). */
export function recipientsKind(recipients: SendRequest['recipients']): RecipientsKind | null {
  const given = recipientKinds.filter((kind) => recipients[kind] !== undefined);
  return given.length === 1 ? given[0] : given.length === 0 ? 'user_ids' : null;
}

export function sendRuleViolations(request: SendRequest): FieldErrors {
  if (recipientsKind(request.recipients) === null) return { recipients: [oneRecipientKindMessage] };
  const { title, body, localizations = {} } = request.notification;
  const hasData = Object.keys(request.data ?? {}).length > 0;
  if (!title && !body && !hasData) {
    return { notification: [nothingToShowMessage] };
  }
  const tags = Object.keys(localizations);
  if (tags.length > 0 && !title && !body) {
    return { 'notification.localizations': [localizationsWithoutDefaultMessage] };
  }
  const audience = request.recipients.audience;
  return Object.assign(
    audience === undefined ? {} : audienceErrors(audience, 'recipients.audience'),
    sameTagProblems(tags),
    sendAtProblems(request),
    localTimeProblems(request.options),
    payloadProblems(request),
  );
}

/** Any time ahead (a reminder a year away is a real use) within the rule every date-time follows. */
function sendAtProblems(request: SendRequest): FieldErrors {
  const sendAt = request.options?.send_at;
  if (sendAt === undefined) return {};
  const read = readDateTime('options.send_at', sendAt);
  return 'problem' in read ? { 'options.send_at': [read.problem] } : {};
}

/** When a send is scheduled for: its `options.send_at` when that is still ahead, else null (now). Checked by sendAtProblems first. */
export function scheduledFor(request: SendRequest, now: Date): Date | null {
  const sendAt = request.options?.send_at;
  if (sendAt === undefined) return null;
  const read = readDateTime('options.send_at', sendAt);
  return 'at' in read && read.at > now ? read.at : null;
}

/**
 * Tags are case-insensitive (BCP 47), so `fr` and `FR` would be two localizations for the one
 * language a device is matched on: the later one is refused.
 */
function sameTagProblems(tags: string[]): FieldErrors {
  const problems = fieldErrors();
  const seen = new Map<string, string>();
  for (const tag of tags) {
    const first = seen.get(tag.toLowerCase());
    if (first === undefined) seen.set(tag.toLowerCase(), tag);
    else {
      addFieldError(problems, `notification.localizations.${tag}`, `The tag "${tag}" is "${first}" in other letter case: tags are case-insensitive, so each may be given once.`);
    }
  }
  return problems;
}

/** Key order does not change what a request means, so it does not change its hash. */
export function requestHash(request: SendRequest): string {
  return createHash('sha256').update(canonicalJson(request)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

export type SendInput = {
  applicationId: string;
  /** The token's: a send to an audience or a segment takes `notifications:broadcast` too. */
  abilities: readonly string[];
  request: SendRequest;
  idempotencyKey?: string;
  /** Takes one send from the application's quota, or throws (429). Only a new notification takes one. */
  admit(): Promise<void>;
  /** Gives it back: a concurrent duplicate turned out to be a replay. */
  refund(): Promise<void>;
};

/**
 * The order: the rules of the body (422), then the quota (429), then one transaction that claims
 * the key, stores the notification (one statement) and enqueues its fanout, committed only once the
 * quota admitted it. A replay of an accepted Idempotency-Key takes nothing from the quota (what it
 * took is given back) and is never refused: a send refused by the quota is answered as the replay
 * it is, when it is one. Replays are rare and may cost a few round trips more; a new send costs two
 * in a row: the BEGIN, the store and the enqueue pipelined, beside the quota's on its own pool, then
 * COMMIT. Not a unit of work: a send writes no entity, and the ORM's fork and transaction would be
 * CPU spent on the API's hottest path for nothing.
 */
export async function sendNotification(
  em: EntityManager,
  sends: PipelinedPool,
  fanouts: FanoutQueue,
  input: SendInput,
): Promise<{ notification: NotificationRow; accepted: boolean }> {
  const { applicationId, request, idempotencyKey } = input;
  const { recipients } = request;
  // A test send to installation ids is an ordinary send: a handful of the application's own devices.
  if (recipients.audience !== undefined || recipients.segment !== undefined) demand(input.abilities, 'notifications:broadcast');
  const problems = sendRuleViolations(request);
  if (Object.keys(problems).length > 0) throw validationFailed(problems);
  // A segment's audience as it is now: a later change of the segment does not change whom this reaches.
  const audience: Audience | null =
    recipients.segment !== undefined
      ? await segmentAudience(em, applicationId, recipients.segment, 'recipients.segment')
      : (recipients.audience ?? null);

  const claim = idempotencyKey === undefined ? undefined : { applicationId, key: idempotencyKey, hash: requestHash(request) };
  const replay = async (originalId: string) => ({ notification: await findNotification(em, applicationId, originalId), accepted: false });
  const startAfter = scheduledFor(request, new Date());
  // Its round trip overlaps the transaction's first; nothing commits until it has admitted the send.
  const admission = observed(input.admit());
  type Stored = { notification: NotificationRow; originalId: null } | { notification: null; originalId: string };
  let stored: Stored;
  try {
    stored = await sends.transaction<Stored>(async (tx) => {
      const id = newId();
      const inserted = observed(
        insertNotification(
          tx,
          {
            id,
            applicationId,
            title: request.notification.title ?? null,
            body: request.notification.body ?? null,
            imageUrl: request.notification.image_url ?? null,
            actionUrl: request.notification.action_url ?? null,
            localizations: Object.keys(request.notification.localizations ?? {}).length > 0 ? request.notification.localizations! : null,
            data: request.data ?? {},
            options: request.options ?? {},
            userIds: recipients.user_ids ?? [],
            installationIds: recipients.installation_ids ?? null,
            audience,
            segment: recipients.segment ?? null,
            scheduledFor: startAfter,
          },
          claim && { ...claim, id: newId(), windowHours: idempotencyWindowHours },
        ),
      );
      // Sent right behind the store without waiting for it: a replay's job is rolled back with it.
      const enqueued = observed(fanouts.enqueue(tx, { notificationId: id, applicationId }, { priority: jobPriority(request.options ?? {}), startAfter }));
      await admission;
      const notification = await inserted;
      if (!notification) return { commit: false, value: { notification: null, originalId: await claimHolder(tx, claim!) } };
      await enqueued;
      return { commit: true, value: { notification, originalId: null } };
    });
  } catch (error) {
    // Refused by the quota: a replay is answered all the same (and the key's other use is 409).
    const refused = error instanceof HttpError && error.status === 429;
    const original = refused && claim ? await findIdempotentSend(em, claim) : null;
    if (original) return replay(original);
    // The key names another request: nothing was created, so nothing is taken.
    if (error instanceof HttpError && error.status === 409) await input.refund();
    throw error;
  }
  if (stored.notification) return { notification: stored.notification, accepted: true };
  await input.refund();
  return replay(stored.originalId);
}

const keyReusedMessage = 'This Idempotency-Key was already used for a different request.';

/** The notification an unexpired key already names (same request), or null when the key is free. */
async function findIdempotentSend(em: EntityManager, claim: KeyClaim): Promise<string | null> {
  const existing = await findUnexpiredKey(em, claim, idempotencyWindowHours);
  return existing ? replayedBy(existing, claim) : null;
}

/** The notification of the claim insertNotification found (same request), or 409. */
async function claimHolder(tx: PipelinedSession, claim: KeyClaim): Promise<string> {
  return replayedBy(await findKey(tx, claim), claim);
}

/** The notification a key names, when this send is the same request; otherwise the key was reused: 409. */
function replayedBy(existing: KeyRow, claim: KeyClaim): string {
  if (existing.requestHash !== claim.hash) throw conflict(keyReusedMessage);
  return existing.notificationId;
}

/** At most `limit` keys past the window (retention deletes in short batches). */
export function deleteExpiredIdempotencyKeys(em: EntityManager, limit: number): Promise<number> {
  return deleteExpiredKeys(em, idempotencyWindowHours, limit);
}

export async function findNotification(em: EntityManager, applicationId: string, given: string): Promise<NotificationRow> {
  const id = given.toLowerCase();
  const notification = isUuid(id) ? await findNotificationRow(em, applicationId, id) : undefined;
  if (!notification) throw notFound();
  return notification;
}

/** Newest first. The cursor is the last id of the previous page (ids are time-ordered UUIDv7). */
export async function listNotifications(
  em: EntityManager,
  applicationId: string,
  page: { limit: number; cursor?: string; status?: NotificationRow['status'] },
): Promise<{ notifications: NotificationRow[]; nextCursor: string | null }> {
  const before = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const rows = await listNotificationRows(em, applicationId, { limit: page.limit + 1, before, status: page.status });
  const { items: notifications, nextCursor } = toPage(rows, page.limit);
  return { notifications, nextCursor };
}

/** A notification's statistics, read from its counters: the same cost for 5 or 5,000 deliveries. */
export function notificationStatistics(notification: NotificationRow): NotificationView['statistics'] {
  return {
    users: notification.usersCount,
    installations: notification.installationsCount,
    accepted: notification.acceptedCount,
    received: notification.receivedCount,
    displayed: notification.displayedCount,
    opened: notification.openedCount,
    failed: notification.failedCount,
    skipped: notification.skippedCount,
  };
}

/** A notification that has just ended: its one log line and its metrics (nothing when another caller ended it). */
export function reportNotificationEnd(logger: Logger, notification: FinishedNotification | undefined): void {
  if (!notification) return;
  const durationMs = notification.completedAt.getTime() - notification.createdAt.getTime();
  notificationFinished(notification.status, durationMs / 1000);
  logger.info(
    {
      notificationId: notification.id,
      applicationId: notification.applicationId,
      status: notification.status,
      statistics: notificationStatistics(notification),
      durationMs,
    },
    'notification finished',
  );
}

function broadcastProgress(progress: BroadcastProgressRow): Schemas['BroadcastProgress'] {
  return {
    installations: progress.installations,
    walked: progress.walked,
    walk_ended_at: progress.walkEndedAt?.toISOString() ?? null,
    waves: progress.waves.map((wave) => ({
      due_at: wave.dueAt.toISOString(),
      installations: wave.installations,
      walked: wave.walked,
      ended_at: wave.endedAt?.toISOString() ?? null,
    })),
  };
}

export function notificationView(notification: NotificationRow): NotificationView {
  return {
    id: notification.id,
    status: notification.status,
    ...pushContent(notification),
    target_users: notification.targetUsers,
    // Only for a send to an audience: a user_ids send reads (and webhooks carry) what they always did.
    ...(notification.audience === null ? {} : { audience: notification.audience }),
    ...(notification.segment === null ? {} : { segment: notification.segment }),
    ...(notification.progress === null ? {} : { progress: broadcastProgress(notification.progress) }),
    statistics: notificationStatistics(notification),
    created_at: notification.createdAt.toISOString(),
    scheduled_for: notification.scheduledFor?.toISOString() ?? null,
    processing_started_at: notification.processingStartedAt?.toISOString() ?? null,
    completed_at: notification.completedAt?.toISOString() ?? null,
  };
}

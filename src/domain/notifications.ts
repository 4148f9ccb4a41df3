// Sending (validation the schema cannot express, Idempotency-Key semantics, the transactional
// enqueue) and reading notifications with statistics derived from their delivery rows.
import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../generated/api.ts';
import { decodeCursor, toPage } from './cursor.ts';
import { conflict, notFound, validationFailed, type FieldErrors } from './errors.ts';
import { Notification } from '../db/entities.ts';
import { jobPriority } from './fanout.ts';
import { claimKey, deleteExpiredKeys, deliveryCounts, findKey, findUnexpiredKey, type KeyClaim } from '../db/sql.ts';
import { isUuid } from './ids.ts';
import { payloadProblems, pushContent } from './payloads.ts';

type Schemas = components['schemas'];
export type SendRequest = Schemas['NotificationSend'];
export type NotificationView = Schemas['Notification'];
export type Statistics = Schemas['Statistics'];

export type FanoutJob = { notificationId: string; applicationId: string };
/**
 * Enqueues a notification's fanout in the caller's transaction (a rollback drops the job too),
 * in the lane of its priority (fanout.ts jobPriority).
 */
export type EnqueueFanout = (tx: EntityManager, job: FanoutJob, priority: number) => Promise<void>;

/** How long an Idempotency-Key protects against a duplicate send. */
export const idempotencyWindowHours = 24;

/** The document states this rule too (`not` in NotificationSend), so the validator refuses it first. */
export const nothingToShowMessage = 'The notification must have a title, a body, or a non-empty data object.';

export function sendRuleViolations(request: SendRequest): FieldErrors {
  const { title, body } = request.notification;
  const hasData = Object.keys(request.data ?? {}).length > 0;
  if (!title && !body && !hasData) {
    return { notification: [nothingToShowMessage] };
  }
  return payloadProblems(request);
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
  request: SendRequest;
  idempotencyKey?: string;
  /** Takes one send from the application's quota, or throws (429). Only a new notification takes one. */
  admit(): Promise<void>;
  /** Gives it back: a concurrent duplicate turned out to be a replay. */
  refund(): Promise<void>;
};

/**
 * The order: the rules of the body (422), then a replay of an accepted Idempotency-Key (free: a
 * safe retry never takes quota and is never 429), then the quota, then one transaction that claims
 * the key, stores the notification and enqueues its fanout.
 */
export async function sendNotification(
  em: EntityManager,
  enqueueFanout: EnqueueFanout,
  input: SendInput,
): Promise<{ notification: Notification; accepted: boolean }> {
  const { applicationId, request, idempotencyKey } = input;
  const problems = sendRuleViolations(request);
  if (Object.keys(problems).length > 0) throw validationFailed(problems);

  const hash = requestHash(request);
  if (idempotencyKey !== undefined) {
    const original = await findIdempotentSend(em, { applicationId, key: idempotencyKey, hash });
    if (original) return { notification: await findNotification(em, applicationId, original), accepted: false };
  }
  await input.admit();

  const result = await em.transactional(async (tx) => {
    const id = uuidv7();
    if (idempotencyKey !== undefined) {
      const original = await claimIdempotencyKey(tx, { applicationId, key: idempotencyKey, hash, notificationId: id });
      if (original) return { notification: null, originalId: original };
    }
    const notification = tx.create(Notification, {
      id,
      applicationId,
      status: 'queued',
      title: request.notification.title ?? null,
      body: request.notification.body ?? null,
      imageUrl: request.notification.image_url ?? null,
      actionUrl: request.notification.action_url ?? null,
      data: request.data ?? {},
      options: request.options ?? {},
      userIds: request.recipients.user_ids,
    });
    await tx.flush();
    await enqueueFanout(tx, { notificationId: id, applicationId }, jobPriority(request.options ?? {}));
    return { notification, originalId: null };
  });
  if (result.notification) return { notification: result.notification, accepted: true };
  await input.refund();
  return { notification: await findNotification(em, applicationId, result.originalId), accepted: false };
}

const keyReusedMessage = 'This Idempotency-Key was already used for a different request.';

/** The notification an unexpired key already names (same request), or null when the key is free. */
async function findIdempotentSend(em: EntityManager, claim: KeyClaim): Promise<string | null> {
  const existing = await findUnexpiredKey(em, claim, idempotencyWindowHours);
  if (!existing) return null;
  if (existing.requestHash !== claim.hash) throw conflict(keyReusedMessage);
  return existing.notificationId;
}

/** Claims the key for a new notification, or returns the id of the notification it already names. */
async function claimIdempotencyKey(tx: EntityManager, claim: KeyClaim & { notificationId: string }): Promise<string | null> {
  if (await claimKey(tx, { ...claim, id: uuidv7() }, idempotencyWindowHours)) return null;
  const existing = await findKey(tx, claim);
  if (existing.requestHash !== claim.hash) throw conflict(keyReusedMessage);
  return existing.notificationId;
}

/** At most `limit` keys past the window (retention deletes in short batches). */
export function deleteExpiredIdempotencyKeys(em: EntityManager, limit: number): Promise<number> {
  return deleteExpiredKeys(em, idempotencyWindowHours, limit);
}

export async function findNotification(em: EntityManager, applicationId: string, given: string): Promise<Notification> {
  const id = given.toLowerCase();
  const notification = isUuid(id) ? await em.findOne(Notification, { id, applicationId }) : null;
  if (!notification) throw notFound();
  return notification;
}

/** Newest first. The cursor is the last id of the previous page (ids are time-ordered UUIDv7). */
export async function listNotifications(
  em: EntityManager,
  applicationId: string,
  page: { limit: number; cursor?: string },
): Promise<{ notifications: Notification[]; nextCursor: string | null }> {
  const after = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const rows = await em.find(
    Notification,
    { applicationId, ...(after ? { id: { $lt: after } } : {}) },
    { orderBy: { id: 'desc' }, limit: page.limit + 1 },
  );
  const { items: notifications, nextCursor } = toPage(rows, page.limit);
  return { notifications, nextCursor };
}

const zeroStatistics: Statistics = {
  users: 0,
  installations: 0,
  accepted: 0,
  received: 0,
  displayed: 0,
  opened: 0,
  failed: 0,
  skipped: 0,
};

/** Per notification, from its delivery rows (db/sql.ts deliveryCounts says why they cannot drift). */
export async function statisticsFor(em: EntityManager, notificationIds: string[]): Promise<Map<string, Statistics>> {
  const statistics = new Map<string, Statistics>();
  for (const { notificationId, pending: _pending, ...counts } of await deliveryCounts(em, notificationIds)) {
    statistics.set(notificationId, counts);
  }
  return statistics;
}

export function notificationView(notification: Notification, statistics: Statistics = zeroStatistics): NotificationView {
  return {
    id: notification.id,
    status: notification.status,
    ...pushContent(notification),
    target_users: notification.userIds.length,
    statistics,
    created_at: notification.createdAt.toISOString(),
    processing_started_at: notification.processingStartedAt?.toISOString() ?? null,
    completed_at: notification.completedAt?.toISOString() ?? null,
  };
}

export async function notificationViews(em: EntityManager, notifications: Notification[]): Promise<NotificationView[]> {
  const statistics = await statisticsFor(em, notifications.map((n) => n.id));
  return notifications.map((n) => notificationView(n, statistics.get(n.id)));
}

// Notifications: a send (with its idempotency key), its views, its fanout's start and end, and
// the locks by which its pushes and its cancel exclude each other.
import { sql } from 'kysely';
import type { components } from '../../generated/api.ts';
import { arrayLiteral } from '../array-literal.ts';
import type { Audience, Localizations } from '../entities.ts';
import { type Db, asDate, rows, run } from './execute.ts';
import { addToHours } from './statistics.ts';

/** What a notification's view shows: its counters, and how many users it targets, not who. */
export type NotificationRow = {
  id: string;
  status: components['schemas']['Notification']['status'];
  title: string | null;
  body: string | null;
  imageUrl: string | null;
  actionUrl: string | null;
  localizations: Localizations | null;
  data: Record<string, unknown>;
  options: Record<string, unknown>;
  /** A send to an audience: its filter (a segment's as it was when sent); null for user_ids. */
  audience: Audience | null;
  segment: string | null;
  targetUsers: number;
  createdAt: Date;
  scheduledFor: Date | null;
  processingStartedAt: Date | null;
  completedAt: Date | null;
  usersCount: number;
  installationsCount: number;
  acceptedCount: number;
  failedCount: number;
  skippedCount: number;
  receivedCount: number;
  displayedCount: number;
  openedCount: number;
  /** A send to an audience: its walk's progress (null for any other send). */
  progress: BroadcastProgressRow | null;
};

/** A broadcast's walk: what it has to read (null until counted), what it has read, its waves. */
export type BroadcastProgressRow = {
  installations: number | null;
  walked: number;
  walkEndedAt: Date | null;
  waves: { dueAt: Date; installations: number; walked: number; endedAt: Date | null }[];
};

// user_ids stays in the table: up to 500 ids a row, which a view never shows. Every statement
// that reads them names the notifications table `n`. A broadcast's waves (a few dozen at most: one
// per distinct due instant) come from their primary key, and only for a local-time broadcast.
const notificationColumns = sql`
  n.id, n.status, n.title, n.body, n.image_url as "imageUrl", n.action_url as "actionUrl", n.localizations, n.data, n.options,
  n.audience, n.segment, n.target_users as "targetUsers", n.created_at as "createdAt", n.scheduled_for as "scheduledFor",
  n.processing_started_at as "processingStartedAt",
  n.completed_at as "completedAt", n.users_count as "usersCount", n.installations_count as "installationsCount",
  n.accepted_count as "acceptedCount", n.failed_count as "failedCount", n.skipped_count as "skippedCount",
  n.received_count as "receivedCount", n.displayed_count as "displayedCount", n.opened_count as "openedCount",
  case when n.audience is not null then jsonb_build_object(
    'installations', n.audience_installations, 'walked', n.walked, 'walkEndedAt', n.walk_ended_at,
    'waves', case when n.options ? 'local_time' then (
      select coalesce(jsonb_agg(jsonb_build_object('dueAt', w.due_at, 'installations', w.installations, 'walked', w.walked, 'endedAt', w.ended_at)
                                order by w.due_at), '[]')
        from broadcast_waves w where w.notification_id = n.id) else '[]' end) end as progress`;

type StoredProgress = Omit<BroadcastProgressRow, 'walkEndedAt' | 'waves'> & {
  walkEndedAt: string | null;
  waves: { dueAt: string; installations: number; walked: number; endedAt: string | null }[];
};

/** A notification as its statements return it: the progress is JSON, its instants text. */
type StoredNotificationRow = Omit<NotificationRow, 'progress'> & { progress: StoredProgress | null };

const dateOrNull = (value: string | null): Date | null => (value === null ? null : asDate(value));

const notificationRow = (row: StoredNotificationRow): NotificationRow => ({
  ...row,
  createdAt: asDate(row.createdAt),
  scheduledFor: row.scheduledFor && asDate(row.scheduledFor),
  processingStartedAt: row.processingStartedAt && asDate(row.processingStartedAt),
  completedAt: row.completedAt && asDate(row.completedAt),
  progress: row.progress && {
    ...row.progress,
    walkEndedAt: dateOrNull(row.progress.walkEndedAt),
    waves: row.progress.waves.map((wave) => ({ ...wave, dueAt: asDate(wave.dueAt), endedAt: dateOrNull(wave.endedAt) })),
  },
});

export async function findNotificationRow(db: Db, applicationId: string, id: string): Promise<NotificationRow | undefined> {
  const [row] = await rows(
    db,
    sql<StoredNotificationRow>`select ${notificationColumns} from notifications n where n.id = ${id} and n.application_id = ${applicationId}`,
  );
  return row && notificationRow(row);
}

/**
 * Newest first (ids are time-ordered UUIDv7), after the cursor's id; the (application_id, id) index
 * gives them in order. A status filter reads that index until the page is full: no index on status,
 * which every fanout moves twice (a dashboard's filter is worth less than HOT updates there).
 */
export async function listNotificationRows(
  db: Db,
  applicationId: string,
  page: { limit: number; before?: string; status?: NotificationRow['status'] },
): Promise<NotificationRow[]> {
  const before = page.before === undefined ? sql`` : sql`and n.id < ${page.before}`;
  const status = page.status === undefined ? sql`` : sql`and n.status = ${page.status}`;
  const found = await rows(
    db,
    sql<StoredNotificationRow>`
      select ${notificationColumns} from notifications n
       where n.application_id = ${applicationId} ${before} ${status}
       order by n.id desc limit ${page.limit}`,
  );
  return found.map(notificationRow);
}

export type KeyClaim = { applicationId: string; key: string; hash: string };
export type KeyRow = { requestHash: string; notificationId: string };

/** The notification an unexpired key names, with the hash of the request that claimed it. */
export async function findUnexpiredKey(db: Db, claim: KeyClaim, windowHours: number): Promise<KeyRow | undefined> {
  const [found] = await rows(
    db,
    sql<KeyRow>`
      select request_hash as "requestHash", notification_id as "notificationId" from idempotency_keys
       where application_id = ${claim.applicationId} and key = ${claim.key}
         and created_at >= now() - make_interval(hours => ${windowHours})`,
  );
  return found;
}

export type NewNotification = Pick<
  NotificationRow,
  'id' | 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options' | 'scheduledFor' | 'audience' | 'segment'
> & {
  applicationId: string;
  userIds: string[];
  /** A test send's (recipients.installation_ids); null for any other send. */
  installationIds: string[] | null;
};

/**
 * Stores a queued notification, and with an Idempotency-Key claims the key for it in the same
 * statement: undefined, with nothing written, when an unexpired claim of the key exists. A
 * concurrent claim of the same key blocks on the unique index until the first transaction ends,
 * so simultaneous retries create exactly one notification. An expired claim is taken over. A
 * notification stored counts one send in its application's hour (db/sql/statistics.ts), in the
 * same statement; a replay stores nothing and counts nothing.
 */
export async function insertNotification(
  db: Db,
  notification: NewNotification,
  claim: (KeyClaim & { id: string; windowHours: number }) | undefined,
): Promise<NotificationRow | undefined> {
  const n = notification;
  const claimed = claim
    ? sql`
      insert into idempotency_keys (id, application_id, key, request_hash, notification_id, created_at)
      values (${claim.id}, ${claim.applicationId}, ${claim.key}, ${claim.hash}, ${n.id}, now())
      on conflict (application_id, key) do update
        set request_hash = excluded.request_hash, notification_id = excluded.notification_id, created_at = now()
        where idempotency_keys.created_at < now() - make_interval(hours => ${claim.windowHours})
      returning 1`
    : sql`select 1`;
  // An audience's users are counted when its fanout starts; a test send targets its ids.
  const targetUsers = n.audience !== null ? 0 : (n.installationIds?.length ?? n.userIds.length);
  const [stored] = await rows(
    db,
    sql<StoredNotificationRow>`
      with claimed as (${claimed}), stored as (
        insert into notifications as n
          (id, application_id, status, title, body, image_url, action_url, localizations, data, options, user_ids, installation_ids,
           created_at, scheduled_for, audience, segment, target_users)
        select ${n.id}, ${n.applicationId}, 'queued', ${n.title}, ${n.body}, ${n.imageUrl}, ${n.actionUrl},
               ${n.localizations === null ? null : JSON.stringify(n.localizations)}::jsonb, ${JSON.stringify(n.data)}::jsonb,
               ${JSON.stringify(n.options)}::jsonb, ${arrayLiteral(n.userIds)}::text[],
               ${n.installationIds === null ? null : arrayLiteral(n.installationIds)}::text[], now(), ${n.scheduledFor}::timestamptz,
               ${n.audience === null ? null : JSON.stringify(n.audience)}::jsonb, ${n.segment}::text, ${targetUsers}::int
         where exists (select from claimed)
        returning ${notificationColumns}
      ), counted as (
        ${addToHours(sql`select ${n.applicationId}::uuid, 1, 0, 0, 0, 0 from stored`)}
      )
      select * from stored`,
  );
  return stored && notificationRow(stored);
}

/** The claim that won, read after insertNotification found one. */
export async function findKey(db: Db, claim: Pick<KeyClaim, 'applicationId' | 'key'>): Promise<KeyRow> {
  const [found] = await rows(
    db,
    sql<KeyRow>`
      select request_hash as "requestHash", notification_id as "notificationId" from idempotency_keys
       where application_id = ${claim.applicationId} and key = ${claim.key}`,
  );
  return found;
}

/** How many users (or a test send's installations) each notification is for (a fanout batch is cut by that), in the order asked. */
export async function recipientCounts(db: Db, notificationIds: string[]): Promise<number[]> {
  const found = await rows(
    db,
    sql<{ id: string; recipients: number }>`
      select id, cardinality(user_ids) + coalesce(cardinality(installation_ids), 0) as recipients
        from notifications where id = any(${arrayLiteral(notificationIds)}::uuid[])`,
  );
  const counts = new Map(found.map((row) => [row.id, row.recipients]));
  return notificationIds.map((id) => counts.get(id) ?? 0);
}

/**
 * A notification as its fanout reads it: what is pushed (not its recipients, resolved in SQL), and
 * when it was sent (what a send at each device's local time counts from).
 */
export type FannedNotification = Pick<
  NotificationRow,
  'id' | 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options' | 'createdAt' | 'scheduledFor'
> & {
  applicationId: string;
  /** The providers its application has credentials for, as the fanout's transaction sees them. */
  credentialProviders: string[];
  /** Set for a send to an audience or a segment: its fanout is a broadcast's walk (worker/broadcasts.ts). */
  audience?: Audience | null;
};

/**
 * Moves queued notifications to `processing`, each once, and answers those it moved (not those a
 * previous run did) as their fanout reads them: one statement for what were three round trips.
 */
export async function startProcessing(db: Db, notificationIds: string[]): Promise<FannedNotification[]> {
  const started = await rows(
    db,
    sql<FannedNotification>`
      update notifications n set status = 'processing', processing_started_at = now()
       where id = any(${arrayLiteral(notificationIds)}::uuid[]) and status = 'queued'
      returning id, application_id as "applicationId", title, body, image_url as "imageUrl", action_url as "actionUrl",
                localizations, data, options, audience, created_at as "createdAt", scheduled_for as "scheduledFor",
                array(select c.provider from provider_credentials c where c.application_id = n.application_id) as "credentialProviders"`,
  );
  return started.map(fannedNotification);
}

/** Its times as Dates, whichever way the driver answered them. */
export const fannedNotification = <T extends FannedNotification>(row: T): T => ({
  ...row,
  createdAt: asDate(row.createdAt),
  scheduledFor: row.scheduledFor && asDate(row.scheduledFor),
});

/** A notification as it ended: what its log line, its metrics and its `notification.completed` webhook say. */
export type FinishedNotification = NotificationRow & { applicationId: string; completedAt: Date };

/**
 * Sets the final status and completed_at exactly once: the first caller gets the notification as
 * it ended, any later one undefined. A cancelled notification stays cancelled, whoever ends it.
 */
export async function completeNotification(
  db: Db,
  notificationId: string,
  status: NotificationRow['status'],
): Promise<FinishedNotification | undefined> {
  const [ended] = await completeNotifications(db, [{ notificationId, status }]);
  return ended;
}

/** completeNotification for several at once, in one statement: answers those this call ended. */
export async function completeNotifications(
  db: Db,
  endings: { notificationId: string; status: NotificationRow['status'] }[],
): Promise<FinishedNotification[]> {
  if (endings.length === 0) return [];
  const ended = await rows(
    db,
    sql<StoredNotificationRow & { applicationId: string; completedAt: Date }>`
      update notifications n set status = case when n.status = 'cancelled' then n.status else e.final_status end, completed_at = now()
        from unnest(${arrayLiteral(endings.map((e) => e.notificationId))}::uuid[], ${arrayLiteral(endings.map((e) => e.status))}::text[]) as e(ending_id, final_status)
       where n.id = e.ending_id and n.completed_at is null
      returning ${notificationColumns}, application_id as "applicationId"`,
  );
  return ended.map((row) => ({ ...notificationRow(row), applicationId: row.applicationId, completedAt: asDate(row.completedAt) }));
}

/**
 * Marks a queued or processing notification cancelled, in a short transaction of its own so that the
 * chunks about to be pushed see it at once (holdUncancelled). Answers the status the notification
 * has then (`cancelled`, or the one it ended with), undefined when it is not the application's, and
 * whether its fanout job is deferred to a time still a second or more away: no worker can have taken
 * that job (one due sooner is left to run as the no-op it now is).
 */
export async function markCancelled(
  db: Db,
  applicationId: string,
  notificationId: string,
): Promise<{ status: NotificationRow['status']; fanoutDeferred: boolean } | undefined> {
  const [moved] = await rows(
    db,
    sql<{ status: NotificationRow['status']; fanoutDeferred: boolean }>`
      update notifications set status = 'cancelled'
       where id = ${notificationId} and application_id = ${applicationId} and status in ('queued', 'processing')
      returning status, coalesce(scheduled_for > clock_timestamp() + interval '1 second', false) as "fanoutDeferred"`,
  );
  if (moved) return moved;
  const [found] = await rows(
    db,
    sql<{ status: NotificationRow['status'] }>`select status from notifications where id = ${notificationId} and application_id = ${applicationId}`,
  );
  return found && { status: found.status, fanoutDeferred: false };
}

/**
 * A notification's pushes and its cancel exclude each other through a transaction-scoped advisory
 * lock on the notification (two keys: this namespace, and a hash of its id; two notifications
 * sharing a hash only wait for each other now and then). A lock, not a row lock: a chunk holds it
 * while its pushes are handed to the provider and their outcomes recorded, and recording takes the
 * delivery rows, then the notification's row; a cancel holding that row while it waited would
 * deadlock with it.
 */
const pushLockNamespace = 72_540_303;

/**
 * A cancel's exclusive hold on the notification's pushes: it waits for every chunk being pushed at
 * that moment to commit its outcomes, and holds back the next ones until the cancel commits.
 */
export async function lockPushes(db: Db, notificationId: string): Promise<void> {
  await run(db, sql`select pg_advisory_xact_lock(${pushLockNamespace}, hashtext(${notificationId}))`);
}

/**
 * A chunk's shared hold on its notifications' pushes while they are handed to the provider and
 * their outcomes recorded (lockPushes waits for it). Answers those of them that have been
 * cancelled: their pushes must not be made. The locks are taken in the order of their keys, so two
 * chunks and the cancels waiting between them never wait on each other in a circle. The statuses
 * are read after the locks are granted, in a statement of their own (a statement reads what was
 * committed when it began).
 */
export async function holdUncancelled(db: Db, notificationIds: string[]): Promise<Set<string>> {
  await run(
    db,
    sql`select count(pg_advisory_xact_lock_shared(${pushLockNamespace}, s.key))
          from (select distinct hashtext(id) as key from unnest(${arrayLiteral(notificationIds)}::text[]) as id order by key offset 0) s`,
  );
  const cancelled = await rows(
    db,
    sql<{ id: string }>`select id from notifications where id = any(${arrayLiteral(notificationIds)}::uuid[]) and status = 'cancelled'`,
  );
  return new Set(cancelled.map((row) => row.id));
}

/** Those of the notifications that were cancelled and whose cancel is not finished (domain/cancellation.ts). */
export async function unfinishedCancels(db: Db, notificationIds: string[]): Promise<string[]> {
  if (notificationIds.length === 0) return [];
  const found = await rows(
    db,
    sql<{ id: string }>`select id from notifications where id = any(${arrayLiteral(notificationIds)}::uuid[]) and status = 'cancelled' and completed_at is null`,
  );
  return found.map((row) => row.id);
}

export type Progress = { pending: number; accepted: number; failed: number };

/**
 * Whether a notification has deliveries left to push, from its counters; a broadcast whose walk has
 * not ended counts one more, so that it stays `processing` while deliveries are still to be written.
 */
export async function notificationProgress(db: Db, notificationIds: string[]): Promise<Map<string, Progress>> {
  const found = await rows(
    db,
    sql<Progress & { id: string }>`
      select id, installations_count - accepted_count - failed_count - skipped_count
                 + case when audience is not null and walk_ended_at is null then 1 else 0 end as pending,
             accepted_count as accepted, failed_count as failed
        from notifications where id = any(${arrayLiteral(notificationIds)}::uuid[])`,
  );
  return new Map(found.map(({ id, ...progress }) => [id, progress]));
}

// Deliveries: the fanout's inserts, a deliver batch's reads, claims and outcomes, and their views.
import { sql } from 'kysely';
import type { components } from '../../generated/api.ts';
import { arrayLiteral } from '../array-literal.ts';
import type { PushKeys, Truncation } from '../entities.ts';
import { type Db, asDate, rows, run } from './execute.ts';
import type { NotificationRow } from './notifications.ts';
import { addToHours } from './statistics.ts';

/** An active installation a notification may go to: `rowId` is the row, `installationId` the app's id. */
export type Candidate = {
  rowId: string;
  installationId: string;
  userId: string;
  platform: components['schemas']['Platform'];
  providerIdentifier: string;
  permission: string;
  lastSeenAt: Date;
  /** The device's locale as registered (`device.locale`); null when not asked for. */
  deviceLocale: string | null;
  /** The device's time zone as registered (`device.timezone`, any text); read for a send at local time only. */
  deviceTimezone?: string | null;
};

/** A Candidate of one notification among several fanned out together. */
export type NotificationCandidate = Candidate & { notificationId: string };

/**
 * Active installations of each notification's target users, for a batch of notifications in one
 * query: per notification and user, one probe of (application_id, user_id). The probe is a lateral
 * subquery behind `offset 0`, which the planner cannot flatten into a join: as a join, with its
 * estimate of an application's installations off (it guesses 10 users an array), it chose a hash
 * join on the application that compared every one of its installations with every user id, orders
 * of magnitude slower than the probes (docs/PERFORMANCE.md). A test send's installation ids are
 * probed the same way, each in (application_id, installation_id): an id of no installation of the
 * notification's application finds nothing, another application's installation included.
 * `withLocale`: read each device's locale too (a notification with localizations); `withTimezone`,
 * its time zone (a send at each device's local time).
 */
export async function targetInstallations(
  db: Db,
  notificationIds: string[],
  { withLocale = false, withTimezone = false }: { withLocale?: boolean; withTimezone?: boolean } = {},
): Promise<NotificationCandidate[]> {
  const deviceLocale = withLocale ? sql`i.device->>'locale'` : sql`null`;
  const deviceTimezone = withTimezone ? sql`i.device->>'timezone'` : sql`null`;
  const columns = sql`
    n.id as "notificationId", i.id as "rowId", i.installation_id as "installationId", i.user_id as "userId",
    i.platform, i.provider_identifier as "providerIdentifier", i.permission, i.last_seen_at as "lastSeenAt",
    ${deviceLocale} as "deviceLocale", ${deviceTimezone} as "deviceTimezone"`;
  const ids = arrayLiteral(notificationIds);
  const found = await rows(
    db,
    sql<NotificationCandidate>`
      select ${columns}
        from notifications n
             cross join lateral unnest(n.user_ids) as u(user_id)
             cross join lateral (
               select * from installations i
                where i.application_id = n.application_id and i.user_id = u.user_id and i.status = 'active'
               offset 0
             ) i
       where n.id = any(${ids}::uuid[])
      union all
      select ${columns}
        from notifications n
             cross join lateral unnest(n.installation_ids) as t(installation_id)
             cross join lateral (
               select * from installations i
                where i.application_id = n.application_id and i.installation_id = t.installation_id and i.status = 'active'
               offset 0
             ) i
       where n.id = any(${ids}::uuid[])`,
  );
  return found.map((row) => ({ ...row, lastSeenAt: asDate(row.lastSeenAt) }));
}

export type NewDelivery = Candidate & {
  applicationId: string;
  notificationId: string;
  deliveryId: string;
  state: 'pending' | 'skipped';
  reason: string | null;
  /** The tag of the localization to push; null: the default content. */
  locale: string | null;
  truncation: Truncation | null;
  /** When it is due (a send at each device's local time); null or absent: at the send's start. */
  scheduledFor?: Date | null;
};

type TextColumn = { [K in keyof NewDelivery]-?: NewDelivery[K] extends string | null ? K : never }[keyof NewDelivery];

/**
 * Deliveries of any number of notifications, and each one's counters moved by what was inserted
 * (and its application's hour by the skipped ones), in one statement. Unique per (notification, installation): a re-run of the fanout inserts
 * nothing twice. A user counts once per notification: only when none of their deliveries existed
 * before the statement (which sees the rows as they were when it began, not those it inserts).
 * The fanout calls it once per batch of notifications; tests call it a row at a time.
 *
 * `walk`: a batch of a broadcast's walk (db/sql/broadcasts.ts), which may come after hundreds of
 * thousands of the notification's deliveries: its users are probed one by one in the
 * (application_id, user_id, id) index (a user's own deliveries) instead of reading all the
 * notification's earlier ones, and an installation without a user counts as one, as `target_users`
 * counts it.
 */
export async function insertDeliveries(db: Db, deliveries: NewDelivery[], options: { walk?: boolean } = {}): Promise<void> {
  if (deliveries.length === 0) return;
  const column = (key: TextColumn) => arrayLiteral(deliveries.map((d) => d[key]));
  const truncations = arrayLiteral(deliveries.map((d) => (d.truncation === null ? null : JSON.stringify(d.truncation))));
  // Without localizations, no array of nulls: unnest pads a null array's column with nulls.
  const locales = deliveries.some((d) => d.locale !== null) ? column('locale') : null;
  const scheduled = deliveries.some((d) => d.scheduledFor) ? arrayLiteral(deliveries.map((d) => d.scheduledFor?.toISOString() ?? null)) : null;
  const notificationIds = arrayLiteral([...new Set(deliveries.map((d) => d.notificationId))]);
  await run(
    db,
    sql`
      with inserted as (
        insert into deliveries
          (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform,
           state, reason, locale, truncation, scheduled_for, attempts, created_at, completed_at)
        select d.id, d.application_id, d.notification_id, d.installation_id, d.client_installation_id, d.user_id,
               d.platform, d.state, d.reason, d.locale, d.truncation, d.scheduled_for, 0, now(), case when d.state = 'skipped' then now() end
          from unnest(${column('deliveryId')}::uuid[], ${column('applicationId')}::uuid[], ${column('notificationId')}::uuid[],
                      ${column('rowId')}::uuid[], ${column('installationId')}::text[],
                      ${column('userId')}::text[], ${column('platform')}::text[], ${column('state')}::text[],
                      ${column('reason')}::text[], ${locales}::text[], ${truncations}::jsonb[], ${scheduled}::timestamptz[])
            as d(id, application_id, notification_id, installation_id, client_installation_id, user_id, platform, state,
                 reason, locale, truncation, scheduled_for)
        on conflict (notification_id, installation_id) do nothing
        returning application_id, notification_id, user_id, state
      ), counted as (
        update notifications n
           set users_count = n.users_count + c.users, installations_count = n.installations_count + c.installations,
               skipped_count = n.skipped_count + c.skipped
          from (select i.notification_id, ${options.walk ? walkUsers : users(notificationIds)} as users,
                       count(*) as installations, count(*) filter (where i.state = 'skipped') as skipped
                  from inserted i
                 group by i.notification_id) c
         where n.id = c.notification_id
        returning n.application_id, c.skipped
      )
      ${addToHours(sql`
        select application_id, 0, 0, 0, sum(skipped), 0 from counted
         group by application_id having sum(skipped) > 0`)}`,
  );
}

/**
 * Users of a fanout's insert met for the first time in the notification (see insertDeliveries).
 * NOT IN, not a NOT EXISTS per row: the notifications' earlier users are read once into a hash.
 * Probing the (notification_id, …) index once per inserted row visited every row the statement
 * inserted each time (their index entries are there, only invisible): quadratic in the fanout's size.
 * An installation without a user (only a test send reaches one) counts as one, as an audience's do.
 */
const users = (notificationIds: string) => sql`
  count(distinct i.user_id) filter (
    where (i.notification_id, i.user_id) not in (
      select e.notification_id, e.user_id from deliveries e
       where e.notification_id = any(${notificationIds}::uuid[]) and e.user_id is not null)
  ) + count(*) filter (where i.user_id is null)`;

/**
 * The same for a batch of a broadcast's walk: a probe of each user's deliveries in the application
 * (the statement does not see the rows it inserts, so only earlier batches' count), and each
 * installation without a user.
 */
const walkUsers = sql`
  count(distinct i.user_id) filter (
    where i.user_id is not null and not exists (
      select 1 from deliveries e where e.application_id = i.application_id and e.user_id = i.user_id and e.notification_id = i.notification_id)
  ) + count(*) filter (where i.user_id is null)`;

export type ClaimedDelivery = {
  deliveryId: string;
  notificationId: string;
  /** Null when the installation was deleted since the fanout. */
  installationRowId: string | null;
  providerIdentifier: string | null;
  /** A web installation's subscription keys; null for the other platforms. */
  pushKeys?: PushKeys | null;
  /** When this read the installation (the database's clock): what a Web Push invalidation is dated. */
  readAt?: Date;
  installationStatus: string | null;
  attempts: number;
  /** The localization to push (insertDeliveries); null: the default content. */
  locale: string | null;
  /** When it was due (a send at each device's local time): what its ttl counts from; null: the notification's time. */
  scheduledFor: Date | null;
};

/** What a deliver batch reads of a notification: what is pushed and until when, not its recipients. */
export type PushedNotification = Pick<
  NotificationRow,
  'id' | 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options' | 'createdAt' | 'scheduledFor'
>;

/**
 * Which credential a deliver batch pushes with: its row's id, when it last changed (epoch ms), and
 * whether it was marked unhealthy or unreachable, or is not verified yet (only then does an
 * accepted push write to it).
 */
export type CredentialVersion = { id: string; version: number; marked: boolean };

/** What a deliver batch reads before it pushes (readBatch). */
export type DeliverBatch = {
  /** The notifications it pushes (one or many: a batch of scheduled sends puts many small ones together). */
  notifications: PushedNotification[];
  /** Its deliveries still pending, each with the number of the attempt about to be made. */
  pending: ClaimedDelivery[];
  /** The application's credential for the provider; null: none. */
  credential: CredentialVersion | null;
};

/**
 * Everything a deliver batch reads before it pushes, in one round trip: its notifications (read
 * through the deliveries; not `user_ids`, up to 500 ids a row read for nothing, nor the counters),
 * its pending deliveries with each installation's current identifier, and the version and health
 * of the credential it pushes with. Read without counting the attempt, which is written with the outcome
 * (recordResults, countAttempts): one update per push instead of two. A batch that must count it
 * first claims its deliveries with claimPending instead. The batch's deliveries are probed once, and
 * its notifications by their ids: read as `id in (select … from deliveries …)`, the planner could
 * make that a scan of each notification's deliveries compared with all the batch's ids, and the
 * installations a hash of the whole table, which costs Postgres more CPU a delivery even with
 * fresh statistics (`make bench-statements`).
 */
export async function readBatch(db: Db, job: { applicationId: string; provider: string; deliveryIds: string[] }): Promise<DeliverBatch> {
  const [found] = await rows(
    db,
    sql<{ notifications: PushedNotification[]; pending: ClaimedDelivery[]; credential: CredentialVersion | null }>`
      with batch as materialized (
        select id, notification_id, installation_id, state, attempts, locale, scheduled_for from deliveries where id = any(${arrayLiteral(job.deliveryIds)}::uuid[])
      )
      select
        (select coalesce(json_agg(n), '[]') from (
           select id, title, body, image_url as "imageUrl", action_url as "actionUrl", localizations, data, options,
                  created_at as "createdAt", scheduled_for as "scheduledFor"
             from notifications
            where id = any(array(select distinct notification_id from batch))) n) as notifications,
        (select coalesce(json_agg(p), '[]') from (
           select d.id as "deliveryId", d.notification_id as "notificationId", d.installation_id as "installationRowId",
                  i.provider_identifier as "providerIdentifier", i.push_keys as "pushKeys", statement_timestamp() as "readAt",
                  i.status as "installationStatus", d.attempts + 1 as attempts, d.locale,
                  d.scheduled_for as "scheduledFor"
             from batch d left join installations i on i.id = d.installation_id
            where d.state = 'pending') p) as pending,
        (select json_build_object('id', c.id, 'version', floor(extract(epoch from c.updated_at) * 1000)::float8,
                                  'marked', c.unhealthy_since is not null or c.unreachable_since is not null or c.verified_at is null)
           from provider_credentials c where c.application_id = ${job.applicationId} and c.provider = ${job.provider}) as credential`,
  );
  return {
    notifications: found.notifications.map((row) => ({ ...row, createdAt: asDate(row.createdAt), scheduledFor: row.scheduledFor && asDate(row.scheduledFor) })),
    pending: found.pending.map(claimedDelivery),
    credential: found.credential,
  };
}

/** A claimed delivery's due time as a Date (json_agg writes it as text); a row without one is kept as read. */
const claimedDelivery = (row: ClaimedDelivery): ClaimedDelivery => ({
  ...row,
  readAt: row.readAt && asDate(row.readAt),
  ...(row.scheduledFor ? { scheduledFor: asDate(row.scheduledFor) } : {}),
});

/**
 * Claims the batch's still-pending deliveries and counts the attempt about to be made before the
 * push goes out: a ttl 0 push is made at most once, even if the process dies before its outcome
 * is recorded.
 */
export async function claimPending(db: Db, deliveryIds: string[]): Promise<ClaimedDelivery[]> {
  const claimed = await rows(
    db,
    sql<ClaimedDelivery>`
      with claimed as (
        update deliveries set attempts = attempts + 1, last_attempt_at = now()
         where id = any(${arrayLiteral(deliveryIds)}::uuid[]) and state = 'pending'
        returning id, notification_id, installation_id, attempts, locale, scheduled_for
      )
      select c.id as "deliveryId", c.notification_id as "notificationId", c.installation_id as "installationRowId",
             i.provider_identifier as "providerIdentifier", i.push_keys as "pushKeys", statement_timestamp() as "readAt",
             i.status as "installationStatus", c.attempts, c.locale,
             c.scheduled_for as "scheduledFor"
        from claimed c left join installations i on i.id = c.installation_id`,
  );
  return claimed.map(claimedDelivery);
}

/** Counts an attempt of deliveries that stay pending (to be retried), when the claim did not. */
export async function countAttempts(db: Db, deliveryIds: string[]): Promise<void> {
  if (deliveryIds.length === 0) return;
  await run(
    db,
    sql`update deliveries set attempts = attempts + 1, last_attempt_at = now() where id = any(${arrayLiteral(deliveryIds)}::uuid[]) and state = 'pending'`,
  );
}

export type DeliveryResult = {
  deliveryId: string;
  state: 'accepted' | 'failed' | 'skipped';
  reason: string | null;
  providerMessageId: string | null;
};

/** A delivery as its views show it (domain/deliveries.ts deliveryView), with its notification. */
export type DeliveryRecord = {
  id: string;
  notificationId: string;
  clientInstallationId: string;
  userId: string | null;
  platform: components['schemas']['Platform'];
  state: components['schemas']['DeliveryState'];
  reason: string | null;
  attempts: number;
  providerMessageId: string | null;
  /** The localization sent (its tag); null: the default content. */
  locale: string | null;
  truncation: Truncation | null;
  createdAt: Date;
  /** When it is due (a send at each device's local time); null: at the send's start. */
  scheduledFor: Date | null;
  lastAttemptAt: Date | null;
  completedAt: Date | null;
  receivedAt: Date | null;
  displayedAt: Date | null;
  openedAt: Date | null;
  dismissedAt: Date | null;
};

const deliveryColumns = sql`
  id, notification_id as "notificationId", client_installation_id as "clientInstallationId", user_id as "userId", platform,
  state, reason, attempts, provider_message_id as "providerMessageId", locale, truncation, created_at as "createdAt",
  scheduled_for as "scheduledFor", last_attempt_at as "lastAttemptAt", completed_at as "completedAt", received_at as "receivedAt",
  displayed_at as "displayedAt", opened_at as "openedAt", dismissed_at as "dismissedAt"`;

const deliveryRecord = (row: DeliveryRecord): DeliveryRecord => ({
  ...row,
  createdAt: asDate(row.createdAt),
  scheduledFor: row.scheduledFor && asDate(row.scheduledFor),
  lastAttemptAt: row.lastAttemptAt && asDate(row.lastAttemptAt),
  completedAt: row.completedAt && asDate(row.completedAt),
  receivedAt: row.receivedAt && asDate(row.receivedAt),
  displayedAt: row.displayedAt && asDate(row.displayedAt),
  openedAt: row.openedAt && asDate(row.openedAt),
  dismissedAt: row.dismissedAt && asDate(row.dismissedAt),
});

/** A delivery with the title of its notification (its default content's; null: none). */
export type UserDeliveryRecord = DeliveryRecord & { notificationTitle: string | null };

/**
 * A user's deliveries across the application's notifications, newest first, after the cursor's id
 * (delivery ids are UUIDv7s made at fanout, so id order is creation order). The (application_id,
 * user_id, id) index gives the page in order, then each row's notification is read by its key: the
 * page is limited before the join, so the join reads a page of notifications, whatever the user
 * has. A left join: a page keeps its length even if a notification went first (retention deletes
 * deliveries before their notification, so that should not happen).
 */
export async function userDeliveryRows(
  db: Db,
  applicationId: string,
  userId: string,
  page: { limit: number; before?: string },
): Promise<UserDeliveryRecord[]> {
  const before = page.before === undefined ? sql`` : sql`and id < ${page.before}`;
  const found = await rows(
    db,
    sql<UserDeliveryRecord>`
      select d.*, n.title as "notificationTitle"
        from (select ${deliveryColumns} from deliveries
               where application_id = ${applicationId} and user_id = ${userId} ${before}
               order by id desc limit ${page.limit}) d
             left join notifications n on n.id = d."notificationId"
       order by d.id desc`,
  );
  return found.map((row) => ({ ...deliveryRecord(row), notificationTitle: row.notificationTitle }));
}

/** How many deliveries a statement moved to one outcome. */
export type MovedCount = { state: DeliveryResult['state']; reason: string | null; count: number };

/**
 * Records a batch's final outcomes and moves their notifications' counters and their
 * applications' hours (db/sql/statistics.ts), in one statement (deliveries to retry are not among them). Only a delivery still pending moves, so a replayed
 * outcome counts nothing twice. A delivery skipped at send time (installation deleted...) pushed
 * nothing, so nothing was cut and no localization sent. `countAttempt`: the attempt is counted
 * here (claimPending). Answers what moved, by state and reason (for the metrics, which therefore
 * count exactly what the statistics count); the counters' update runs whether or not the answer
 * reads it (a data-modifying `with` always runs to completion). With `withFailed` (the application
 * has an endpoint for `delivery.failed`), the same statement also answers the deliveries it failed,
 * as they now are (what those webhooks carry); without it, the statement reads nothing more.
 */
export async function recordResults(
  db: Db,
  results: DeliveryResult[],
  countAttempt: boolean,
  withFailed = false,
): Promise<{ moved: MovedCount[]; failed: DeliveryRecord[] }> {
  if (results.length === 0) return { moved: [], failed: [] };
  // One row more, after the counts: the failed deliveries as a json array (timestamps as ISO text).
  const failedAlso = sql`, null::json as failed from moved group by state, reason
    union all select null, null, null, json_agg(f) from (select ${deliveryColumns} from moved where state = 'failed') f`;
  const answered = await rows(
    db,
    sql<MovedCount & { failed?: DeliveryRecord[] | null }>`
      with moved as (
        update deliveries d
           set state = r.state, reason = r.reason, provider_message_id = r.provider_message_id,
               completed_at = now(),
               attempts = d.attempts + case when ${countAttempt}::boolean then 1 else 0 end,
               last_attempt_at = case when ${countAttempt}::boolean then now() else d.last_attempt_at end,
               truncation = case when r.state = 'skipped' then null else d.truncation end,
               locale = case when r.state = 'skipped' then null else d.locale end
          from unnest(${arrayLiteral(results.map((r) => r.deliveryId))}::uuid[], ${arrayLiteral(results.map((r) => r.state))}::text[],
                      ${arrayLiteral(results.map((r) => r.reason))}::text[], ${arrayLiteral(results.map((r) => r.providerMessageId))}::text[])
            as r(id, state, reason, provider_message_id)
         where d.id = r.id and d.state = 'pending'
        returning ${withFailed ? sql`d.*` : sql`d.notification_id, r.state, r.reason`}
      ), counted as (
        update notifications n
           set accepted_count = n.accepted_count + c.accepted, failed_count = n.failed_count + c.failed,
               skipped_count = n.skipped_count + c.skipped
          from (select notification_id, count(*) filter (where state = 'accepted') as accepted,
                       count(*) filter (where state = 'failed') as failed, count(*) filter (where state = 'skipped') as skipped
                  from moved group by notification_id) c
         where n.id = c.notification_id
        returning n.application_id, c.accepted, c.failed, c.skipped
      ), hours as (
        ${addToHours(sql`
          select application_id, 0, sum(accepted), sum(failed), sum(skipped), 0
            from counted group by application_id`)}
      )
      select state, reason, count(*)::int as count ${withFailed ? failedAlso : sql`from moved group by state, reason`}`,
  );
  // The failed deliveries' row has no state (a union's columns are the counts').
  const moved = answered.filter((row) => row.state !== null).map(({ state, reason, count }) => ({ state, reason, count }));
  return { moved, failed: answered.flatMap((row) => row.failed ?? []).map(deliveryRecord) };
}

/**
 * Ends every still-pending delivery of the notification as skipped, reason `cancelled`, and moves
 * the counters and the application's hour with them, in one statement. Answers how many moved, per platform.
 */
export async function skipPendingAsCancelled(db: Db, notificationId: string): Promise<{ platform: string; count: number }[]> {
  return rows(
    db,
    sql<{ platform: string; count: number }>`
      with moved as (
        update deliveries set state = 'skipped', reason = 'cancelled', completed_at = now(), truncation = null, locale = null
         where notification_id = ${notificationId} and state = 'pending'
        returning platform
      ), counted as (
        update notifications n set skipped_count = n.skipped_count + c.skipped
          from (select count(*) as skipped from moved) c
         where n.id = ${notificationId} and c.skipped > 0
        returning n.application_id, c.skipped
      ), hours as (
        ${addToHours(sql`select application_id, 0, 0, 0, skipped, 0 from counted`)}
      )
      select platform, count(*)::int as count from moved group by platform`,
  );
}

export type BreakdownRow = {
  state: components['schemas']['DeliveryState'];
  platform: components['schemas']['Platform'];
  reason: string | null;
  deliveries: number;
};

/**
 * A notification's deliveries counted by state, platform and reason: why the `failed` and `skipped`
 * counters are what they are. Reads that notification's rows through the (notification_id, id)
 * index, a few milliseconds for the thousands a 500-user send makes: cheap enough to poll.
 */
export async function deliveryBreakdown(db: Db, notificationId: string): Promise<BreakdownRow[]> {
  return rows(
    db,
    sql<BreakdownRow>`
      select state, platform, reason, count(*)::int as deliveries
        from deliveries
       where notification_id = ${notificationId}
       group by state, platform, reason
       order by deliveries desc, state, platform, reason`,
  );
}

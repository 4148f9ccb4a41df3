// Every hand-written statement of Herald, in one style: a Kysely `sql` template with its values
// bound as parameters, beside the comment that explains its trade-off (pg-boss keeps its plans
// the same way). Everything else goes through the ORM. The hot paths are set-based (unnest of
// arrays): one round trip per batch, never one per push.
//
// A statement runs on a unit of work (an EntityManager, inside its transaction if it has one), in
// a pipelined transaction (a send's: db/pipelined-pool.ts), on a Kysely of its own pool (the
// leases), or, compiled with `compiled()`, on a dedicated session (advisory locks, which live as
// long as their connection).
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresDialect,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type QueryExecutorProvider,
  type RawBuilder,
} from 'kysely';
import pg from 'pg';
import type { components } from '../generated/api.ts';
import { newId } from './ids.ts';
import { arrayLiteral } from './array-literal.ts';
import { PreparingClient } from './preparing-client.ts';
import type { DeviceDetails, Localizations, Truncation, WebhookAttempt } from './entities.ts';

/** A session that runs a compiled statement itself: a send's pipelined transaction (db/pipelined-pool.ts). */
export type StatementSession = { rows<T>(statement: RawBuilder<T>): Promise<T[]> };

export type Db = EntityManager | QueryExecutorProvider | StatementSession;

async function rows<T>(db: Db, statement: RawBuilder<T>): Promise<T[]> {
  if ('rows' in db) return db.rows(statement);
  return (await statement.execute('getKysely' in db ? db.getKysely() : db)).rows;
}

async function run(db: Db, statement: RawBuilder<unknown>): Promise<void> {
  await rows(db, statement);
}

// Compiles without a connection, for statements that must run on one particular session.
const compiler = new Kysely<unknown>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

export function compiled(statement: RawBuilder<unknown>): { text: string; values: unknown[] } {
  const { sql: text, parameters } = statement.compile(compiler);
  return { text, values: [...parameters] };
}

/**
 * A pool of its own, beside the ORM's. A connection the database cuts emits 'error': on an idle one
 * the pool's listener takes it, but one checked out between two statements has none, and an
 * unheard 'error' ends the process. Every connection gets a listener; the failure still reaches
 * the statement that uses the connection. Its connections prepare each statement text once
 * (PreparingClient), as the ORM's do.
 */
export function openListenedPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool({ Client: PreparingClient, ...config });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** A Kysely on a pool of its own (a service beside the ORM's, a benchmark). */
export function openStatementPool(url: string, max: number): { db: Kysely<unknown>; close(): Promise<void> } {
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: openListenedPool({ connectionString: url, max }) }) });
  return { db, close: () => db.destroy() };
}

// Raw results carry timestamps as the driver gives them (the ORM's type parsers are not applied).
const asDate = (value: Date | string): Date => (value instanceof Date ? value : new Date(value));

// ---------------------------------------------------------------------------------------------
// Infrastructure

/** Readiness and the outage watch's probe. */
export async function ping(db: Db): Promise<void> {
  await run(db, sql`select 1`);
}

/** Session-level: any number of processes may start at once; one migrates at a time. */
export const takeMigrationLock = (key: number) => sql`select pg_advisory_lock(${key})`;

export const databaseExists = (name: string) => sql`select 1 from pg_database where datname = ${name}`;

export const createDatabase = (name: string) => sql`create database ${sql.id(name)}`;

// ---------------------------------------------------------------------------------------------
// Installations

export type InstallationRow = {
  id: string;
  installationId: string;
  platform: components['schemas']['Platform'];
  providerIdentifier: string;
  status: components['schemas']['Installation']['status'];
  permission: components['schemas']['Permission'];
  userId: string | null;
  device: DeviceDetails;
  registeredAt: Date;
  lastSeenAt: Date;
  identifierUpdatedAt: Date;
  permissionUpdatedAt: Date;
  invalidatedAt: Date | null;
  invalidReason: string | null;
};

const installationColumns = sql`
  id, installation_id as "installationId", platform, provider_identifier as "providerIdentifier", status, permission,
  user_id as "userId", device, registered_at as "registeredAt", last_seen_at as "lastSeenAt",
  identifier_updated_at as "identifierUpdatedAt", permission_updated_at as "permissionUpdatedAt",
  invalidated_at as "invalidatedAt", invalid_reason as "invalidReason"`;

const installationRow = (row: InstallationRow): InstallationRow => ({
  ...row,
  registeredAt: asDate(row.registeredAt),
  lastSeenAt: asDate(row.lastSeenAt),
  identifierUpdatedAt: asDate(row.identifierUpdatedAt),
  permissionUpdatedAt: asDate(row.permissionUpdatedAt),
  invalidatedAt: row.invalidatedAt && asDate(row.invalidatedAt),
});

export type InstallationKey = { applicationId: string; installationId: string };
export type InstallationReplacement = Pick<InstallationRow, 'platform' | 'providerIdentifier' | 'permission' | 'userId' | 'device'>;

/**
 * A PUT, in one statement: a full replace of what the client gives that keeps `registered_at`,
 * moves `identifier_updated_at` and `permission_updated_at` only when those values change, and
 * keeps an installation a provider invalidated invalid unless the identifier is new (the app got
 * a fresh token). Concurrent first registrations meet on the unique key: one creates, the others
 * replace. `created`: no row existed (xmax is 0 on a freshly inserted row version).
 */
export async function upsertInstallation(
  db: Db,
  key: InstallationKey,
  replacement: InstallationReplacement,
  now: Date,
): Promise<{ installation: InstallationRow; created: boolean }> {
  const [row] = await rows(
    db,
    sql<InstallationRow & { created: boolean }>`
      insert into installations as i
        (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
         registered_at, last_seen_at, identifier_updated_at, permission_updated_at, invalidated_at, invalid_reason)
      values (${newId()}, ${key.applicationId}, ${key.installationId}, ${replacement.platform}, ${replacement.providerIdentifier},
              'active', ${replacement.permission}, ${replacement.userId}, ${JSON.stringify(replacement.device)}::jsonb,
              ${now}, ${now}, ${now}, ${now}, null, null)
      on conflict (application_id, installation_id) do update set
        platform = excluded.platform, provider_identifier = excluded.provider_identifier, permission = excluded.permission,
        user_id = excluded.user_id, device = excluded.device, last_seen_at = excluded.last_seen_at,
        identifier_updated_at = case when i.provider_identifier = excluded.provider_identifier then i.identifier_updated_at else excluded.identifier_updated_at end,
        permission_updated_at = case when i.permission = excluded.permission then i.permission_updated_at else excluded.permission_updated_at end,
        status = case when i.provider_identifier = excluded.provider_identifier then i.status else 'active' end,
        invalidated_at = case when i.provider_identifier = excluded.provider_identifier then i.invalidated_at end,
        invalid_reason = case when i.provider_identifier = excluded.provider_identifier then i.invalid_reason end
      returning ${installationColumns}, (xmax = 0) as created`,
  );
  const { created, ...installation } = row;
  return { installation: installationRow(installation), created };
}

export type InstallationPatch = { userId?: string | null; permission?: InstallationRow['permission'] };

/** A PATCH: the user as given (null detaches it), and `permission_updated_at` only on a new permission. */
export async function patchInstallation(db: Db, key: InstallationKey, patch: InstallationPatch, now: Date): Promise<InstallationRow | undefined> {
  const permission = patch.permission ?? null;
  const [row] = await rows(
    db,
    sql<InstallationRow>`
      update installations i set
        user_id = ${patch.userId === undefined ? sql`i.user_id` : sql`${patch.userId}`},
        permission = coalesce(${permission}, i.permission),
        permission_updated_at = case when ${permission}::text is distinct from i.permission::text and ${permission}::text is not null
                                     then ${now} else i.permission_updated_at end,
        last_seen_at = ${now}
       where application_id = ${key.applicationId} and installation_id = ${key.installationId}
      returning ${installationColumns}`,
  );
  return row && installationRow(row);
}

export async function findInstallationRow(db: Db, key: InstallationKey): Promise<InstallationRow | undefined> {
  const [row] = await rows(
    db,
    sql<InstallationRow>`select ${installationColumns} from installations where application_id = ${key.applicationId} and installation_id = ${key.installationId}`,
  );
  return row && installationRow(row);
}

/**
 * A user's installations, newest registration first, after the cursor's id: the row id is a
 * UUIDv7 made at the first registration (a replace keeps it), so id order is registration order.
 * The (application_id, user_id, id) index gives a page in order, however many the user has.
 */
export async function listUserInstallationRows(
  db: Db,
  applicationId: string,
  userId: string,
  page: { limit: number; before?: string },
): Promise<InstallationRow[]> {
  const before = page.before === undefined ? sql`` : sql`and id < ${page.before}`;
  const found = await rows(
    db,
    sql<InstallationRow>`
      select ${installationColumns} from installations
       where application_id = ${applicationId} and user_id = ${userId} ${before}
       order by id desc limit ${page.limit}`,
  );
  return found.map(installationRow);
}

// ---------------------------------------------------------------------------------------------
// Fanout and delivery

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
};

/** A Candidate of one notification among several fanned out together. */
export type NotificationCandidate = Candidate & { notificationId: string };

/**
 * Active installations of each notification's target users, for a batch of notifications in one
 * query: per notification and user, one probe of (application_id, user_id). The probe is a lateral
 * subquery behind `offset 0`, which the planner cannot flatten into a join: as a join, with its
 * estimate of an application's installations off (it guesses 10 users an array), it chose a hash
 * join on the application that compared every one of its installations with every user id
 * (measured: 16 notifications × 500 users against 20,000 installations, 2.8 s instead of 15 ms).
 * `withLocale`: read each device's locale too (a notification with localizations).
 */
export async function targetInstallations(db: Db, notificationIds: string[], withLocale = false): Promise<NotificationCandidate[]> {
  const deviceLocale = withLocale ? sql`i.device->>'locale'` : sql`null`;
  const found = await rows(
    db,
    sql<NotificationCandidate>`
      select n.id as "notificationId", i.id as "rowId", i.installation_id as "installationId", i.user_id as "userId",
             i.platform, i.provider_identifier as "providerIdentifier", i.permission, i.last_seen_at as "lastSeenAt",
             ${deviceLocale} as "deviceLocale"
        from notifications n
             cross join lateral unnest(n.user_ids) as u(user_id)
             cross join lateral (
               select * from installations i
                where i.application_id = n.application_id and i.user_id = u.user_id and i.status = 'active'
               offset 0
             ) i
       where n.id = any(${arrayLiteral(notificationIds)}::uuid[])`,
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
};

type TextColumn = { [K in keyof NewDelivery]: NewDelivery[K] extends string | null ? K : never }[keyof NewDelivery];

/**
 * Deliveries of any number of notifications, and each one's counters moved by what was inserted,
 * in one statement. Unique per (notification, installation): a re-run of the fanout inserts
 * nothing twice. A user counts once per notification: only when none of their deliveries existed
 * before the statement (which sees the rows as they were when it began, not those it inserts).
 * The fanout calls it once per batch of notifications; tests call it a row at a time.
 */
export async function insertDeliveries(db: Db, deliveries: NewDelivery[]): Promise<void> {
  if (deliveries.length === 0) return;
  const column = (key: TextColumn) => arrayLiteral(deliveries.map((d) => d[key]));
  const truncations = arrayLiteral(deliveries.map((d) => (d.truncation === null ? null : JSON.stringify(d.truncation))));
  // Without localizations, no array of nulls: unnest pads a null array's column with nulls.
  const locales = deliveries.some((d) => d.locale !== null) ? column('locale') : null;
  const notificationIds = arrayLiteral([...new Set(deliveries.map((d) => d.notificationId))]);
  await run(
    db,
    sql`
      with inserted as (
        insert into deliveries
          (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform,
           state, reason, locale, truncation, attempts, created_at, completed_at)
        select d.id, d.application_id, d.notification_id, d.installation_id, d.client_installation_id, d.user_id,
               d.platform, d.state, d.reason, d.locale, d.truncation, 0, now(), case when d.state = 'skipped' then now() end
          from unnest(${column('deliveryId')}::uuid[], ${column('applicationId')}::uuid[], ${column('notificationId')}::uuid[],
                      ${column('rowId')}::uuid[], ${column('installationId')}::text[],
                      ${column('userId')}::text[], ${column('platform')}::text[], ${column('state')}::text[],
                      ${column('reason')}::text[], ${locales}::text[], ${truncations}::jsonb[])
            as d(id, application_id, notification_id, installation_id, client_installation_id, user_id, platform, state,
                 reason, locale, truncation)
        on conflict (notification_id, installation_id) do nothing
        returning notification_id, user_id, state
      )
      update notifications n
         set users_count = n.users_count + c.users, installations_count = n.installations_count + c.installations,
             skipped_count = n.skipped_count + c.skipped
        -- NOT IN, not a NOT EXISTS per row: the notifications' earlier users are read once into a
        -- hash. Probing the deliveries index once per inserted row visited every row this statement
        -- inserted each time (their index entries are there, only invisible): O(n²), ~150 ms a fanout.
        from (select i.notification_id,
                     count(distinct i.user_id) filter (
                       where (i.notification_id, i.user_id) not in (
                         select e.notification_id, e.user_id from deliveries e
                          where e.notification_id = any(${notificationIds}::uuid[]) and e.user_id is not null)
                     ) as users,
                     count(*) as installations, count(*) filter (where i.state = 'skipped') as skipped
                from inserted i
               group by i.notification_id) c
       where n.id = c.notification_id`,
  );
}

export type ClaimedDelivery = {
  deliveryId: string;
  notificationId: string;
  /** Null when the installation was deleted since the fanout. */
  installationRowId: string | null;
  providerIdentifier: string | null;
  installationStatus: string | null;
  attempts: number;
  /** The localization to push (insertDeliveries); null: the default content. */
  locale: string | null;
};

/** What a deliver batch reads of a notification: what is pushed and until when, not its recipients. */
export type PushedNotification = Pick<
  NotificationRow,
  'id' | 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options' | 'createdAt' | 'scheduledFor'
>;

/**
 * Which credential a deliver batch pushes with: its row's id, when it last changed (epoch ms), and
 * whether it was marked unhealthy or unreachable (only then does an accepted push write to it).
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
 * installations a hash of the whole table (with fresh statistics, `make bench-statements`: 19-20 µs
 * of Postgres' CPU a delivery against 12-16).
 */
export async function readBatch(db: Db, job: { applicationId: string; provider: string; deliveryIds: string[] }): Promise<DeliverBatch> {
  const [found] = await rows(
    db,
    sql<{ notifications: PushedNotification[]; pending: ClaimedDelivery[]; credential: CredentialVersion | null }>`
      with batch as materialized (
        select id, notification_id, installation_id, state, attempts, locale from deliveries where id = any(${arrayLiteral(job.deliveryIds)}::uuid[])
      )
      select
        (select coalesce(json_agg(n), '[]') from (
           select id, title, body, image_url as "imageUrl", action_url as "actionUrl", localizations, data, options,
                  created_at as "createdAt", scheduled_for as "scheduledFor"
             from notifications
            where id = any(array(select distinct notification_id from batch))) n) as notifications,
        (select coalesce(json_agg(p), '[]') from (
           select d.id as "deliveryId", d.notification_id as "notificationId", d.installation_id as "installationRowId",
                  i.provider_identifier as "providerIdentifier", i.status as "installationStatus", d.attempts + 1 as attempts, d.locale
             from batch d left join installations i on i.id = d.installation_id
            where d.state = 'pending') p) as pending,
        (select json_build_object('id', c.id, 'version', floor(extract(epoch from c.updated_at) * 1000)::float8,
                                  'marked', c.unhealthy_since is not null or c.unreachable_since is not null)
           from provider_credentials c where c.application_id = ${job.applicationId} and c.provider = ${job.provider}) as credential`,
  );
  return {
    notifications: found.notifications.map((row) => ({ ...row, createdAt: asDate(row.createdAt), scheduledFor: row.scheduledFor && asDate(row.scheduledFor) })),
    pending: found.pending,
    credential: found.credential,
  };
}

/**
 * Claims the batch's still-pending deliveries and counts the attempt about to be made before the
 * push goes out: a ttl 0 push is made at most once, even if the process dies before its outcome
 * is recorded.
 */
export async function claimPending(db: Db, deliveryIds: string[]): Promise<ClaimedDelivery[]> {
  return rows(
    db,
    sql<ClaimedDelivery>`
      with claimed as (
        update deliveries set attempts = attempts + 1, last_attempt_at = now()
         where id = any(${arrayLiteral(deliveryIds)}::uuid[]) and state = 'pending'
        returning id, notification_id, installation_id, attempts, locale
      )
      select c.id as "deliveryId", c.notification_id as "notificationId", c.installation_id as "installationRowId",
             i.provider_identifier as "providerIdentifier", i.status as "installationStatus", c.attempts, c.locale
        from claimed c left join installations i on i.id = c.installation_id`,
  );
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
  last_attempt_at as "lastAttemptAt", completed_at as "completedAt", received_at as "receivedAt",
  displayed_at as "displayedAt", opened_at as "openedAt", dismissed_at as "dismissedAt"`;

const deliveryRecord = (row: DeliveryRecord): DeliveryRecord => ({
  ...row,
  createdAt: asDate(row.createdAt),
  lastAttemptAt: row.lastAttemptAt && asDate(row.lastAttemptAt),
  completedAt: row.completedAt && asDate(row.completedAt),
  receivedAt: row.receivedAt && asDate(row.receivedAt),
  displayedAt: row.displayedAt && asDate(row.displayedAt),
  openedAt: row.openedAt && asDate(row.openedAt),
  dismissedAt: row.dismissedAt && asDate(row.dismissedAt),
});

/** How many deliveries a statement moved to one outcome. */
export type MovedCount = { state: DeliveryResult['state']; reason: string | null; count: number };

/**
 * Records a batch's final outcomes and moves their notifications' counters, in one statement
 * (deliveries to retry are not among them). Only a delivery still pending moves, so a replayed
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
      )
      select state, reason, count(*)::int as count ${withFailed ? failedAlso : sql`from moved group by state, reason`}`,
  );
  // The failed deliveries' row has no state (a union's columns are the counts').
  const moved = answered.filter((row) => row.state !== null).map(({ state, reason, count }) => ({ state, reason, count }));
  return { moved, failed: answered.flatMap((row) => row.failed ?? []).map(deliveryRecord) };
}

export type Invalidation = { installationRowId: string; providerIdentifier: string; reason: string; providerTimestamp: Date | null };

/**
 * Invalidates installations whose identifier the provider declared dead, unless the device has
 * registered a new one since: the identifier must still be the one we sent to, and a provider's
 * date (APNs dates its 410: when it found the token invalid) older than the last identifier change
 * concerns an identifier the device has replaced, so it is stale. A report without a date (FCM,
 * APNs's other reasons) is never stale. Returns the installations it invalidated, as they now are.
 */
export async function invalidateInstallations(db: Db, invalidations: Invalidation[]): Promise<InstallationRow[]> {
  if (invalidations.length === 0) return [];
  const invalidated = await rows(
    db,
    sql<InstallationRow>`
      update installations i
         set status = 'invalid', invalidated_at = now(), invalid_reason = v.reason
        from unnest(${arrayLiteral(invalidations.map((v) => v.installationRowId))}::uuid[],
                    ${arrayLiteral(invalidations.map((v) => v.providerIdentifier))}::text[],
                    ${arrayLiteral(invalidations.map((v) => v.reason))}::text[],
                    ${arrayLiteral(invalidations.map((v) => v.providerTimestamp?.toISOString() ?? null))}::timestamptz[])
          as v(row_id, sent_identifier, reason, provider_timestamp)
       where i.id = v.row_id and i.status = 'active' and i.provider_identifier = v.sent_identifier
         and (v.provider_timestamp is null or v.provider_timestamp >= i.identifier_updated_at)
      returning ${installationColumns}`,
  );
  return invalidated.map(installationRow);
}

/** How many users each notification is for (a fanout batch is cut by that), in the order asked. */
export async function recipientCounts(db: Db, notificationIds: string[]): Promise<number[]> {
  const found = await rows(
    db,
    sql<{ id: string; recipients: number }>`select id, cardinality(user_ids) as recipients from notifications where id = any(${arrayLiteral(notificationIds)}::uuid[])`,
  );
  const counts = new Map(found.map((row) => [row.id, row.recipients]));
  return notificationIds.map((id) => counts.get(id) ?? 0);
}

/** A notification as its fanout reads it: what is pushed (not its recipients, resolved in SQL). */
export type FannedNotification = Pick<NotificationRow, 'id' | 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options'> & {
  applicationId: string;
  /** The providers its application has credentials for, as the fanout's transaction sees them. */
  credentialProviders: string[];
};

/**
 * Moves queued notifications to `processing`, each once, and answers those it moved (not those a
 * previous run did) as their fanout reads them: one statement for what were three round trips.
 */
export async function startProcessing(db: Db, notificationIds: string[]): Promise<FannedNotification[]> {
  return rows(
    db,
    sql<FannedNotification>`
      update notifications n set status = 'processing', processing_started_at = now()
       where id = any(${arrayLiteral(notificationIds)}::uuid[]) and status = 'queued'
      returning id, application_id as "applicationId", title, body, image_url as "imageUrl", action_url as "actionUrl",
                localizations, data, options,
                array(select c.provider from provider_credentials c where c.application_id = n.application_id) as "credentialProviders"`,
  );
}

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
    sql<FinishedNotification>`
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

/** For the rest of the caller's transaction, a lock not granted within `ms` fails the statement (55P03). */
export async function limitLockWait(db: Db, ms: number): Promise<void> {
  await run(db, sql`select set_config('lock_timeout', ${`${ms}ms`}, true)`);
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

/**
 * Ends every still-pending delivery of the notification as skipped, reason `cancelled`, and moves
 * the counters with them, in one statement. Answers how many moved, per platform.
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
        update notifications set skipped_count = skipped_count + (select count(*) from moved)
         where id = ${notificationId}
      )
      select platform, count(*)::int as count from moved group by platform`,
  );
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

/** Whether a notification has deliveries left to push, from its counters. */
export async function notificationProgress(db: Db, notificationIds: string[]): Promise<Map<string, Progress>> {
  const found = await rows(
    db,
    sql<Progress & { id: string }>`
      select id, installations_count - accepted_count - failed_count - skipped_count as pending,
             accepted_count as accepted, failed_count as failed
        from notifications where id = any(${arrayLiteral(notificationIds)}::uuid[])`,
  );
  return new Map(found.map(({ id, ...progress }) => [id, progress]));
}

export type DeliveryCounts = {
  notificationId: string;
  users: number;
  installations: number;
  pending: number;
  accepted: number;
  failed: number;
  skipped: number;
  received: number;
  displayed: number;
  opened: number;
};

/**
 * A notification's deliveries counted from the rows, by state and by first event: what the
 * counters on the notification (kept by insertDeliveries, recordResults and reportEvent) must
 * always equal; tests and benchmarks check them with it. Notifications without deliveries are absent.
 */
export async function deliveryCounts(db: Db, notificationIds: string[]): Promise<DeliveryCounts[]> {
  if (notificationIds.length === 0) return [];
  return rows(
    db,
    sql<DeliveryCounts>`
      select notification_id as "notificationId",
             count(distinct user_id)::int as users,
             count(*)::int as installations,
             (count(*) filter (where state = 'pending'))::int as pending,
             (count(*) filter (where state = 'accepted'))::int as accepted,
             (count(*) filter (where state = 'failed'))::int as failed,
             (count(*) filter (where state = 'skipped'))::int as skipped,
             count(received_at)::int as received,
             count(displayed_at)::int as displayed,
             count(opened_at)::int as opened
        from deliveries
       where notification_id = any(${arrayLiteral(notificationIds)}::uuid[])
       group by notification_id`,
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

// ---------------------------------------------------------------------------------------------
// Reading notifications

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
};

// user_ids stays in the table: up to 500 ids a row, which a view never shows.
const notificationColumns = sql`
  id, status, title, body, image_url as "imageUrl", action_url as "actionUrl", localizations, data, options,
  cardinality(user_ids) as "targetUsers", created_at as "createdAt", scheduled_for as "scheduledFor",
  processing_started_at as "processingStartedAt",
  completed_at as "completedAt", users_count as "usersCount", installations_count as "installationsCount",
  accepted_count as "acceptedCount", failed_count as "failedCount", skipped_count as "skippedCount",
  received_count as "receivedCount", displayed_count as "displayedCount", opened_count as "openedCount"`;

const notificationRow = (row: NotificationRow): NotificationRow => ({
  ...row,
  createdAt: asDate(row.createdAt),
  scheduledFor: row.scheduledFor && asDate(row.scheduledFor),
  processingStartedAt: row.processingStartedAt && asDate(row.processingStartedAt),
  completedAt: row.completedAt && asDate(row.completedAt),
});

export async function findNotificationRow(db: Db, applicationId: string, id: string): Promise<NotificationRow | undefined> {
  const [row] = await rows(
    db,
    sql<NotificationRow>`select ${notificationColumns} from notifications where id = ${id} and application_id = ${applicationId}`,
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
  const before = page.before === undefined ? sql`` : sql`and id < ${page.before}`;
  const status = page.status === undefined ? sql`` : sql`and status = ${page.status}`;
  const found = await rows(
    db,
    sql<NotificationRow>`
      select ${notificationColumns} from notifications
       where application_id = ${applicationId} ${before} ${status}
       order by id desc limit ${page.limit}`,
  );
  return found.map(notificationRow);
}

// ---------------------------------------------------------------------------------------------
// Sends: idempotency keys

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
  'id' | 'title' | 'body' | 'imageUrl' | 'actionUrl' | 'localizations' | 'data' | 'options' | 'scheduledFor'
> & { applicationId: string; userIds: string[] };

/**
 * Stores a queued notification, and with an Idempotency-Key claims the key for it in the same
 * statement: undefined, with nothing written, when an unexpired claim of the key exists. A
 * concurrent claim of the same key blocks on the unique index until the first transaction ends,
 * so simultaneous retries create exactly one notification. An expired claim is taken over.
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
  const [stored] = await rows(
    db,
    sql<NotificationRow>`
      with claimed as (${claimed})
      insert into notifications
        (id, application_id, status, title, body, image_url, action_url, localizations, data, options, user_ids, created_at, scheduled_for)
      select ${n.id}, ${n.applicationId}, 'queued', ${n.title}, ${n.body}, ${n.imageUrl}, ${n.actionUrl},
             ${n.localizations === null ? null : JSON.stringify(n.localizations)}::jsonb, ${JSON.stringify(n.data)}::jsonb,
             ${JSON.stringify(n.options)}::jsonb, ${arrayLiteral(n.userIds)}::text[], now(), ${n.scheduledFor}::timestamptz
       where exists (select from claimed)
      returning ${notificationColumns}`,
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

/**
 * Keys past the window no longer protect anything; claiming one takes it over anyway. At most
 * `limit` of them (retention deletes in short batches). The outer `created_at` condition is checked
 * again on a key a concurrent send has just taken over (which renews it): that one stays.
 */
export async function deleteExpiredKeys(db: Db, windowHours: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from idempotency_keys
         where id in (select id from idempotency_keys where created_at < now() - make_interval(hours => ${windowHours}) limit ${limit})
           and created_at < now() - make_interval(hours => ${windowHours})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

// ---------------------------------------------------------------------------------------------
// Events

export type EventRow = {
  eventId: string;
  deliveryId: string;
  installationId: string;
  type: components['schemas']['EventType'];
  occurredAt: Date;
  receivedAt: Date;
};

const eventColumns = sql`event_id as "eventId", delivery_id as "deliveryId", client_installation_id as "installationId",
                         type, occurred_at as "occurredAt", received_at as "receivedAt"`;

const eventRow = (row: EventRow): EventRow => ({ ...row, occurredAt: asDate(row.occurredAt), receivedAt: asDate(row.receivedAt) });

/** The delivery columns holding the first time an event kind was reported, and the counter it moves. */
export type FirstSeen = {
  column: 'received_at' | 'displayed_at' | 'opened_at' | 'dismissed_at';
  counter: 'received_count' | 'displayed_count' | 'opened_count' | null;
};

export type ReportedEvent =
  | { delivery: 'unknown' }
  | { delivery: 'skipped'; reason: string | null }
  | { delivery: 'sent'; inserted: EventRow | undefined; notificationId: string; userId: string | null };

/**
 * An event on a delivery, in one statement: the delivery it names (only if it went to that
 * installation of that application, locked so that concurrent reports of one kind count it once),
 * the event unless its event_id exists (a concurrent report of the same id waits for the first to
 * commit), the first time of its kind on the delivery (least() ignores nulls: the earliest report
 * is kept), the notification's counter when it is the first of its kind, and the installation's
 * last_seen_at. Nothing is written for a delivery that was skipped: it was never pushed.
 */
export async function reportEvent(
  db: Db,
  applicationId: string,
  event: Omit<EventRow, 'receivedAt'>,
  firstSeen: FirstSeen,
): Promise<ReportedEvent> {
  const column = sql.ref(firstSeen.column);
  const counted = firstSeen.counter === null
    ? sql``
    : sql`, counted as (
        update notifications n set ${sql.ref(firstSeen.counter)} = n.${sql.ref(firstSeen.counter)} + 1
          from target, inserted where n.id = target.notification_id and target.first
      )`;
  const [found] = await rows(
    db,
    sql<{ state: string; reason: string | null; notificationId: string; userId: string | null } & Partial<EventRow>>`
      with target as (
        select id, notification_id, installation_id, user_id, state, reason, ${column} is null as first from deliveries
         where id = ${event.deliveryId} and application_id = ${applicationId} and client_installation_id = ${event.installationId}
           for update
      ), inserted as (
        insert into delivery_events
          (id, application_id, event_id, delivery_id, client_installation_id, type, occurred_at, received_at)
        select gen_random_uuid(), ${applicationId}, ${event.eventId}, target.id, ${event.installationId}, ${event.type},
               ${event.occurredAt}, now()
          from target where target.state <> 'skipped'
        on conflict (application_id, event_id) do nothing
        returning ${eventColumns}
      ), seen as (
        update deliveries d set ${column} = least(d.${column}, ${event.occurredAt})
          from target, inserted where d.id = target.id
      ), touched as (
        update installations i set last_seen_at = now() from target, inserted where i.id = target.installation_id
      )${counted}
      select target.state, target.reason, target.notification_id as "notificationId", target.user_id as "userId", inserted.*
        from target left join inserted on true`,
  );
  if (!found) return { delivery: 'unknown' };
  if (found.state === 'skipped') return { delivery: 'skipped', reason: found.reason };
  const { state: _state, reason: _reason, notificationId, userId, ...inserted } = found;
  return { delivery: 'sent', inserted: inserted.eventId === null ? undefined : eventRow(inserted as EventRow), notificationId, userId };
}

export async function findEvent(db: Db, applicationId: string, eventId: string): Promise<EventRow> {
  const [found] = await rows(
    db,
    sql<EventRow>`select ${eventColumns} from delivery_events where application_id = ${applicationId} and event_id = ${eventId}`,
  );
  return eventRow(found);
}

// ---------------------------------------------------------------------------------------------
// Tokens

export type TokenRow = {
  tokenId: string;
  applicationId: string;
  secretHash: string;
  abilities: string[];
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  sendQuota: number | null;
  sendWindowSeconds: number | null;
};

/** A token by its public id, with what a request needs of its application (the send policy). */
export async function findToken(db: Db, publicId: string): Promise<TokenRow | undefined> {
  const [found] = await rows(
    db,
    sql<TokenRow>`
      select t.id as "tokenId", t.application_id as "applicationId", t.secret_hash as "secretHash", t.abilities,
             t.revoked_at as "revokedAt", t.last_used_at as "lastUsedAt",
             a.send_quota as "sendQuota", a.send_window_seconds as "sendWindowSeconds"
        from api_tokens t join applications a on a.id = t.application_id
       where t.public_id = ${publicId}`,
  );
  return found && { ...found, revokedAt: found.revokedAt && asDate(found.revokedAt), lastUsedAt: found.lastUsedAt && asDate(found.lastUsedAt) };
}

export type CredentialHealthRow = {
  provider: 'apns' | 'fcm';
  updatedAt: Date;
  unhealthySince: Date | null;
  lastError: string | null;
  unreachableSince: Date | null;
};

export type ApplicationOverviewRow = {
  id: string;
  name: string;
  createdAt: Date;
  sendQuota: number | null;
  sendWindowSeconds: number | null;
  tokenName: string;
  abilities: string[];
  credentials: CredentialHealthRow[];
};

/**
 * An application as one of its tokens sees it: the token's name and abilities, the application's
 * own send policy (null parts: the service default), and its credentials' health, never their
 * secrets. Undefined when the token is not the application's.
 */
export async function findApplicationOverview(db: Db, applicationId: string, tokenId: string): Promise<ApplicationOverviewRow | undefined> {
  const [found] = await rows(
    db,
    sql<Omit<ApplicationOverviewRow, 'credentials'> & { credentials: Record<keyof CredentialHealthRow, string | null>[] }>`
      select a.id, a.name, a.created_at as "createdAt", a.send_quota as "sendQuota", a.send_window_seconds as "sendWindowSeconds",
             t.name as "tokenName", t.abilities,
             coalesce((select json_agg(json_build_object(
                                'provider', c.provider, 'updatedAt', c.updated_at, 'unhealthySince', c.unhealthy_since,
                                'lastError', c.last_error, 'unreachableSince', c.unreachable_since))
                         from provider_credentials c where c.application_id = a.id), '[]'::json) as credentials
        from applications a join api_tokens t on t.application_id = a.id
       where a.id = ${applicationId} and t.id = ${tokenId}`,
  );
  if (!found) return undefined;
  // json_build_object gives timestamps as text.
  const credentials = found.credentials.map((c) => ({
    provider: c.provider as CredentialHealthRow['provider'],
    updatedAt: new Date(c.updatedAt!),
    unhealthySince: c.unhealthySince === null ? null : new Date(c.unhealthySince),
    lastError: c.lastError,
    unreachableSince: c.unreachableSince === null ? null : new Date(c.unreachableSince),
  }));
  return { ...found, createdAt: asDate(found.createdAt), credentials };
}

/**
 * A token's last use, to the minute: the condition on the database's clock makes concurrent
 * requests write it once between them.
 */
export async function writeTokenLastUse(db: Db, tokenId: string): Promise<void> {
  await run(
    db,
    sql`
      update api_tokens set last_used_at = now()
       where id = ${tokenId} and (last_used_at is null or last_used_at < now() - interval '1 minute')`,
  );
}

// ---------------------------------------------------------------------------------------------
// Provider credentials

export type SealedRow = { id: string; application_id: string; provider: 'apns' | 'fcm'; secret: string };

/**
 * Blocks writes (and another re-seal) but not reads, until the transaction ends: a credential or a
 * webhook secret stored meanwhile would be sealed with a key the re-seal is moving away from.
 */
export async function lockCredentialsForReseal(db: Db): Promise<void> {
  await run(db, sql`lock table provider_credentials, webhook_endpoints in share row exclusive mode`);
}

/** Stored credentials, or only those still sealed the v1 way; `limit` to ask whether there are any. */
export async function sealedCredentials(db: Db, options: { onlyV1?: boolean; limit?: number } = {}): Promise<SealedRow[]> {
  const where = options.onlyV1 ? sql`where secret like 'v1.%'` : sql``;
  const limit = options.limit === undefined ? sql`` : sql`limit ${options.limit}`;
  return rows(db, sql<SealedRow>`select id, application_id, provider, secret from provider_credentials ${where} order by application_id, provider ${limit}`);
}

// updated_at stays: the credentials did not change, and a running worker's clients (keyed on it) stay valid.
export async function writeSecrets(db: Db, resealed: { id: string; secret: string }[]): Promise<void> {
  if (resealed.length === 0) return;
  await run(
    db,
    sql`
      update provider_credentials set secret = resealed.secret
        from unnest(${arrayLiteral(resealed.map((row) => row.id))}::uuid[], ${arrayLiteral(resealed.map((row) => row.secret))}::text[]) as resealed(id, secret)
       where provider_credentials.id = resealed.id`,
  );
}

export type SealedWebhookSecrets = { id: string; secret: string; previousSecret: string | null };

export async function sealedWebhookSecrets(db: Db): Promise<SealedWebhookSecrets[]> {
  return rows(db, sql<SealedWebhookSecrets>`select id, secret, previous_secret as "previousSecret" from webhook_endpoints order by id`);
}

export async function writeWebhookSecrets(db: Db, resealed: SealedWebhookSecrets[]): Promise<void> {
  if (resealed.length === 0) return;
  await run(
    db,
    sql`
      update webhook_endpoints e set secret = r.secret, previous_secret = r.previous_secret
        from unnest(${arrayLiteral(resealed.map((row) => row.id))}::uuid[], ${arrayLiteral(resealed.map((row) => row.secret))}::text[],
                    ${arrayLiteral(resealed.map((row) => row.previousSecret))}::text[]) as r(id, secret, previous_secret)
       where e.id = r.id`,
  );
}

/** A provider refused our credentials: its deliveries fail, and `credentials show` says why. */
export async function markCredentialUnhealthy(db: Db, credentialId: string, reason: string): Promise<void> {
  await run(db, sql`update provider_credentials set unhealthy_since = coalesce(unhealthy_since, now()), last_error = ${reason} where id = ${credentialId}`);
}

/**
 * A push was accepted: whatever was wrong with the credential or the way to the provider is over.
 * Writes only when something was: a healthy credential's row is not touched by every accepted push.
 */
export async function markCredentialHealthy(db: Db, credentialId: string): Promise<void> {
  await run(
    db,
    sql`
      update provider_credentials set unhealthy_since = null, last_error = null, unreachable_since = null
       where id = ${credentialId} and (unhealthy_since is not null or unreachable_since is not null)`,
  );
}

/** A whole batch failed to reach the provider (refused, timed out, cut): `credentials show` says since when. */
export async function markCredentialUnreachable(db: Db, credentialId: string): Promise<void> {
  await run(db, sql`update provider_credentials set unreachable_since = now() where id = ${credentialId} and unreachable_since is null`);
}

// ---------------------------------------------------------------------------------------------
// Retention

/**
 * The notifications that ended longest ago, before the horizon (at most `reading`), as many as make
 * about a batch of deliveries: a notification has about one delivery per target user's
 * installation, so they are taken until their target users add up to a batch (at least one). The
 * deliveries of one pick then take a few statements, none of which walks back over the index
 * entries of many notifications already emptied. The completed_at index gives them in order.
 */
export async function pickExpired(db: Db, options: { retentionDays: number; batchSize: number; reading: number }): Promise<string[]> {
  const picked = await rows(
    db,
    sql<{ id: string }>`
      select id from (
        select id, sum(cardinality(user_ids)) over (order by completed_at rows unbounded preceding) - cardinality(user_ids) as before
          from notifications
         where completed_at < now() - make_interval(days => ${options.retentionDays})
         order by completed_at
         limit ${options.reading}
      ) picked
      where before < ${options.batchSize}`,
  );
  return picked.map((row) => row.id);
}

/**
 * Up to a batch of these notifications' deliveries, with their events (their foreign key cascades
 * too, but this way they are deleted as a set and counted). The ids are passed on as one array so
 * that both deletes probe their index, whatever the planner guesses of a CTE's size.
 */
export async function deleteDeliveriesOf(db: Db, notificationIds: string[], batchSize: number): Promise<{ deliveries: number; events: number }> {
  const [counts] = await rows(
    db,
    sql<{ deliveries: number; events: number }>`
      with doomed as (
        select array(select id from deliveries where notification_id = any(${arrayLiteral(notificationIds)}::uuid[]) limit ${batchSize}) as ids
      ), events as (
        delete from delivery_events where delivery_id = any((select ids from doomed)::uuid[]) returning 1
      ), gone as (
        delete from deliveries where id = any((select ids from doomed)::uuid[]) returning 1
      )
      select (select count(*) from gone)::int as deliveries, (select count(*) from events)::int as events`,
  );
  return counts;
}

/**
 * The notifications themselves and any key still naming one. Only those with no delivery left
 * (the budget ran out before all were deleted): deliveries have no foreign key to cascade through,
 * and a notification is never deleted before them.
 */
export async function deleteNotifications(db: Db, notificationIds: string[]): Promise<{ notifications: number; idempotencyKeys: number }> {
  const [counts] = await rows(
    db,
    sql<{ notifications: number; idempotencyKeys: number }>`
      with doomed as (
        select n.id from notifications n
         where n.id = any(${arrayLiteral(notificationIds)}::uuid[])
           and not exists (select 1 from deliveries d where d.notification_id = n.id)
      ), keys as (
        delete from idempotency_keys k using doomed where k.notification_id = doomed.id returning 1
      ), gone as (
        delete from notifications n using doomed where n.id = doomed.id returning 1
      )
      select (select count(*) from gone)::int as notifications, (select count(*) from keys)::int as "idempotencyKeys"`,
  );
  return counts;
}

// ---------------------------------------------------------------------------------------------
// Webhooks

/** The event types the application's enabled endpoints take (the outbox keeps it a few seconds). */
export async function webhookSubscriptions(db: Db, applicationId: string): Promise<string[]> {
  const found = await rows(
    db,
    sql<{ type: string }>`select distinct unnest(events) as type from webhook_endpoints where application_id = ${applicationId} and disabled_at is null`,
  );
  return found.map((row) => row.type);
}

export type NewWebhookEvent = { id: string; type: components['schemas']['WebhookEventType']; data: object; createdAt: Date };
export type QueuedWebhookDeliveries = { endpointId: string; deliveryIds: string[] };

/**
 * The outbox, in one statement: each event an enabled endpoint of the application takes, with one
 * pending delivery per such endpoint, as the endpoints are at this moment (one removed or disabled
 * since the subscriptions were cached gets nothing; an event nobody takes is not stored). It runs in
 * the transaction of the change the events report. Returns the new deliveries, by endpoint.
 */
export async function insertWebhookEvents(db: Db, applicationId: string, events: NewWebhookEvent[]): Promise<QueuedWebhookDeliveries[]> {
  if (events.length === 0) return [];
  return rows(
    db,
    sql<QueuedWebhookDeliveries>`
      with given as (
        select * from unnest(${arrayLiteral(events.map((e) => e.id))}::uuid[], ${arrayLiteral(events.map((e) => e.type))}::text[],
                             ${arrayLiteral(events.map((e) => JSON.stringify(e.data)))}::jsonb[], ${arrayLiteral(events.map((e) => e.createdAt.toISOString()))}::timestamptz[])
          as e(id, type, data, created_at)
      ), targets as (
        select given.id as event_id, endpoint.id as endpoint_id
          from given join webhook_endpoints endpoint
            on endpoint.application_id = ${applicationId} and endpoint.disabled_at is null and given.type = any(endpoint.events)
      ), stored as (
        insert into webhook_events (id, application_id, type, data, created_at)
        select id, ${applicationId}, type, data, created_at from given where id in (select event_id from targets)
      ), queued as (
        insert into webhook_deliveries (id, application_id, endpoint_id, event_id, state, attempts, created_at)
        select gen_random_uuid(), ${applicationId}, endpoint_id, event_id, 'pending', 0, now() from targets
        returning id, endpoint_id
      )
      select endpoint_id as "endpointId", array_agg(id)::text[] as "deliveryIds" from queued group by endpoint_id`,
  );
}

export type WebhookTarget = {
  id: string;
  url: string;
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: Date | null;
  disabledAt: Date | null;
};

export type ClaimedWebhookDelivery = {
  deliveryId: string;
  /** Attempts made before this one. */
  attempts: number;
  eventId: string;
  type: NewWebhookEvent['type'];
  data: object;
  createdAt: Date;
};

/** The endpoint a webhook job sends to (undefined once removed: its deliveries went with it). */
export async function findWebhookTarget(db: Db, endpointId: string): Promise<WebhookTarget | undefined> {
  const [found] = await rows(
    db,
    sql<WebhookTarget>`
      select id, url, secret, previous_secret as "previousSecret", previous_secret_expires_at as "previousSecretExpiresAt",
             disabled_at as "disabledAt"
        from webhook_endpoints where id = ${endpointId}`,
  );
  return (
    found && {
      ...found,
      previousSecretExpiresAt: found.previousSecretExpiresAt && asDate(found.previousSecretExpiresAt),
      disabledAt: found.disabledAt && asDate(found.disabledAt),
    }
  );
}

/** A job's deliveries still pending, with their events, oldest event first. */
export async function pendingWebhookDeliveries(db: Db, endpointId: string, deliveryIds: string[]): Promise<ClaimedWebhookDelivery[]> {
  const found = await rows(
    db,
    sql<ClaimedWebhookDelivery>`
      select d.id as "deliveryId", d.attempts, e.id as "eventId", e.type, e.data, e.created_at as "createdAt"
        from webhook_deliveries d join webhook_events e on e.id = d.event_id
       where d.id = any(${arrayLiteral(deliveryIds)}::uuid[]) and d.endpoint_id = ${endpointId} and d.state = 'pending'
       order by e.id`,
  );
  return found.map((row) => ({ ...row, createdAt: asDate(row.createdAt) }));
}

export type WebhookAttemptResult = {
  deliveryId: string;
  state: 'pending' | 'succeeded' | 'failed';
  reason: string | null;
  statusCode: number | null;
  error: string | null;
  responseExcerpt: string | null;
  attemptedAt: Date;
  nextAttemptAt: Date | null;
};

/**
 * A round of attempts to one endpoint, in one statement: each delivery's attempt (only one still
 * pending moves), and the endpoint's health. A success ends its failing streak; a round with none
 * starts one (`failing_since`) or, once the streak is `windowSeconds` old, disables the endpoint with
 * `disabledReason`. Returns whether the endpoint is disabled now.
 */
export async function recordWebhookAttempts(
  db: Db,
  endpointId: string,
  round: { results: WebhookAttemptResult[]; lastAttempt: WebhookAttempt; windowSeconds: number; disabledReason: string },
): Promise<{ disabled: boolean }> {
  const { results } = round;
  const succeeded = results.some((result) => result.state === 'succeeded');
  const firstAttemptAt = new Date(Math.min(...results.map((result) => result.attemptedAt.getTime())));
  const [endpoint] = await rows(
    db,
    sql<{ disabled: boolean }>`
      with recorded as (
        update webhook_deliveries d
           set state = r.state, reason = r.reason, attempts = d.attempts + 1, status_code = r.status_code, error = r.error,
               response_excerpt = r.response_excerpt, last_attempt_at = r.attempted_at, next_attempt_at = r.next_attempt_at,
               completed_at = case when r.state = 'pending' then null else now() end
          from unnest(${arrayLiteral(results.map((r) => r.deliveryId))}::uuid[], ${arrayLiteral(results.map((r) => r.state))}::text[],
                      ${arrayLiteral(results.map((r) => r.reason))}::text[], ${arrayLiteral(results.map((r) => r.statusCode))}::int[],
                      ${arrayLiteral(results.map((r) => r.error))}::text[], ${arrayLiteral(results.map((r) => r.responseExcerpt))}::text[],
                      ${arrayLiteral(results.map((r) => r.attemptedAt.toISOString()))}::timestamptz[],
                      ${arrayLiteral(results.map((r) => r.nextAttemptAt?.toISOString() ?? null))}::timestamptz[])
            as r(id, state, reason, status_code, error, response_excerpt, attempted_at, next_attempt_at)
         where d.id = r.id and d.state = 'pending'
      ), streak as (
        select e.id, case when ${succeeded}::boolean then null else coalesce(e.failing_since, ${firstAttemptAt}) end as failing_since
          from webhook_endpoints e where e.id = ${endpointId}
      )
      update webhook_endpoints e
         set last_attempt = ${JSON.stringify(round.lastAttempt)}::jsonb,
             failing_since = streak.failing_since,
             disabled_reason = case when e.disabled_at is null and streak.failing_since <= now() - make_interval(secs => ${round.windowSeconds})
                                    then ${round.disabledReason} else e.disabled_reason end,
             disabled_at = case when e.disabled_at is null and streak.failing_since <= now() - make_interval(secs => ${round.windowSeconds})
                                then now() else e.disabled_at end
        from streak
       where e.id = streak.id
      returning e.disabled_at is not null as disabled`,
  );
  return { disabled: endpoint?.disabled ?? true };
}

/** Gives up deliveries still pending: failed, with the reason (`endpoint_disabled`, `internal_error`). */
export async function endWebhookDeliveries(db: Db, deliveryIds: string[], reason: string): Promise<void> {
  if (deliveryIds.length === 0) return;
  await run(
    db,
    sql`
      update webhook_deliveries set state = 'failed', reason = ${reason}, next_attempt_at = null, completed_at = now()
       where id = any(${arrayLiteral(deliveryIds)}::uuid[]) and state = 'pending'`,
  );
}

export type WebhookDeliveryRow = {
  id: string;
  eventId: string;
  eventType: NewWebhookEvent['type'];
  state: components['schemas']['WebhookDeliveryState'];
  reason: string | null;
  attempts: number;
  statusCode: number | null;
  error: string | null;
  responseExcerpt: string | null;
  createdAt: Date;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  completedAt: Date | null;
};

/** An endpoint's delivery log, newest event first (event ids are UUIDv7), after the cursor's event. */
export async function webhookDeliveryRows(
  db: Db,
  endpointId: string,
  page: { limit: number; before?: string; state?: WebhookDeliveryRow['state'] },
): Promise<WebhookDeliveryRow[]> {
  const before = page.before === undefined ? sql`` : sql`and d.event_id < ${page.before}`;
  const state = page.state === undefined ? sql`` : sql`and d.state = ${page.state}`;
  const found = await rows(
    db,
    sql<WebhookDeliveryRow>`
      select d.id, d.event_id as "eventId", e.type as "eventType", d.state, d.reason, d.attempts, d.status_code as "statusCode",
             d.error, d.response_excerpt as "responseExcerpt", d.created_at as "createdAt", d.last_attempt_at as "lastAttemptAt",
             d.next_attempt_at as "nextAttemptAt", d.completed_at as "completedAt"
        from webhook_deliveries d join webhook_events e on e.id = d.event_id
       where d.endpoint_id = ${endpointId} ${before} ${state}
       order by d.event_id desc limit ${page.limit}`,
  );
  return found.map((row) => ({
    ...row,
    createdAt: asDate(row.createdAt),
    lastAttemptAt: row.lastAttemptAt && asDate(row.lastAttemptAt),
    nextAttemptAt: row.nextAttemptAt && asDate(row.nextAttemptAt),
    completedAt: row.completedAt && asDate(row.completedAt),
  }));
}

/**
 * Retention: up to `limit` finished webhook deliveries of events created before the horizon. A
 * delivery still pending stays (a retry window longer than the retention), and so does its event.
 */
export async function deleteExpiredWebhookDeliveries(db: Db, retentionDays: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from webhook_deliveries where id in (
          select d.id from webhook_events e join webhook_deliveries d on d.event_id = e.id
           where e.created_at < now() - make_interval(days => ${retentionDays}) and d.state <> 'pending'
           order by e.created_at limit ${limit})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

/** Retention, after the deliveries: up to `limit` webhook events created before the horizon that have none left. */
export async function deleteExpiredWebhookEvents(db: Db, retentionDays: number, limit: number): Promise<number> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      with gone as (
        delete from webhook_events where id in (
          select e.id from webhook_events e
           where e.created_at < now() - make_interval(days => ${retentionDays})
             and not exists (select 1 from webhook_deliveries d where d.event_id = e.id)
           order by e.created_at limit ${limit})
        returning 1
      )
      select count(*)::int as count from gone`,
  );
  return count;
}

// ---------------------------------------------------------------------------------------------
// Job leases (worker/leases.ts)

/** Session-level: held as long as the holder's dedicated connection lives. */
export const takeHolderLock = (namespace: number, holder: number) => sql`select pg_advisory_lock(${namespace}, ${holder})`;

/** Leases a worker's fetch (one job, or a batch of scheduled fanouts) in one statement. */
export async function takeLeases(db: Db, lease: { jobIds: string[]; queueSchema: string; queue: string; holder: number }): Promise<void> {
  await run(
    db,
    sql`
      insert into job_leases (job_id, queue_schema, queue, holder)
      select job_id, ${lease.queueSchema}, ${lease.queue}, ${lease.holder} from unnest(${arrayLiteral(lease.jobIds)}::uuid[]) as job_id
      on conflict (job_id) do update set holder = excluded.holder, taken_at = now()`,
  );
}

export async function releaseLeases(db: Db, jobIds: string[], holder: number): Promise<void> {
  await run(db, sql`delete from job_leases where job_id = any(${arrayLiteral(jobIds)}::uuid[]) and holder = ${holder}`);
}

/** Holders with leases whose advisory lock nobody holds: their process is gone (or reconnecting). */
export async function holdersWithoutLock(db: Db, namespace: number, queueSchema: string): Promise<number[]> {
  const found = await rows(
    db,
    sql<{ holder: number }>`
      select distinct holder from job_leases
       where queue_schema = ${queueSchema}
         and holder not in (select objid::bigint from pg_locks
                             where locktype = 'advisory' and classid = ${namespace} and objsubid = 2 and granted)`,
  );
  return found.map((row) => Number(row.holder));
}

export type TakenLease = { job_id: string; queue: string };

/** Deletes a holder's leases (all of them, or those on jobs other than `except`) and returns them. */
export async function dropLeases(db: Db, queueSchema: string, holder: number, except?: string[]): Promise<TakenLease[]> {
  const exceptThese = except === undefined ? sql`` : sql`and job_id <> all(${arrayLiteral(except)}::uuid[])`;
  return rows(
    db,
    sql<TakenLease>`delete from job_leases where queue_schema = ${queueSchema} and holder = ${holder} ${exceptThese} returning job_id, queue`,
  );
}

// Every hand-written statement of Herald, in one style: a Kysely `sql` template with its values
// bound as parameters, beside the comment that explains its trade-off (pg-boss keeps its plans
// the same way). Everything else goes through the ORM. The hot paths are set-based (unnest of
// arrays): one round trip per batch, never one per push.
//
// A statement runs on a unit of work (an EntityManager, inside its transaction if it has one), on
// a Kysely of its own pool (the leases), or, compiled with `compiled()`, on a dedicated session
// (advisory locks, which live as long as their connection).
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
import type { Truncation } from './entities.ts';

export type Db = EntityManager | QueryExecutorProvider;

const executor = (db: Db): QueryExecutorProvider => ('getKysely' in db ? db.getKysely() : db);

async function rows<T>(db: Db, statement: RawBuilder<T>): Promise<T[]> {
  return (await statement.execute(executor(db))).rows;
}

async function run(db: Db, statement: RawBuilder<unknown>): Promise<void> {
  await statement.execute(executor(db));
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
 * A Kysely on a pool of its own (a service beside the ORM's, a benchmark). A connection the
 * database cuts emits 'error': on an idle one the pool's listener takes it, but one Kysely has
 * checked out between two statements has none, and an unheard 'error' ends the process. Every
 * connection gets a listener; the failure still reaches the statement that uses the connection.
 */
export function openStatementPool(url: string, max: number): { db: Kysely<unknown>; close(): Promise<void> } {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
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
};

/** Active installations of the target users: one query over (application_id, user_id). */
export async function targetInstallations(db: Db, applicationId: string, userIds: string[]): Promise<Candidate[]> {
  const found = await rows(
    db,
    sql<Candidate>`
      select id as "rowId", installation_id as "installationId", user_id as "userId", platform,
             provider_identifier as "providerIdentifier", permission, last_seen_at as "lastSeenAt"
        from installations
       where application_id = ${applicationId} and user_id = any(${userIds}::text[]) and status = 'active'`,
  );
  return found.map((row) => ({ ...row, lastSeenAt: asDate(row.lastSeenAt) }));
}

export type NewDelivery = Candidate & {
  deliveryId: string;
  state: 'pending' | 'skipped';
  reason: string | null;
  truncation: Truncation | null;
};

/** Unique per (notification, installation): a re-run of the fanout inserts nothing twice. */
export async function insertDeliveries(db: Db, applicationId: string, notificationId: string, deliveries: NewDelivery[]): Promise<void> {
  if (deliveries.length === 0) return;
  const column = <K extends keyof NewDelivery>(key: K) => deliveries.map((d) => d[key]);
  const truncations = deliveries.map((d) => (d.truncation === null ? null : JSON.stringify(d.truncation)));
  await run(
    db,
    sql`
      insert into deliveries
        (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform,
         state, reason, truncation, attempts, created_at, completed_at)
      select d.id, ${applicationId}, ${notificationId}, d.installation_id, d.client_installation_id, d.user_id,
             d.platform, d.state, d.reason, d.truncation, 0, now(), case when d.state = 'skipped' then now() end
        from unnest(${column('deliveryId')}::uuid[], ${column('rowId')}::uuid[], ${column('installationId')}::text[],
                    ${column('userId')}::text[], ${column('platform')}::text[], ${column('state')}::text[],
                    ${column('reason')}::text[], ${truncations}::jsonb[])
          as d(id, installation_id, client_installation_id, user_id, platform, state, reason, truncation)
      on conflict (notification_id, installation_id) do nothing`,
  );
}

export type ClaimedDelivery = {
  deliveryId: string;
  /** Null when the installation was deleted since the fanout. */
  installationRowId: string | null;
  providerIdentifier: string | null;
  installationStatus: string | null;
  attempts: number;
};

/**
 * Takes the batch's still-pending deliveries for an attempt (counting it before the push goes
 * out, so that a crash loop still ends), with each installation's current identifier.
 */
export async function claimPending(db: Db, deliveryIds: string[]): Promise<ClaimedDelivery[]> {
  return rows(
    db,
    sql<ClaimedDelivery>`
      with claimed as (
        update deliveries set attempts = attempts + 1, last_attempt_at = now()
         where id = any(${deliveryIds}::uuid[]) and state = 'pending'
        returning id, installation_id, attempts
      )
      select c.id as "deliveryId", c.installation_id as "installationRowId", i.provider_identifier as "providerIdentifier",
             i.status as "installationStatus", c.attempts
        from claimed c left join installations i on i.id = c.installation_id`,
  );
}

export type DeliveryResult = {
  deliveryId: string;
  state: 'accepted' | 'failed' | 'skipped' | 'pending';
  reason: string | null;
  providerMessageId: string | null;
};

/**
 * Records a batch's outcomes in one statement; pending ones stay pending for their retry. A
 * delivery skipped at send time (installation deleted...) pushed nothing, so nothing was cut.
 */
export async function recordResults(db: Db, results: DeliveryResult[]): Promise<void> {
  if (results.length === 0) return;
  await run(
    db,
    sql`
      update deliveries d
         set state = r.state, reason = r.reason, provider_message_id = r.provider_message_id,
             completed_at = case when r.state <> 'pending' then now() end,
             truncation = case when r.state = 'skipped' then null else d.truncation end
        from unnest(${results.map((r) => r.deliveryId)}::uuid[], ${results.map((r) => r.state)}::text[],
                    ${results.map((r) => r.reason)}::text[], ${results.map((r) => r.providerMessageId)}::text[])
          as r(id, state, reason, provider_message_id)
       where d.id = r.id and d.state = 'pending'`,
  );
}

export type Invalidation = { installationRowId: string; providerIdentifier: string; reason: string; providerTimestamp: Date | null };

/**
 * Invalidates installations whose identifier the provider declared dead, unless the device has
 * registered a new one since: the identifier must still be the one we sent to, and the last line
 * is `not isStaleInvalidation(provider_timestamp, identifier_updated_at)` (domain/installations.ts,
 * the stale-410 rule and its tests) as a set-based condition.
 */
export async function invalidateInstallations(db: Db, invalidations: Invalidation[]): Promise<void> {
  if (invalidations.length === 0) return;
  await run(
    db,
    sql`
      update installations i
         set status = 'invalid', invalidated_at = now(), invalid_reason = v.reason
        from unnest(${invalidations.map((v) => v.installationRowId)}::uuid[],
                    ${invalidations.map((v) => v.providerIdentifier)}::text[],
                    ${invalidations.map((v) => v.reason)}::text[],
                    ${invalidations.map((v) => v.providerTimestamp?.toISOString() ?? null)}::timestamptz[])
          as v(id, provider_identifier, reason, provider_timestamp)
       where i.id = v.id and i.status = 'active' and i.provider_identifier = v.provider_identifier
         and (v.provider_timestamp is null or v.provider_timestamp >= i.identifier_updated_at)`,
  );
}

/** Moves a notification to `processing` once; false when a previous run already did. */
export async function startProcessing(db: Db, notificationId: string): Promise<boolean> {
  const moved = await rows(
    db,
    sql`
      update notifications set status = 'processing', processing_started_at = now()
       where id = ${notificationId} and status = 'queued'
      returning id`,
  );
  return moved.length > 0;
}

/** Sets the final status and completed_at exactly once (the first caller wins). */
export async function completeNotification(db: Db, notificationId: string, status: string): Promise<boolean> {
  const moved = await rows(
    db,
    sql`
      update notifications set status = ${status}, completed_at = now()
       where id = ${notificationId} and completed_at is null
      returning id`,
  );
  return moved.length > 0;
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
 * A notification's deliveries counted by state and by first event: the statistics, whether it is
 * finished, and what tests and benchmarks check. Counted from the rows, never kept as separate
 * counters, so retries and concurrent events cannot make them drift; an event kind counts once
 * per delivery (its first time is stored). Notifications without deliveries are absent.
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
       where notification_id = any(${notificationIds}::uuid[])
       group by notification_id`,
  );
}

// ---------------------------------------------------------------------------------------------
// Sends: idempotency keys

export type KeyClaim = { applicationId: string; key: string; hash: string };
type KeyRow = { requestHash: string; notificationId: string };

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

/**
 * Claims the key for a new notification; false when an unexpired claim exists. A concurrent claim
 * of the same key blocks on the unique index until the first transaction ends, so simultaneous
 * retries create exactly one notification. An expired claim is taken over.
 */
export async function claimKey(db: Db, claim: KeyClaim & { id: string; notificationId: string }, windowHours: number): Promise<boolean> {
  const claimed = await rows(
    db,
    sql`
      insert into idempotency_keys (id, application_id, key, request_hash, notification_id, created_at)
      values (${claim.id}, ${claim.applicationId}, ${claim.key}, ${claim.hash}, ${claim.notificationId}, now())
      on conflict (application_id, key) do update
        set request_hash = excluded.request_hash, notification_id = excluded.notification_id, created_at = now()
        where idempotency_keys.created_at < now() - make_interval(hours => ${windowHours})
      returning notification_id`,
  );
  return claimed.length > 0;
}

/** The claim that won, read after claimKey found one. */
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

export type DeliveryForEvent = { installationRowId: string | null; state: string; reason: string | null };

/** The delivery an event names, only if it went to that installation of that application. */
export async function findDeliveryForEvent(
  db: Db,
  target: { applicationId: string; deliveryId: string; installationId: string },
): Promise<DeliveryForEvent | undefined> {
  const [found] = await rows(
    db,
    sql<DeliveryForEvent>`
      select installation_id as "installationRowId", state, reason from deliveries
       where id = ${target.deliveryId} and application_id = ${target.applicationId}
         and client_installation_id = ${target.installationId}`,
  );
  return found;
}

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

/** The new event, or nothing when its event_id exists (a concurrent report waits for the first to commit). */
export async function insertEvent(db: Db, applicationId: string, event: Omit<EventRow, 'receivedAt'>): Promise<EventRow | undefined> {
  const [inserted] = await rows(
    db,
    sql<EventRow>`
      insert into delivery_events
        (id, application_id, event_id, delivery_id, client_installation_id, type, occurred_at, received_at)
      values (gen_random_uuid(), ${applicationId}, ${event.eventId}, ${event.deliveryId}, ${event.installationId},
              ${event.type}, ${event.occurredAt}, now())
      on conflict (application_id, event_id) do nothing
      returning ${eventColumns}`,
  );
  return inserted && eventRow(inserted);
}

export async function findEvent(db: Db, applicationId: string, eventId: string): Promise<EventRow> {
  const [found] = await rows(
    db,
    sql<EventRow>`select ${eventColumns} from delivery_events where application_id = ${applicationId} and event_id = ${eventId}`,
  );
  return eventRow(found);
}

/** The delivery column holding the first time an event kind was reported. */
export type FirstSeenColumn = 'received_at' | 'displayed_at' | 'opened_at' | 'dismissed_at';

/** least() ignores nulls: the earliest report of a kind is kept. */
export async function recordFirstSeen(db: Db, deliveryId: string, column: FirstSeenColumn, at: Date): Promise<void> {
  await run(db, sql`update deliveries set ${sql.ref(column)} = least(${sql.ref(column)}, ${at}) where id = ${deliveryId}`);
}

export async function touchInstallation(db: Db, installationRowId: string): Promise<void> {
  await run(db, sql`update installations set last_seen_at = now() where id = ${installationRowId}`);
}

// ---------------------------------------------------------------------------------------------
// Tokens

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
 * Blocks writes (and another re-seal) but not reads, until the transaction ends: a credential
 * stored meanwhile would be sealed with a key the re-seal is moving away from.
 */
export async function lockCredentialsForReseal(db: Db): Promise<void> {
  await run(db, sql`lock table provider_credentials in share row exclusive mode`);
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
        from unnest(${resealed.map((row) => row.id)}::uuid[], ${resealed.map((row) => row.secret)}::text[]) as resealed(id, secret)
       where provider_credentials.id = resealed.id`,
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
 * The oldest finished notifications past the horizon (at most `reading`), as many as make about a
 * batch of deliveries: a notification has about one delivery per target user's installation, so
 * they are taken until their target users add up to a batch (at least one). The deliveries of one
 * pick then take a few statements, none of which walks back over the index entries of many
 * notifications already emptied. The created_at index gives them in order.
 */
export async function pickExpired(
  db: Db,
  options: { retentionDays: number; finishedStatuses: readonly string[]; batchSize: number; reading: number },
): Promise<string[]> {
  const picked = await rows(
    db,
    sql<{ id: string }>`
      select id from (
        select id, sum(cardinality(user_ids)) over (order by created_at rows unbounded preceding) - cardinality(user_ids) as before
          from notifications
         where created_at < now() - make_interval(days => ${options.retentionDays})
           and status in (${sql.join(options.finishedStatuses)})
         order by created_at
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
        select array(select id from deliveries where notification_id = any(${notificationIds}::uuid[]) limit ${batchSize}) as ids
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
 * The notifications themselves and any key still naming one. Only those with no delivery left: a
 * notification that still has some (the budget ran out) would take them all with it in one
 * statement through the cascade.
 */
export async function deleteNotifications(db: Db, notificationIds: string[]): Promise<{ notifications: number; idempotencyKeys: number }> {
  const [counts] = await rows(
    db,
    sql<{ notifications: number; idempotencyKeys: number }>`
      with doomed as (
        select n.id from notifications n
         where n.id = any(${notificationIds}::uuid[])
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
// Job leases (worker/leases.ts)

/** Session-level: held as long as the holder's dedicated connection lives. */
export const takeHolderLock = (namespace: number, holder: number) => sql`select pg_advisory_lock(${namespace}, ${holder})`;

export async function takeLease(db: Db, lease: { jobId: string; queueSchema: string; queue: string; holder: number }): Promise<void> {
  await run(
    db,
    sql`
      insert into job_leases (job_id, queue_schema, queue, holder) values (${lease.jobId}, ${lease.queueSchema}, ${lease.queue}, ${lease.holder})
      on conflict (job_id) do update set holder = excluded.holder, taken_at = now()`,
  );
}

export async function releaseLease(db: Db, jobId: string, holder: number): Promise<void> {
  await run(db, sql`delete from job_leases where job_id = ${jobId} and holder = ${holder}`);
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
  const exceptThese = except === undefined ? sql`` : sql`and job_id <> all(${except}::uuid[])`;
  return rows(
    db,
    sql<TakenLease>`delete from job_leases where queue_schema = ${queueSchema} and holder = ${holder} ${exceptThese} returning job_id, queue`,
  );
}

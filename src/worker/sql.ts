// The fanout's hot-path SQL, together so that it can be read, indexed and measured as a set.
// Every statement is set-based (unnest of arrays): one round trip per batch, never one per push.
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from 'kysely';
import type { Candidate, Classified } from '../domain/fanout.ts';
import type { Truncation } from '../db/entities.ts';

type Db = ReturnType<EntityManager['getKysely']>;
const db = (em: EntityManager): Db => em.getKysely();

/** Active installations of the target users: one query over (application_id, user_id). */
export async function targetInstallations(em: EntityManager, applicationId: string, userIds: string[]): Promise<Candidate[]> {
  const { rows } = await sql<Candidate>`
    select id, installation_id as "installationId", user_id as "userId", platform,
           provider_identifier as "providerIdentifier", permission, last_seen_at as "lastSeenAt"
      from installations
     where application_id = ${applicationId} and user_id = any(${userIds}::text[]) and status = 'active'
  `.execute(db(em));
  // Raw queries return timestamps as strings (the ORM's type parsers are off for them).
  return rows.map((row) => ({ ...row, lastSeenAt: new Date(row.lastSeenAt) }));
}

export type NewDelivery = Classified & { deliveryId: string; truncation: Truncation | null };

/** Unique per (notification, installation): a re-run of the fanout inserts nothing twice. */
export async function insertDeliveries(
  em: EntityManager,
  applicationId: string,
  notificationId: string,
  deliveries: NewDelivery[],
): Promise<void> {
  if (deliveries.length === 0) return;
  const column = <K extends keyof NewDelivery>(key: K) => deliveries.map((d) => d[key]);
  const truncations = deliveries.map((d) => (d.truncation === null ? null : JSON.stringify(d.truncation)));
  await sql`
    insert into deliveries
      (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform,
       state, reason, truncation, attempts, created_at, completed_at)
    select d.id, ${applicationId}, ${notificationId}, d.installation_id, d.client_installation_id, d.user_id,
           d.platform, d.state, d.reason, d.truncation, 0, now(), case when d.state = 'skipped' then now() end
      from unnest(${column('deliveryId')}::uuid[], ${column('id')}::uuid[], ${column('installationId')}::text[],
                  ${column('userId')}::text[], ${column('platform')}::text[], ${column('state')}::text[],
                  ${column('reason')}::text[], ${truncations}::jsonb[])
        as d(id, installation_id, client_installation_id, user_id, platform, state, reason, truncation)
    on conflict (notification_id, installation_id) do nothing
  `.execute(db(em));
}

export type ClaimedDelivery = {
  deliveryId: string;
  installationId: string | null;
  token: string | null;
  installationStatus: string | null;
  attempts: number;
};

/**
 * Takes the batch's still-pending deliveries for an attempt (counting it before the push goes
 * out, so that a crash loop still ends), with each installation's current identifier.
 */
export async function claimPending(em: EntityManager, deliveryIds: string[]): Promise<ClaimedDelivery[]> {
  const { rows } = await sql<ClaimedDelivery>`
    with claimed as (
      update deliveries set attempts = attempts + 1, last_attempt_at = now()
       where id = any(${deliveryIds}::uuid[]) and state = 'pending'
      returning id, installation_id, attempts
    )
    select c.id as "deliveryId", c.installation_id as "installationId", i.provider_identifier as token,
           i.status as "installationStatus", c.attempts
      from claimed c left join installations i on i.id = c.installation_id
  `.execute(db(em));
  return rows;
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
export async function recordResults(em: EntityManager, results: DeliveryResult[]): Promise<void> {
  if (results.length === 0) return;
  await sql`
    update deliveries d
       set state = r.state, reason = r.reason, provider_message_id = r.provider_message_id,
           completed_at = case when r.state <> 'pending' then now() end,
           truncation = case when r.state = 'skipped' then null else d.truncation end
      from unnest(${results.map((r) => r.deliveryId)}::uuid[], ${results.map((r) => r.state)}::text[],
                  ${results.map((r) => r.reason)}::text[], ${results.map((r) => r.providerMessageId)}::text[])
        as r(id, state, reason, provider_message_id)
     where d.id = r.id and d.state = 'pending'
  `.execute(db(em));
}

export type Invalidation = { installationId: string; token: string; reason: string; providerTimestamp: Date | null };

/**
 * Invalidates installations whose token the provider declared dead, unless the device has
 * registered a new identifier since: the token must still be the one we sent to, and an APNs
 * 410 timestamp older than the last identifier change does not count.
 */
export async function invalidateInstallations(em: EntityManager, invalidations: Invalidation[]): Promise<void> {
  if (invalidations.length === 0) return;
  await sql`
    update installations i
       set status = 'invalid', invalidated_at = now(), invalid_reason = v.reason
      from unnest(${invalidations.map((v) => v.installationId)}::uuid[], ${invalidations.map((v) => v.token)}::text[],
                  ${invalidations.map((v) => v.reason)}::text[],
                  ${invalidations.map((v) => v.providerTimestamp?.toISOString() ?? null)}::timestamptz[])
        as v(id, token, reason, provider_timestamp)
     where i.id = v.id and i.status = 'active' and i.provider_identifier = v.token
       and (v.provider_timestamp is null or v.provider_timestamp >= i.identifier_updated_at)
  `.execute(db(em));
}

/** Moves a notification to `processing` once; false when a previous run already did. */
export async function startProcessing(em: EntityManager, notificationId: string): Promise<boolean> {
  const { rows } = await sql`
    update notifications set status = 'processing', processing_started_at = now()
     where id = ${notificationId} and status = 'queued'
    returning id
  `.execute(db(em));
  return rows.length > 0;
}

/** Outcome counts of a notification's deliveries, and how many are still pending. */
export async function deliveryCounts(
  em: EntityManager,
  notificationId: string,
): Promise<{ pending: number; accepted: number; failed: number }> {
  const { rows } = await sql<{ pending: number; accepted: number; failed: number }>`
    select (count(*) filter (where state = 'pending'))::int as pending,
           (count(*) filter (where state = 'accepted'))::int as accepted,
           (count(*) filter (where state = 'failed'))::int as failed
      from deliveries where notification_id = ${notificationId}
  `.execute(db(em));
  return rows[0];
}

/** Sets the final status and completed_at exactly once (the first caller wins). */
export async function completeNotification(em: EntityManager, notificationId: string, status: string): Promise<boolean> {
  const { rows } = await sql`
    update notifications set status = ${status}, completed_at = now()
     where id = ${notificationId} and completed_at is null
    returning id
  `.execute(db(em));
  return rows.length > 0;
}

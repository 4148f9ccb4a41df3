// Webhooks: the outbox, a webhook job's reads and attempts, and an endpoint's delivery log.
import { sql } from 'kysely';
import type { components } from '../../generated/api.ts';
import { arrayLiteral } from '../array-literal.ts';
import type { WebhookAttempt } from '../entities.ts';
import { type Db, asDate, rows, run } from './execute.ts';

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

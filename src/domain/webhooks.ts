// Webhook endpoints: the URLs of an application that Herald POSTs signed events to (`herald
// webhooks`), their signing secrets, the signature, the retry schedule, and what the API and the
// CLI show of them. How events are made is in webhook-outbox.ts; how they are sent, worker/webhooks.ts.
import { createHmac, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { WebhookEndpoint, webhookEventTypes } from '../db/entities.ts';
import { webhookDeliveryRows, type NewWebhookEvent, type WebhookDeliveryRow, type WebhookTarget } from '../db/sql/webhooks.ts';
import { openWebhookSecret, sealWebhookSecret } from './credentials.ts';
import { decodeCursor, encodeCursor } from './cursor.ts';
import { notFound } from './errors.ts';
import { isUuid } from './ids.ts';
import { newId } from '../db/ids.ts';
import { webhookUrlProblem } from './webhook-addresses.ts';

export type WebhookEventType = components['schemas']['WebhookEventType'];
export type WebhookEndpointView = components['schemas']['WebhookEndpoint'];
export type WebhookDeliveryView = components['schemas']['WebhookDelivery'];
export type WebhookDeliveryState = components['schemas']['WebhookDeliveryState'];

/** Endpoints per application: each event is one request per endpoint that takes it. */
export const maxEndpointsPerApplication = 20;
/** How long the previous secret keeps signing after a rotation, unless told otherwise (as Stripe's 24 h). */
export const defaultPreviousSecretHours = 24;
export const maxPreviousSecretHours = 7 * 24;

export function isWebhookEventType(value: string): value is WebhookEventType {
  return (webhookEventTypes as readonly string[]).includes(value);
}

// ---------------------------------------------------------------------------------------------
// Endpoints

/** `whsec_` and 32 random bytes (base64url): the HMAC key is this whole string, as Stripe's. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export type NewEndpoint = { applicationId: string; url: string; events: string[] };

/** Stores an endpoint; its secret is returned here only (it is kept sealed). Refuses what it cannot send to. */
export async function addWebhookEndpoint(
  em: EntityManager,
  input: NewEndpoint,
  key: Buffer,
  options: { allowPrivate: boolean },
): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
  const problem = webhookUrlProblem(input.url, options);
  if (problem) throw new Error(problem);
  const unknown = input.events.filter((type) => !isWebhookEventType(type));
  if (unknown.length > 0 || input.events.length === 0) {
    throw new Error(`Unknown event type(s) ${unknown.join(', ') || '(none given)'}: expected some of ${webhookEventTypes.join(', ')}.`);
  }
  const existing = await em.count(WebhookEndpoint, { applicationId: input.applicationId });
  if (existing >= maxEndpointsPerApplication) {
    throw new Error(`Application ${input.applicationId} already has ${existing} webhook endpoints, the most it may have.`);
  }
  const id = newId();
  const secret = newSigningSecret();
  const endpoint = em.create(WebhookEndpoint, {
    id,
    applicationId: input.applicationId,
    url: input.url,
    events: [...new Set(input.events)],
    secret: sealWebhookSecret(secret, key, id),
  });
  await em.flush();
  return { endpoint, secret };
}

/** Oldest first; every application's when none is given. */
export async function listWebhookEndpoints(em: EntityManager, applicationId?: string): Promise<WebhookEndpoint[]> {
  return em.find(WebhookEndpoint, applicationId ? { applicationId } : {}, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

/** An endpoint by id, within an application when one is given (the API's), else any (the CLI's). */
export async function findWebhookEndpoint(em: EntityManager, id: string, applicationId?: string): Promise<WebhookEndpoint | null> {
  if (!isUuid(id)) return null;
  return em.findOne(WebhookEndpoint, { id: id.toLowerCase(), ...(applicationId ? { applicationId } : {}) });
}

/** Removes an endpoint and its delivery log; jobs queued for it then find nothing to send. */
export async function removeWebhookEndpoint(em: EntityManager, id: string): Promise<boolean> {
  const endpoint = await findWebhookEndpoint(em, id);
  if (!endpoint) return false;
  await em.remove(endpoint).flush();
  return true;
}

/**
 * A new signing secret, returned here only. The current one becomes the previous one and keeps
 * signing (a second `v1`) for `keepPreviousHours`, so receivers can switch without refusing a
 * request meanwhile; 0 drops it at once. A secret older than the current one is dropped.
 */
export async function rotateWebhookSecret(
  em: EntityManager,
  id: string,
  key: Buffer,
  keepPreviousHours: number,
): Promise<{ secret: string; previousSecretExpiresAt: Date | null } | null> {
  const endpoint = await findWebhookEndpoint(em, id);
  if (!endpoint) return null;
  const secret = newSigningSecret();
  const previousSecretExpiresAt = keepPreviousHours > 0 ? new Date(Date.now() + keepPreviousHours * 3_600_000) : null;
  em.assign(endpoint, {
    secret: sealWebhookSecret(secret, key, endpoint.id),
    previousSecret: previousSecretExpiresAt ? endpoint.secret : null,
    previousSecretExpiresAt,
  });
  await em.flush();
  return { secret, previousSecretExpiresAt };
}

/** Turns a disabled endpoint back on, with a fresh failing streak; its next events are sent again. */
export async function enableWebhookEndpoint(em: EntityManager, id: string): Promise<WebhookEndpoint | null> {
  const endpoint = await findWebhookEndpoint(em, id);
  if (!endpoint) return null;
  em.assign(endpoint, { disabledAt: null, disabledReason: null, failingSince: null });
  await em.flush();
  return endpoint;
}

const iso = (date: Date | null | undefined) => date?.toISOString() ?? null;

export function webhookEndpointView(endpoint: WebhookEndpoint): WebhookEndpointView {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: endpoint.events.filter(isWebhookEventType),
    status: endpoint.disabledAt ? 'disabled' : 'enabled',
    disabled_at: iso(endpoint.disabledAt),
    disabled_reason: endpoint.disabledReason ?? null,
    failing_since: iso(endpoint.failingSince),
    last_attempt: endpoint.lastAttempt ?? null,
    // An expired previous secret no longer signs: it is not mentioned.
    previous_secret_expires_at: endpoint.previousSecret && endpoint.previousSecretExpiresAt && endpoint.previousSecretExpiresAt > new Date()
      ? endpoint.previousSecretExpiresAt.toISOString()
      : null,
    created_at: endpoint.createdAt.toISOString(),
  };
}

// ---------------------------------------------------------------------------------------------
// The delivery log

/** A page of an endpoint's log, newest event first; the cursor is the last event id of the previous page. */
export async function listWebhookDeliveries(
  em: EntityManager,
  endpoint: WebhookEndpoint,
  page: { limit: number; cursor?: string; state?: WebhookDeliveryState },
): Promise<{ deliveries: WebhookDeliveryRow[]; nextCursor: string | null }> {
  const before = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const rows = await webhookDeliveryRows(em, endpoint.id, { limit: page.limit + 1, before, state: page.state });
  const deliveries = rows.slice(0, page.limit);
  return { deliveries, nextCursor: rows.length > page.limit ? encodeCursor(deliveries[deliveries.length - 1].eventId) : null };
}

/** The API's view of an application's endpoint log: another application's endpoint is 404. */
export async function endpointOf(em: EntityManager, applicationId: string, id: string): Promise<WebhookEndpoint> {
  const endpoint = await findWebhookEndpoint(em, id, applicationId);
  if (!endpoint) throw notFound();
  return endpoint;
}

export function webhookDeliveryView(row: WebhookDeliveryRow): WebhookDeliveryView {
  return {
    id: row.id,
    event_id: row.eventId,
    event_type: row.eventType,
    state: row.state,
    reason: row.reason,
    attempts: row.attempts,
    status_code: row.statusCode,
    error: row.error,
    response_excerpt: row.responseExcerpt,
    created_at: row.createdAt.toISOString(),
    last_attempt_at: iso(row.lastAttemptAt),
    next_attempt_at: iso(row.nextAttemptAt),
    completed_at: iso(row.completedAt),
  };
}

// ---------------------------------------------------------------------------------------------
// Sending: body, signature, retries

/** The request body: one event, `{ id, type, created_at, data }`, the same bytes in every attempt. */
export function webhookBody(event: Pick<NewWebhookEvent, 'type' | 'data' | 'createdAt'> & { id: string }): string {
  return JSON.stringify({ id: event.id, type: event.type, created_at: event.createdAt.toISOString(), data: event.data });
}

/** The secrets that sign a request now: the current one, and the previous one until it expires. */
export function signingSecrets(target: WebhookTarget, key: Buffer, now: Date): string[] {
  const secrets = [openWebhookSecret(target.secret, key, target.id)];
  if (target.previousSecret && target.previousSecretExpiresAt && target.previousSecretExpiresAt > now) {
    secrets.push(openWebhookSecret(target.previousSecret, key, target.id));
  }
  return secrets;
}

/**
 * `Herald-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]`, as Stripe's: HMAC-SHA256, keyed with
 * each secret, of `<t>.<body>`. Signed at each attempt, so a receiver can refuse old requests
 * (replays) by `t` alone.
 */
export function signatureHeader(secrets: string[], body: string, at: Date): string {
  const t = Math.floor(at.getTime() / 1000);
  const signatures = secrets.map((secret) => `v1=${createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex')}`);
  return [`t=${t}`, ...signatures].join(',');
}

/** The longest wait between two attempts: an endpoint that comes back is tried within the hour. */
export const maxWebhookDelaySeconds = 3600;

/** Exponential backoff: base, twice that, … up to an hour, ±20 % jitter, before attempt `attempt + 1`. */
export function webhookRetryDelaySeconds(attempt: number, baseSeconds: number, random = Math.random): number {
  const backoff = Math.min(maxWebhookDelaySeconds, baseSeconds * 2 ** Math.max(0, attempt - 1));
  return backoff * (0.8 + 0.4 * random());
}

/** "24 h", "90 s": a retry window as a reason says it. */
export function describeSeconds(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

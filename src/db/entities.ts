// The persistent model. Every table carries application_id so that it can be distributed by
// application (Citus) without changing a query; relations hold primary keys (mapToPk) because
// handlers work with ids, not object graphs.
import { defineEntity, p } from '@mikro-orm/core';
import { newId } from './ids.ts';
import {
  deliveryStateValues,
  eventTypeValues,
  installationStatusValues,
  notificationStatusValues,
  permissionValues,
  platformValues,
  webhookDeliveryStateValues,
  webhookEventTypeValues,
  type components,
} from '../generated/api.ts';
import { TextArrayType } from './array-literal.ts';

// The values the document allows are the values a column may hold.
export const platforms = platformValues;
export const installationStatuses = installationStatusValues;
export const permissions = permissionValues;
export const notificationStatuses = notificationStatusValues;
export const deliveryStates = deliveryStateValues;
export const eventTypes = eventTypeValues;
export const webhookEventTypes = webhookEventTypeValues;
export const webhookDeliveryStates = webhookDeliveryStateValues;

/** How a push was cut to fit its provider's payload limit (domain/payloads.ts fitToPlatform). */
export type Truncation = NonNullable<components['schemas']['Delivery']['truncation']>;
/** The title and body in other languages, by BCP 47 tag as the send gave it. */
export type Localizations = components['schemas']['Localizations'];
/** A browser subscription's keys (RFC 8291), base64url as given, and its expiry when the browser gave one. */
export type PushKeys = { p256dh: string; auth: string; expirationTime: number | null };
/** An installation's tags: key → value, both case-sensitive. */
export type Tags = components['schemas']['Tags'];
/** Who an audience send reaches among an application's installations (domain/audiences.ts). */
export type Audience = components['schemas']['Audience'];

const id = () => p.uuid().primary().onCreate(() => newId());
const now = () => p.datetime().onCreate(() => new Date());
const counter = () => p.integer().default(0).onCreate(() => 0);
// Called inside a property thunk, so that entities declared later in this file can be referenced.
const belongsTo = (entity: Parameters<typeof p.manyToOne>[0], column: string) =>
  p.manyToOne(entity).mapToPk().fieldName(column).deleteRule('cascade');

export const ApplicationSchema = defineEntity({
  name: 'Application',
  tableName: 'applications',
  properties: {
    id: id(),
    name: p.text(),
    // Sends allowed per window; null: the service default (config).
    sendQuota: p.integer().nullable(),
    sendWindowSeconds: p.integer().nullable(),
    // The origins whose pages may call the app-token operations from a browser (http/cors.ts).
    allowedOrigins: p.array().columnType('text[]').defaultRaw(`'{}'`).onCreate(() => []),
    createdAt: now(),
  },
});
export class Application extends ApplicationSchema.class {}
ApplicationSchema.setClass(Application);

export const ApiTokenSchema = defineEntity({
  name: 'ApiToken',
  tableName: 'api_tokens',
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id').index(),
    name: p.text(),
    publicId: p.text().unique(),
    // SHA-256 of the secret part, hex: the secret itself is never stored.
    secretHash: p.text(),
    abilities: p.array().columnType('text[]'),
    createdAt: now(),
    revokedAt: p.datetime().nullable(),
    // To the minute: written by the first request of a minute, not by every request (applications.ts).
    lastUsedAt: p.datetime().nullable(),
  },
});
export class ApiToken extends ApiTokenSchema.class {}
ApiTokenSchema.setClass(ApiToken);

export const InstallationSchema = defineEntity({
  name: 'Installation',
  tableName: 'installations',
  uniques: [{ properties: ['applicationId', 'installationId'] }],
  indexes: [
    // The fanout's lookup by user, and a user's installations newest first (ids are UUIDv7).
    { properties: ['applicationId', 'userId', 'id'] },
    { properties: ['applicationId', 'providerIdentifier'] },
  ],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    installationId: p.text(),
    platform: p.enum(platforms),
    providerIdentifier: p.text(),
    // A `web` installation's subscription keys (domain/web-push.ts); null for the other platforms.
    pushKeys: p.json<PushKeys>().nullable(),
    status: p.enum(installationStatuses),
    permission: p.enum(permissions),
    userId: p.text().nullable(),
    device: p.json<DeviceDetails>(),
    registeredAt: p.datetime(),
    lastSeenAt: p.datetime(),
    identifierUpdatedAt: p.datetime(),
    permissionUpdatedAt: p.datetime(),
    invalidatedAt: p.datetime().nullable(),
    invalidReason: p.text().nullable(),
    // Set by the app's backend (installations:tag); what an audience's tag conditions read.
    tags: p.json<Tags>().default('{}'),
    // Another installation of the application holds (or held) the same identifier: counted by
    // identifier in an audience count (db/sql/audiences.ts). Set by registrations, never cleared.
    identifierShared: p.boolean().default(false),
  },
});
export class Installation extends InstallationSchema.class {}
InstallationSchema.setClass(Installation);

export const NotificationSchema = defineEntity({
  name: 'Notification',
  tableName: 'notifications',
  // Listing is newest first per application; ids are UUIDv7, so id order is creation order.
  // Retention takes those that ended longest ago first, across applications (domain/retention.ts).
  indexes: [{ properties: ['applicationId', 'id'] }, { properties: ['completedAt'] }],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    status: p.enum(notificationStatuses),
    title: p.text().nullable(),
    body: p.text().nullable(),
    imageUrl: p.text().nullable(),
    actionUrl: p.text().nullable(),
    // Null when the send gave none (or `{}`).
    localizations: p.json<Localizations>().nullable(),
    data: p.json<Record<string, unknown>>(),
    options: p.json<Record<string, unknown>>(),
    // The send's user ids; empty for a send to an audience or a segment.
    userIds: p.array().type(TextArrayType).columnType('text[]'),
    // A test send's installation ids (recipients.installation_ids); null for any other send.
    installationIds: p.array().type(TextArrayType).columnType('text[]').nullable(),
    // The filter an audience or segment send targets (a segment's copied when sent, so that a
    // later change of the segment does not change who a scheduled send reaches); null: user_ids.
    audience: p.json<Audience>().nullable(),
    // The segment's name when sent to one.
    segment: p.text().nullable(),
    // What the notification answers as `target_users`: the number of user ids, or for an audience
    // the distinct users it matched, written when its fanout starts (0 until then).
    targetUsers: counter(),
    createdAt: now(),
    // A future `options.send_at`: when the fanout job is due, and what its ttl counts from.
    scheduledFor: p.datetime().nullable(),
    processingStartedAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    // The statistics, moved by the same statements that move the delivery rows they count
    // (db/sql/deliveries.ts, db/sql/events.ts), so reading them never counts rows. Pending:
    // installations less the others.
    usersCount: counter(),
    installationsCount: counter(),
    acceptedCount: counter(),
    failedCount: counter(),
    skippedCount: counter(),
    receivedCount: counter(),
    displayedCount: counter(),
    openedCount: counter(),
  },
});
export class Notification extends NotificationSchema.class {}
NotificationSchema.setClass(Notification);

export const SegmentSchema = defineEntity({
  name: 'Segment',
  tableName: 'segments',
  uniques: [{ properties: ['applicationId', 'name'] }],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    name: p.text(),
    audience: p.json<Audience>(),
    createdAt: now(),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export class Segment extends SegmentSchema.class {}
SegmentSchema.setClass(Segment);

export const IdempotencyKeySchema = defineEntity({
  name: 'IdempotencyKey',
  tableName: 'idempotency_keys',
  uniques: [{ properties: ['applicationId', 'key'] }],
  // notificationId: deleting a notification finds its key by it (ON DELETE CASCADE, retention).
  indexes: [{ properties: ['createdAt'] }, { properties: ['notificationId'] }],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    key: p.text(),
    // SHA-256 of the canonical request body: same key + other body is a conflict.
    requestHash: p.text(),
    // Deferred: the key is claimed first, the notification is written later in the same transaction.
    notificationId: () => belongsTo(Notification, 'notification_id').deferMode('deferred'),
    createdAt: now(),
  },
});
export class IdempotencyKey extends IdempotencyKeySchema.class {}
IdempotencyKeySchema.setClass(IdempotencyKey);

export const DeliverySchema = defineEntity({
  name: 'Delivery',
  tableName: 'deliveries',
  // One push per installation per notification, whatever a crashed or retried job does.
  uniques: [{ properties: ['notificationId', 'installationRowId'] }],
  // The deliveries view's order, and a user's deliveries across notifications (newest first). No
  // state index: it would make every outcome a non-HOT update.
  indexes: [{ properties: ['notificationId', 'id'] }, { properties: ['applicationId', 'userId', 'id'] }],
  properties: {
    id: id(),
    // Plain columns, no foreign keys: the fanout writes them from the notification it holds locked
    // (migration 20261125100000 says why).
    applicationId: p.uuid(),
    notificationId: p.uuid(),
    // The installation's row (installations.id), not the app's installation_id (clientInstallationId).
    // No foreign key either: once the installation is deleted it names no row, which the claim's
    // join reads as `installation_deleted`; the delivery stays for the statistics.
    installationRowId: p.uuid().fieldName('installation_id').nullable(),
    clientInstallationId: p.text(),
    userId: p.text().nullable(),
    platform: p.enum(platforms),
    state: p.enum(deliveryStates),
    reason: p.text().nullable(),
    attempts: p.integer().default(0),
    // apns-id or the FCM message name of the accepted push: what to quote to Apple or Google.
    providerMessageId: p.text().nullable(),
    // The tag of the localization pushed (domain/locales.ts); null: the default content, or nothing pushed.
    locale: p.text().nullable(),
    // How the push was cut to fit the provider's payload limit (payloads.ts fitToPlatform); null: sent whole.
    truncation: p.json<Truncation>().nullable(),
    createdAt: now(),
    // When the push is due, for a send at each device's local time (domain/local-time.ts); null:
    // at the send's start. What its deliver job is deferred to, and what its ttl counts from.
    scheduledFor: p.datetime().nullable(),
    lastAttemptAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    // First time each event kind was reported: statistics count non-null ones.
    receivedAt: p.datetime().nullable(),
    displayedAt: p.datetime().nullable(),
    openedAt: p.datetime().nullable(),
    dismissedAt: p.datetime().nullable(),
  },
});
export class Delivery extends DeliverySchema.class {}
DeliverySchema.setClass(Delivery);

export const DeliveryEventSchema = defineEntity({
  name: 'DeliveryEvent',
  tableName: 'delivery_events',
  uniques: [{ properties: ['applicationId', 'eventId'] }],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    eventId: p.uuid(),
    deliveryId: () => belongsTo(Delivery, 'delivery_id').index(),
    clientInstallationId: p.text(),
    type: p.enum(eventTypes),
    occurredAt: p.datetime(),
    receivedAt: now(),
  },
});
export class DeliveryEvent extends DeliveryEventSchema.class {}
DeliveryEventSchema.setClass(DeliveryEvent);

export const providers = ['apns', 'fcm', 'webpush'] as const;

export const ProviderCredentialSchema = defineEntity({
  name: 'ProviderCredential',
  tableName: 'provider_credentials',
  uniques: [{ properties: ['applicationId', 'provider'] }],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    provider: p.enum(providers),
    // What `credentials show` prints: key id, team id, bundle id, project id, client email.
    settings: p.json<Record<string, string | boolean>>(),
    // AES-256-GCM of the secret part (the .p8 key or the service account), see domain/credentials.ts.
    secret: p.text(),
    createdAt: now(),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
    // Set when the provider refused our credentials; cleared by the next accepted push.
    unhealthySince: p.datetime().nullable(),
    lastError: p.text().nullable(),
    // Set while the provider cannot be reached (a network fault says nothing about the credential,
    // so it never makes it unhealthy); cleared by the next accepted push.
    unreachableSince: p.datetime().nullable(),
    // When a provider first accepted a push made with them (or `credentials check` did); null: none
    // has yet (`unverified`). Cleared when they are set again.
    verifiedAt: p.datetime().nullable(),
  },
});
export class ProviderCredential extends ProviderCredentialSchema.class {}
ProviderCredentialSchema.setClass(ProviderCredential);

/** An endpoint's last delivery attempt, kept as the API shows it (`last_attempt`). */
export type WebhookAttempt = components['schemas']['WebhookAttempt'];

export const WebhookEndpointSchema = defineEntity({
  name: 'WebhookEndpoint',
  tableName: 'webhook_endpoints',
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id').index(),
    url: p.text(),
    events: p.array().columnType('text[]'),
    // AES-256-GCM with HERALD_CREDENTIALS_KEY, like provider credentials (domain/webhooks.ts).
    secret: p.text(),
    // The secret before the last rotation: it signs too (a second v1) until it expires.
    previousSecret: p.text().nullable(),
    previousSecretExpiresAt: p.datetime().nullable(),
    createdAt: now(),
    disabledAt: p.datetime().nullable(),
    disabledReason: p.text().nullable(),
    // The first failed attempt since the last success: the endpoint is disabled once it is a retry window old.
    failingSince: p.datetime().nullable(),
    lastAttempt: p.json<WebhookAttempt>().nullable(),
  },
});
export class WebhookEndpoint extends WebhookEndpointSchema.class {}
WebhookEndpointSchema.setClass(WebhookEndpoint);

export const WebhookEventSchema = defineEntity({
  name: 'WebhookEvent',
  tableName: 'webhook_events',
  // Retention takes the oldest first.
  indexes: [{ properties: ['createdAt'] }],
  properties: {
    // Assigned where the event is made (UUIDv7); every endpoint and every attempt gets this id.
    id: p.uuid().primary(),
    applicationId: () => belongsTo(Application, 'application_id'),
    type: p.enum(webhookEventTypes),
    // The body's `data`, as the document's webhooks section describes it for `type`.
    data: p.json<Record<string, unknown>>(),
    createdAt: now(),
  },
});
export class WebhookEvent extends WebhookEventSchema.class {}
WebhookEventSchema.setClass(WebhookEvent);

export const WebhookDeliverySchema = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  // One delivery per event and endpoint, and the delivery log's order: newest event first (event
  // ids are UUIDv7). event_id alone: the events' cascade (retention).
  uniques: [{ properties: ['endpointId', 'eventId'] }],
  indexes: [{ properties: ['eventId'] }],
  properties: {
    // Written by the outbox's statement (gen_random_uuid): how many an event gets is known only there.
    id: p.uuid().primary(),
    applicationId: p.uuid(),
    endpointId: () => belongsTo(WebhookEndpoint, 'endpoint_id'),
    eventId: () => belongsTo(WebhookEvent, 'event_id'),
    state: p.enum(webhookDeliveryStates),
    reason: p.text().nullable(),
    attempts: p.integer().default(0),
    // The last attempt's answer: its status, why it failed, and at most 200 characters of its body.
    statusCode: p.integer().nullable(),
    error: p.text().nullable(),
    responseExcerpt: p.text().nullable(),
    createdAt: now(),
    lastAttemptAt: p.datetime().nullable(),
    nextAttemptAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
  },
});
export class WebhookDelivery extends WebhookDeliverySchema.class {}
WebhookDeliverySchema.setClass(WebhookDelivery);

export type DeviceDetails = {
  app_version: string | null;
  os_version: string | null;
  model: string | null;
  locale: string | null;
  timezone: string | null;
};

export const entities = [
  ApplicationSchema,
  ApiTokenSchema,
  InstallationSchema,
  NotificationSchema,
  SegmentSchema,
  IdempotencyKeySchema,
  DeliverySchema,
  DeliveryEventSchema,
  ProviderCredentialSchema,
  WebhookEndpointSchema,
  WebhookEventSchema,
  WebhookDeliverySchema,
];

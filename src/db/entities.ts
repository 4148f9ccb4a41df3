// The persistent model. Every table carries application_id so that it can be distributed by
// application (Citus) without changing a query; relations hold primary keys (mapToPk) because
// handlers work with ids, not object graphs.
import { defineEntity, p } from '@mikro-orm/core';
import { v7 as uuidv7 } from 'uuid';
import {
  deliveryStateValues,
  eventTypeValues,
  installationStatusValues,
  notificationStatusValues,
  permissionValues,
  platformValues,
  type components,
} from '../generated/api.ts';
import { TextArrayType } from './text-array.ts';

// The values the document allows are the values a column may hold.
export const platforms = platformValues;
export const installationStatuses = installationStatusValues;
export const permissions = permissionValues;
export const notificationStatuses = notificationStatusValues;
export const deliveryStates = deliveryStateValues;
export const eventTypes = eventTypeValues;

/** How a push was cut to fit its provider's payload limit (domain/payloads.ts fitToPlatform). */
export type Truncation = NonNullable<components['schemas']['Delivery']['truncation']>;

const id = () => p.uuid().primary().onCreate(() => uuidv7());
const now = () => p.datetime().onCreate(() => new Date());
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
    { properties: ['applicationId', 'userId'] },
    { properties: ['applicationId', 'providerIdentifier'] },
  ],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    installationId: p.text(),
    platform: p.enum(platforms),
    providerIdentifier: p.text(),
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
  },
});
export class Installation extends InstallationSchema.class {}
InstallationSchema.setClass(Installation);

export const NotificationSchema = defineEntity({
  name: 'Notification',
  tableName: 'notifications',
  // Listing is newest first per application; ids are UUIDv7, so id order is creation order.
  // Retention takes the oldest first across applications (domain/retention.ts).
  indexes: [{ properties: ['applicationId', 'id'] }, { properties: ['createdAt'] }],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    status: p.enum(notificationStatuses),
    title: p.text().nullable(),
    body: p.text().nullable(),
    imageUrl: p.text().nullable(),
    actionUrl: p.text().nullable(),
    data: p.json<Record<string, unknown>>(),
    options: p.json<Record<string, unknown>>(),
    userIds: p.array().type(TextArrayType).columnType('text[]'),
    createdAt: now(),
    processingStartedAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
  },
});
export class Notification extends NotificationSchema.class {}
NotificationSchema.setClass(Notification);

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
  indexes: [{ properties: ['notificationId', 'state'] }],
  properties: {
    id: id(),
    applicationId: () => belongsTo(Application, 'application_id'),
    notificationId: () => belongsTo(Notification, 'notification_id'),
    // The installation's row (installations.id), not the app's installation_id (clientInstallationId).
    // Nulled when the installation is deleted; the delivery stays for the statistics.
    installationRowId: () =>
      p.manyToOne(Installation).mapToPk().fieldName('installation_id').nullable().deleteRule('set null').index(),
    clientInstallationId: p.text(),
    userId: p.text().nullable(),
    platform: p.enum(platforms),
    state: p.enum(deliveryStates),
    reason: p.text().nullable(),
    attempts: p.integer().default(0),
    // apns-id or the FCM message name of the accepted push: what to quote to Apple or Google.
    providerMessageId: p.text().nullable(),
    // How the push was cut to fit the provider's payload limit (payloads.ts fitToPlatform); null: sent whole.
    truncation: p.json<Truncation>().nullable(),
    createdAt: now(),
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

export const providers = ['apns', 'fcm'] as const;

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
  },
});
export class ProviderCredential extends ProviderCredentialSchema.class {}
ProviderCredentialSchema.setClass(ProviderCredential);

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
  IdempotencyKeySchema,
  DeliverySchema,
  DeliveryEventSchema,
  ProviderCredentialSchema,
];

// The webhook outbox. An event is written in the transaction of the change it reports (a delivery
// recorded failed, an installation invalidated, a notification ended or cancelled, an event reported), with one
// pending delivery per endpoint that takes it and the jobs that will send them: a crash either
// loses the change and its events together, or keeps both. The jobs are queued through
// `EnqueueWebhookJobs` (built from the job queue in service/), so the domain never sees pg-boss.
//
// The hot paths ask first whether the application has an endpoint for the event at all (`wants`,
// kept a few seconds per application), and change nothing when it has none: no transaction, no
// statement, no job. A fanout's chunk of failures is one statement and one job per endpoint.
import type { EntityManager } from '@mikro-orm/postgresql';
import { LRUCache } from 'lru-cache';
import { newId } from '../db/ids.ts';
import type { components } from '../generated/api.ts';
import type { DeliveryRecord } from '../db/sql/deliveries.ts';
import type { InstallationRow } from '../db/sql/installations.ts';
import type { NotificationRow } from '../db/sql/notifications.ts';
import { insertWebhookEvents, webhookSubscriptions, type NewWebhookEvent } from '../db/sql/webhooks.ts';
import { chunk } from './chunk.ts';
import { deliveryView } from './deliveries.ts';
import { installationView } from './installations.ts';
import { notificationView } from './notifications.ts';
import type { WebhookEventType } from './webhooks.ts';

type Schemas = components['schemas'];

/** A webhook job: deliveries of one endpoint, sent together. */
export type WebhookJob = { applicationId: string; endpointId: string; deliveryIds: string[] };
/** Queues webhook jobs in the caller's transaction (a rollback drops them too). */
export type EnqueueWebhookJobs = (tx: EntityManager, jobs: WebhookJob[]) => Promise<void>;

export type WebhookOutbox = {
  /** Whether an enabled endpoint of the application takes this type of event (as known a few seconds ago). */
  wants(em: EntityManager, applicationId: string, type: WebhookEventType): Promise<boolean>;
  /** Stores the events for the endpoints that take them and queues their sending, in `tx`. */
  emit(tx: EntityManager, applicationId: string, events: NewWebhookEvent[]): Promise<void>;
};

/**
 * How long a process trusts what it read of an application's subscriptions: an endpoint added (or
 * a type subscribed to) takes effect within this, like a token revocation. One removed or disabled
 * takes effect at once: the outbox's insert reads the endpoints themselves.
 */
export const subscriptionCacheMs = 5_000;

/** Deliveries per webhook job: one job's requests go out a few at a time (worker/webhooks.ts). */
export const deliveriesPerJob = 100;

export function createWebhookOutbox(enqueue: EnqueueWebhookJobs, options: { cacheMs: number } = { cacheMs: subscriptionCacheMs }): WebhookOutbox {
  const known = options.cacheMs > 0 ? new LRUCache<string, ReadonlySet<string>>({ max: 10_000, ttl: options.cacheMs }) : null;
  return {
    async wants(em, applicationId, type) {
      let types = known?.get(applicationId);
      if (!types) {
        types = new Set(await webhookSubscriptions(em, applicationId));
        known?.set(applicationId, types);
      }
      return types.has(type);
    },
    async emit(tx, applicationId, events) {
      const queued = await insertWebhookEvents(tx, applicationId, events);
      const jobs = queued.flatMap(({ endpointId, deliveryIds }) =>
        chunk(deliveryIds, deliveriesPerJob).map((part): WebhookJob => ({ applicationId, endpointId, deliveryIds: part })),
      );
      if (jobs.length > 0) await enqueue(tx, jobs);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The events, as the document's webhooks section describes them

const event = (type: WebhookEventType, data: object): NewWebhookEvent => ({ id: newId(), type, data, createdAt: new Date() });

export function notificationCompleted(notification: NotificationRow): NewWebhookEvent {
  const data: Schemas['NotificationCompletedEvent']['data'] = { notification: notificationView(notification) };
  return event('notification.completed', data);
}

export function notificationCancelled(notification: NotificationRow): NewWebhookEvent {
  const data: Schemas['NotificationCancelledEvent']['data'] = { notification: notificationView(notification) };
  return event('notification.cancelled', data);
}

export function deliveriesFailed(deliveries: DeliveryRecord[]): NewWebhookEvent[] {
  return deliveries.map((delivery) => {
    // Without its scheduled_for: the payload stays as it was before deliveries had it.
    const { scheduled_for: _scheduledFor, ...view } = deliveryView(delivery);
    const data: Schemas['DeliveryFailedEvent']['data'] = { notification_id: delivery.notificationId, delivery: view };
    return event('delivery.failed', data);
  });
}

export function installationsInvalidated(installations: InstallationRow[]): NewWebhookEvent[] {
  return installations.map((installation) => {
    // Without its tags: the payload stays as it was before installations had them.
    const { tags: _tags, ...view } = installationView(installation);
    const data: Schemas['InstallationInvalidatedEvent']['data'] = { installation: view };
    return event('installation.invalidated', data);
  });
}

export function eventReported(reported: Schemas['Event'], notificationId: string, userId: string | null): NewWebhookEvent {
  const data: Schemas['EventReportedEvent']['data'] = { event: reported, notification_id: notificationId, user_id: userId };
  return event('event.reported', data);
}

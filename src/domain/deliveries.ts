// Reading a notification's deliveries: the per-installation answer to "why didn't X get it".
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { decodeCursor, toPage } from './cursor.ts';
import { Delivery } from '../db/entities.ts';
import { deliveryBreakdown, userDeliveryRows, type BreakdownRow, type UserDeliveryRecord } from '../db/sql/deliveries.ts';
import { findNotification } from './notifications.ts';
import type { DeliveryRecord } from '../db/sql/deliveries.ts';

export type DeliveryView = components['schemas']['Delivery'];
export type UserDeliveryView = components['schemas']['UserDelivery'];
export type DeliveryFilter = { userId?: string; state?: DeliveryView['state']; platform?: DeliveryView['platform']; reason?: string };

export async function listDeliveries(
  em: EntityManager,
  applicationId: string,
  notificationId: string,
  page: { limit: number; cursor?: string } & DeliveryFilter,
): Promise<{ deliveries: Delivery[]; nextCursor: string | null }> {
  const notification = await findNotification(em, applicationId, notificationId);
  const after = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const rows = await em.find(
    Delivery,
    {
      notificationId: notification.id,
      ...(after ? { id: { $gt: after } } : {}),
      ...(page.userId !== undefined ? { userId: page.userId } : {}),
      ...(page.state !== undefined ? { state: page.state } : {}),
      ...(page.platform !== undefined ? { platform: page.platform } : {}),
      ...(page.reason !== undefined ? { reason: page.reason } : {}),
    },
    { orderBy: { id: 'asc' }, limit: page.limit + 1 },
  );
  const { items: deliveries, nextCursor } = toPage(rows, page.limit);
  return { deliveries, nextCursor };
}

/** A user's deliveries across the application's notifications, newest first: "did it reach user X?". */
export async function listUserDeliveries(
  em: EntityManager,
  applicationId: string,
  page: { userId: string; limit: number; cursor?: string },
): Promise<{ deliveries: UserDeliveryRecord[]; nextCursor: string | null }> {
  const before = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const rows = await userDeliveryRows(em, applicationId, page.userId, { limit: page.limit + 1, before });
  const { items: deliveries, nextCursor } = toPage(rows, page.limit);
  return { deliveries, nextCursor };
}

/** Why `failed` and `skipped` are what they are: the deliveries counted by state, platform and reason. */
export async function breakdownOf(em: EntityManager, applicationId: string, notificationId: string): Promise<BreakdownRow[]> {
  const notification = await findNotification(em, applicationId, notificationId);
  return deliveryBreakdown(em, notification.id);
}

const iso = (date: Date | null | undefined) => date?.toISOString() ?? null;

/** A delivery as the API shows it, from its entity or from a statement's row (a `delivery.failed` webhook's). */
export function deliveryView(delivery: Delivery | DeliveryRecord): DeliveryView {
  return {
    id: delivery.id,
    installation_id: delivery.clientInstallationId,
    user_id: delivery.userId ?? null,
    platform: delivery.platform,
    state: delivery.state,
    reason: delivery.reason ?? null,
    attempts: delivery.attempts,
    provider_message_id: delivery.providerMessageId ?? null,
    locale: delivery.locale ?? null,
    // Rows cut before 1.2.0 have no `badge`: none was brought within range then.
    truncation: delivery.truncation ? { ...delivery.truncation, badge: delivery.truncation.badge ?? null } : null,
    created_at: delivery.createdAt.toISOString(),
    scheduled_for: iso(delivery.scheduledFor),
    last_attempt_at: iso(delivery.lastAttemptAt),
    completed_at: iso(delivery.completedAt),
    received_at: iso(delivery.receivedAt),
    displayed_at: iso(delivery.displayedAt),
    opened_at: iso(delivery.openedAt),
    dismissed_at: iso(delivery.dismissedAt),
  };
}

/** A user's delivery as `listUserDeliveries` shows it: the delivery, with its notification's id and title. */
export function userDeliveryView(delivery: UserDeliveryRecord): UserDeliveryView {
  return { notification_id: delivery.notificationId, notification_title: delivery.notificationTitle, delivery: deliveryView(delivery) };
}

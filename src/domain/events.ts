// Delivery events: idempotent by event_id, and each kind counts once per delivery.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { conflict, notFound, validationFailed } from './errors.ts';
import { isUuid } from './ids.ts';
import { findDeliveryForEvent, findEvent, insertEvent, recordFirstSeen, touchInstallation, type EventRow, type FirstSeenColumn } from '../db/sql.ts';

type Schemas = components['schemas'];
export type EventRequest = Schemas['EventCreate'];
export type EventView = Schemas['Event'];
export type EventType = EventRequest['type'];

/** The delivery column holding the first time each kind was reported. */
const firstSeenColumn: Record<EventType, FirstSeenColumn> = {
  received: 'received_at',
  displayed: 'displayed_at',
  opened: 'opened_at',
  dismissed: 'dismissed_at',
};

export const eventConflictMessage = 'This event_id was already recorded with different content.';

/** Why an event on a skipped delivery is refused, with the reason it was skipped. */
export function neverSentMessage(reason: string | null): string {
  return `The delivery was never sent (skipped${reason ? `: ${reason}` : ''}), so it cannot have events.`;
}

export async function recordEvent(
  em: EntityManager,
  applicationId: string,
  request: EventRequest,
): Promise<{ event: EventView; created: boolean }> {
  const occurredAt = new Date(request.occurred_at);
  // date-time admits values a Date or Postgres cannot hold (a leap second, year 0).
  if (Number.isNaN(occurredAt.getTime()) || occurredAt.getUTCFullYear() < 1) {
    throw validationFailed({ occurred_at: ['The occurred_at field must be a valid date-time.'] });
  }
  if (!isUuid(request.delivery_id)) throw notFound();
  const eventId = request.event_id.toLowerCase();

  return em.transactional(async (tx) => {
    const delivery = await findDeliveryForEvent(tx, {
      applicationId,
      deliveryId: request.delivery_id,
      installationId: request.installation_id,
    });
    if (!delivery) throw notFound();
    // A skipped delivery was never pushed, so no device can report on it. Pending, accepted and
    // failed ones may have reached the device (a push that timed out can still arrive).
    if (delivery.state === 'skipped') {
      throw validationFailed({ delivery_id: [neverSentMessage(delivery.reason)] });
    }

    // A concurrent report of the same event_id waits here for the first one to commit.
    const inserted = await insertEvent(tx, applicationId, {
      eventId,
      deliveryId: request.delivery_id,
      installationId: request.installation_id,
      type: request.type,
      occurredAt,
    });
    if (inserted) {
      await recordFirstSeen(tx, request.delivery_id, firstSeenColumn[request.type], occurredAt);
      if (delivery.installationRowId) await touchInstallation(tx, delivery.installationRowId);
      return { event: eventView(inserted), created: true };
    }

    const existing = await findEvent(tx, applicationId, eventId);
    const same =
      existing.deliveryId === request.delivery_id.toLowerCase() &&
      existing.installationId === request.installation_id &&
      existing.type === request.type &&
      existing.occurredAt.getTime() === occurredAt.getTime();
    if (!same) throw conflict(eventConflictMessage);
    return { event: eventView(existing), created: false };
  });
}

function eventView(row: EventRow): EventView {
  return {
    event_id: row.eventId,
    delivery_id: row.deliveryId,
    installation_id: row.installationId,
    type: row.type,
    occurred_at: row.occurredAt.toISOString(),
    received_at: row.receivedAt.toISOString(),
  };
}

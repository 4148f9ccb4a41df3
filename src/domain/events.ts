// Delivery events: idempotent by event_id, and each kind counts once per delivery.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { conflict, notFound, validationFailed } from './errors.ts';
import { isUuid } from './ids.ts';
import { readDateTime } from './date-times.ts';
import { findEvent, reportEvent, type EventRow, type FirstSeen } from '../db/sql/events.ts';
import { eventReported, type WebhookOutbox } from './webhook-outbox.ts';

type Schemas = components['schemas'];
export type EventRequest = Schemas['EventCreate'];
export type EventView = Schemas['Event'];
export type EventType = EventRequest['type'];

/** Where each kind's first report is kept on the delivery, and the statistic it counts in (dismissed: none). */
const firstSeen: Record<EventType, FirstSeen> = {
  received: { column: 'received_at', counter: 'received_count' },
  displayed: { column: 'displayed_at', counter: 'displayed_count' },
  opened: { column: 'opened_at', counter: 'opened_count' },
  dismissed: { column: 'dismissed_at', counter: null },
};

export const eventConflictMessage = 'This event_id was already recorded with different content.';

/** Why an event on a skipped delivery is refused, with the reason it was skipped. */
export function neverSentMessage(reason: string | null): string {
  return `The delivery was never sent (skipped${reason ? `: ${reason}` : ''}), so it cannot have events.`;
}

/**
 * Records an event, and when the application has an endpoint for `event.reported`, its webhook in
 * the same transaction (only a new event: a replay reports nothing new).
 */
export async function recordEvent(
  em: EntityManager,
  webhooks: WebhookOutbox,
  applicationId: string,
  request: EventRequest,
): Promise<{ event: EventView; created: boolean }> {
  if (!(await webhooks.wants(em, applicationId, 'event.reported'))) return record(em, applicationId, request);
  return em.transactional(async (tx) =>
    record(tx, applicationId, request, (event, notificationId, userId) =>
      webhooks.emit(tx, applicationId, [eventReported(event, notificationId, userId)]),
    ),
  );
}

async function record(
  em: EntityManager,
  applicationId: string,
  request: EventRequest,
  announce?: (event: EventView, notificationId: string, userId: string | null) => Promise<void>,
): Promise<{ event: EventView; created: boolean }> {
  const occurred = readDateTime('occurred_at', request.occurred_at);
  if ('problem' in occurred) throw validationFailed({ occurred_at: [occurred.problem] });
  const occurredAt = occurred.at;
  if (!isUuid(request.delivery_id)) throw notFound();
  const eventId = request.event_id.toLowerCase();

  // A skipped delivery was never pushed, so no device can report on it: the event is well formed
  // and refused for the delivery's state, a conflict like cancelling a notification that ended.
  // Pending, accepted and failed ones may have reached the device (a timed-out push can arrive).
  const reported = await reportEvent(
    em,
    applicationId,
    { eventId, deliveryId: request.delivery_id, installationId: request.installation_id, type: request.type, occurredAt },
    firstSeen[request.type],
  );
  if (reported.delivery === 'unknown') throw notFound();
  // A message only: the interface spec gives the event endpoint's extra error no field errors.
  if (reported.delivery === 'skipped') throw conflict(neverSentMessage(reported.reason));
  if (reported.inserted) {
    const event = eventView(reported.inserted);
    await announce?.(event, reported.notificationId, reported.userId);
    return { event, created: true };
  }

  const existing = await findEvent(em, applicationId, eventId);
  const same =
    existing.deliveryId === request.delivery_id.toLowerCase() &&
    existing.installationId === request.installation_id &&
    existing.type === request.type &&
    existing.occurredAt.getTime() === occurredAt.getTime();
  if (!same) throw conflict(eventConflictMessage);
  return { event: eventView(existing), created: false };
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

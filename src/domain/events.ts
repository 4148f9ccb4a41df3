// Delivery events: idempotent by event_id, and each kind counts once per delivery.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { conflict, notFound, validationFailed } from './errors.ts';
import { isUuid } from './ids.ts';

type Schemas = components['schemas'];
export type EventRequest = Schemas['EventCreate'];
export type EventView = Schemas['Event'];
export type EventType = EventRequest['type'];

type EventRow = {
  event_id: string;
  delivery_id: string;
  client_installation_id: string;
  type: EventType;
  occurred_at: Date;
  received_at: Date;
};

/** The delivery column holding the first time each kind was reported. */
const firstSeenColumn: Record<EventType, string> = {
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

  return em.fork().transactional(async (tx) => {
    const [delivery] = await tx.execute<{ installation_id: string | null; state: string; reason: string | null }[]>(
      `select installation_id, state, reason from deliveries
        where id = ? and application_id = ? and client_installation_id = ?`,
      [request.delivery_id, applicationId, request.installation_id],
    );
    if (!delivery) throw notFound();
    // A skipped delivery was never pushed, so no device can report on it. Pending, accepted and
    // failed ones may have reached the device (a push that timed out can still arrive).
    if (delivery.state === 'skipped') {
      throw validationFailed({ delivery_id: [neverSentMessage(delivery.reason)] });
    }

    // A concurrent report of the same event_id waits here for the first one to commit.
    const inserted = await tx.execute<EventRow[]>(
      `insert into delivery_events
         (id, application_id, event_id, delivery_id, client_installation_id, type, occurred_at, received_at)
       values (gen_random_uuid(), ?, ?, ?, ?, ?, ?, now())
       on conflict (application_id, event_id) do nothing
       returning event_id, delivery_id, client_installation_id, type, occurred_at, received_at`,
      [applicationId, eventId, request.delivery_id, request.installation_id, request.type, occurredAt],
    );
    if (inserted.length > 0) {
      const column = firstSeenColumn[request.type];
      // least() ignores nulls: the earliest report of a kind is kept.
      await tx.execute(`update deliveries set ${column} = least(${column}, ?) where id = ?`, [
        occurredAt,
        request.delivery_id,
      ]);
      if (delivery.installation_id) {
        await tx.execute('update installations set last_seen_at = now() where id = ?', [delivery.installation_id]);
      }
      return { event: eventView(inserted[0]), created: true };
    }

    const [existing] = await tx.execute<EventRow[]>(
      `select event_id, delivery_id, client_installation_id, type, occurred_at, received_at
         from delivery_events where application_id = ? and event_id = ?`,
      [applicationId, eventId],
    );
    const same =
      existing.delivery_id === request.delivery_id.toLowerCase() &&
      existing.client_installation_id === request.installation_id &&
      existing.type === request.type &&
      new Date(existing.occurred_at).getTime() === occurredAt.getTime();
    if (!same) throw conflict(eventConflictMessage);
    return { event: eventView(existing), created: false };
  });
}

function eventView(row: EventRow): EventView {
  return {
    event_id: row.event_id,
    delivery_id: row.delivery_id,
    installation_id: row.client_installation_id,
    type: row.type,
    occurred_at: new Date(row.occurred_at).toISOString(),
    received_at: new Date(row.received_at).toISOString(),
  };
}

// Events a client reports on a delivery (received, displayed, opened, dismissed).
import { sql } from 'kysely';
import type { components } from '../../generated/api.ts';
import { type Db, asDate, rows } from './execute.ts';
import { addToHours } from './statistics.ts';

export type EventRow = {
  eventId: string;
  deliveryId: string;
  installationId: string;
  type: components['schemas']['EventType'];
  occurredAt: Date;
  receivedAt: Date;
};

const eventColumns = sql`event_id as "eventId", delivery_id as "deliveryId", client_installation_id as "installationId",
                         type, occurred_at as "occurredAt", received_at as "receivedAt"`;

const eventRow = (row: EventRow): EventRow => ({ ...row, occurredAt: asDate(row.occurredAt), receivedAt: asDate(row.receivedAt) });

/** The delivery columns holding the first time an event kind was reported, and the counter it moves. */
export type FirstSeen = {
  column: 'received_at' | 'displayed_at' | 'opened_at' | 'dismissed_at';
  counter: 'received_count' | 'displayed_count' | 'opened_count' | null;
};

export type ReportedEvent =
  | { delivery: 'unknown' }
  | { delivery: 'skipped'; reason: string | null }
  | { delivery: 'sent'; inserted: EventRow | undefined; notificationId: string; userId: string | null };

/**
 * An event on a delivery, in one statement: the delivery it names (only if it went to that
 * installation of that application, locked so that concurrent reports of one kind count it once),
 * the event unless its event_id exists (a concurrent report of the same id waits for the first to
 * commit), the first time of its kind on the delivery (least() ignores nulls: the earliest report
 * is kept), the notification's counter when it is the first of its kind (and, for a first `opened`,
 * the application's hour), and the installation's last_seen_at. Nothing is written for a delivery
 * that was skipped: it was never pushed.
 */
export async function reportEvent(
  db: Db,
  applicationId: string,
  event: Omit<EventRow, 'receivedAt'>,
  firstSeen: FirstSeen,
): Promise<ReportedEvent> {
  const column = sql.ref(firstSeen.column);
  const counted = firstSeen.counter === null
    ? sql``
    : sql`, counted as (
        update notifications n set ${sql.ref(firstSeen.counter)} = n.${sql.ref(firstSeen.counter)} + 1
          from target, inserted where n.id = target.notification_id and target.first
        returning n.application_id
      )`;
  // A delivery's first `opened` is an open of the application's hour too (db/sql/statistics.ts),
  // taken after the notification's row, as every statement takes them.
  const opened = firstSeen.counter === 'opened_count'
    ? sql`, hours as (${addToHours(sql`select application_id, 0, 0, 0, 0, 1 from counted`)})`
    : sql``;
  const [found] = await rows(
    db,
    sql<{ state: string; reason: string | null; notificationId: string; userId: string | null } & Partial<EventRow>>`
      with target as (
        select id, notification_id, installation_id, user_id, state, reason, ${column} is null as first from deliveries
         where id = ${event.deliveryId} and application_id = ${applicationId} and client_installation_id = ${event.installationId}
           for update
      ), inserted as (
        insert into delivery_events
          (id, application_id, event_id, delivery_id, client_installation_id, type, occurred_at, received_at)
        select gen_random_uuid(), ${applicationId}, ${event.eventId}, target.id, ${event.installationId}, ${event.type},
               ${event.occurredAt}, now()
          from target where target.state <> 'skipped'
        on conflict (application_id, event_id) do nothing
        returning ${eventColumns}
      ), seen as (
        update deliveries d set ${column} = least(d.${column}, ${event.occurredAt})
          from target, inserted where d.id = target.id
      ), touched as (
        update installations i set last_seen_at = now() from target, inserted where i.id = target.installation_id
      )${counted}${opened}
      select target.state, target.reason, target.notification_id as "notificationId", target.user_id as "userId", inserted.*
        from target left join inserted on true`,
  );
  if (!found) return { delivery: 'unknown' };
  if (found.state === 'skipped') return { delivery: 'skipped', reason: found.reason };
  const { state: _state, reason: _reason, notificationId, userId, ...inserted } = found;
  return { delivery: 'sent', inserted: inserted.eventId === null ? undefined : eventRow(inserted as EventRow), notificationId, userId };
}

export async function findEvent(db: Db, applicationId: string, eventId: string): Promise<EventRow> {
  const [found] = await rows(
    db,
    sql<EventRow>`select ${eventColumns} from delivery_events where application_id = ${applicationId} and event_id = ${eventId}`,
  );
  return eventRow(found);
}

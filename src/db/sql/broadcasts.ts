// Broadcasts: the walk of an audience's installations in key order, a batch at a time, each batch
// committed with its checkpoint on the notification's row (worker/broadcasts.ts runs it).
import { sql } from 'kysely';
import type { Audience } from '../entities.ts';
import { audienceCondition } from './audiences.ts';
import type { NotificationCandidate } from './deliveries.ts';
import { type Db, asDate, rows, run } from './execute.ts';
import type { FannedNotification } from './notifications.ts';

/** Where a broadcast's walk is: what its next batch reads after, and what it has walked so far. */
export type WalkStep = FannedNotification & {
  audience: Audience;
  /** The provider identifier of the last group of installations committed; null: from the start. */
  walkAfter: string | null;
  walked: number;
  targetUsers: number;
};

/**
 * Takes the notification's row for one batch of its walk and answers where the walk is; undefined
 * when it is not `processing` any more (cancelled, ended) or its walk has ended. The row lock is
 * the one a cancel's first step (markCancelled) takes: a batch commits before the cancel, whose
 * second step then skips what it left pending, or sees `cancelled` and walks nothing. Same order as
 * a fanout's: the notification's row, then the deliveries it inserts.
 */
export async function lockWalkStep(db: Db, notificationId: string): Promise<WalkStep | undefined> {
  const [step] = await rows(
    db,
    sql<WalkStep>`
      update notifications n set walked = n.walked
       where id = ${notificationId} and status = 'processing' and audience is not null and walk_ended_at is null
      returning id, application_id as "applicationId", title, body, image_url as "imageUrl", action_url as "actionUrl",
                localizations, data, options, audience, walk_after as "walkAfter", walked, target_users as "targetUsers",
                array(select c.provider from provider_credentials c where c.application_id = n.application_id) as "credentialProviders"`,
  );
  return step;
}

/**
 * The next batch of a broadcast's installations: the active ones of the application that match the
 * audience, after the checkpoint, in provider identifier order, about `limit` of them and always
 * whole groups of one identifier, so that the installations sharing a device's identifier are in
 * one batch and the fanout's rule (one push per device, the most recently seen installation keeps
 * it) holds across the walk. Read from the (application_id, provider_identifier) index: the first
 * `limit` rows, then the rest of the last identifier's group (usually none). `ended`: the walk has
 * nothing after this batch.
 */
export async function walkAudience(
  db: Db,
  step: { applicationId: string; audience: Audience; walkAfter: string | null; withLocale: boolean },
  limit: number,
): Promise<{ candidates: NotificationCandidate[]; last: string | null; ended: boolean }> {
  const deviceLocale = step.withLocale ? sql`i.device->>'locale'` : sql`null`;
  const after = step.walkAfter === null ? sql`` : sql`and i.provider_identifier > ${step.walkAfter}`;
  const matches = sql`i.application_id = ${step.applicationId} and i.status = 'active' and ${audienceCondition(step.audience)}`;
  const columns = sql`i.id as "rowId", i.installation_id as "installationId", i.user_id as "userId", i.platform,
    i.provider_identifier as "providerIdentifier", i.permission, i.last_seen_at as "lastSeenAt", ${deviceLocale} as "deviceLocale"`;
  const found = await rows(
    db,
    sql<Omit<NotificationCandidate, 'notificationId'> & { full: boolean }>`
      with page as materialized (
        select ${columns} from installations i
         where ${matches} ${after}
         order by i.provider_identifier
         limit ${limit}
      ), edge as (
        select max("providerIdentifier") as identifier, count(*) = ${limit} as full from page
      )
      select page.*, edge.full from page, edge
      union all
      select ${columns}, true from installations i, edge
       where edge.full and ${matches} and i.provider_identifier = edge.identifier
         and i.id not in (select "rowId" from page)`,
  );
  const candidates = found.map(({ full: _full, ...row }) => ({ ...row, notificationId: '', lastSeenAt: asDate(row.lastSeenAt) }));
  let last: string | null = null;
  for (const candidate of candidates) if (last === null || candidate.providerIdentifier > last) last = candidate.providerIdentifier;
  return { candidates, last, ended: found.length === 0 || !found[0].full };
}

/**
 * Moves the checkpoint past the batch just walked, in the batch's transaction: `walked` counts the
 * installations walked, and a walk with nothing after this batch ends (walk_ended_at), after which
 * the notification completes once nothing is pending (notificationProgress).
 */
export async function advanceWalk(db: Db, notificationId: string, step: { last: string | null; walked: number; ended: boolean }): Promise<void> {
  await run(
    db,
    sql`update notifications
           set walk_after = coalesce(${step.last}::text, walk_after), walked = walked + ${step.walked},
               walk_ended_at = case when ${step.ended}::boolean then now() end
         where id = ${notificationId}`,
  );
}

/** `target_users` of an audience send, counted when its walk starts (countAudience); written once. */
export async function setTargetUsers(db: Db, notificationId: string, users: number): Promise<void> {
  await run(db, sql`update notifications set target_users = ${users} where id = ${notificationId} and target_users = 0`);
}

/**
 * What a broadcast's walk reads before a batch: its deliveries not ended yet (from the counters), its
 * status, and its `options.throttle_per_minute` as given (null when absent), which sizes its window.
 */
export async function walkProgress(db: Db, notificationId: string): Promise<{ pending: number; status: string; throttlePerMinute: unknown } | undefined> {
  const [found] = await rows(
    db,
    sql<{ pending: number; status: string; throttlePerMinute: unknown }>`
      select installations_count - accepted_count - failed_count - skipped_count as pending, status,
             options->'throttle_per_minute' as "throttlePerMinute"
        from notifications where id = ${notificationId}`,
  );
  return found;
}

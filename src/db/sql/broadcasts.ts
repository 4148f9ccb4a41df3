// Broadcasts: the walk of an audience's installations in key order, a batch at a time, each batch
// committed with its checkpoint on the notification's row (worker/broadcasts.ts runs it). A send at
// each device's local time is walked in waves instead, one per instant its installations are due,
// each with its checkpoint on its own row (broadcast_waves).
import { sql } from 'kysely';
import { arrayLiteral } from '../array-literal.ts';
import type { Audience } from '../entities.ts';
import { audienceCondition } from './audiences.ts';
import type { NotificationCandidate } from './deliveries.ts';
import { type Db, asDate, rows, run } from './execute.ts';
import { fannedNotification, type FannedNotification } from './notifications.ts';

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
                created_at as "createdAt", scheduled_for as "scheduledFor",
                array(select c.provider from provider_credentials c where c.application_id = n.application_id) as "credentialProviders"`,
  );
  return step && fannedNotification(step);
}

/** Which installations a wave covers, by their `device.timezone` as stored: these values, and none (`coversNull`). */
export type WaveZones = { timezones: string[]; coversNull: boolean };

/** A wave of a local-time broadcast: when it is due, the zones it covers, and its own checkpoint. */
export type WaveStep = WaveZones & { dueAt: Date; walkAfter: string | null; walked: number };

/**
 * A wave not walked to its end, read under the notification's row lock (lockWalkStep, taken first:
 * a statement of its own, so that it reads what a slice that held the lock before committed).
 */
export async function readWave(db: Db, notificationId: string, dueAt: Date): Promise<WaveStep | undefined> {
  const [wave] = await rows(
    db,
    sql<WaveStep>`
      select due_at as "dueAt", timezones, covers_null as "coversNull", walk_after as "walkAfter", walked
        from broadcast_waves where notification_id = ${notificationId} and due_at = ${dueAt.toISOString()}::timestamptz and ended_at is null`,
  );
  return wave && { ...wave, dueAt: asDate(wave.dueAt) };
}

/** Whether a broadcast's waves have been planned (under its row lock, like readWave). */
export async function wavesPlanned(db: Db, notificationId: string): Promise<boolean> {
  const [found] = await rows(db, sql<{ planned: boolean }>`select exists (select from broadcast_waves where notification_id = ${notificationId}) as planned`);
  return found.planned;
}

/**
 * The distinct `device.timezone` values of the installations a broadcast reaches now, with how many
 * have each: one aggregate (a hash of a few hundred values at most), from which its waves are planned.
 */
export async function audienceTimezones(db: Db, applicationId: string, audience: Audience): Promise<{ timezone: string | null; installations: number }[]> {
  return rows(
    db,
    sql<{ timezone: string | null; installations: number }>`
      select i.device->>'timezone' as timezone, count(*)::int as installations
        from installations i
       where i.application_id = ${applicationId} and i.status = 'active' and ${audienceCondition(audience)}
       group by 1`,
  );
}

/**
 * Stores a broadcast's planned waves, each with the id of the walk job queued for it and the
 * installations of its time zones, and their sum as what the whole walk has to read (progress).
 */
export async function insertWaves(
  db: Db,
  notificationId: string,
  applicationId: string,
  waves: (WaveZones & { dueAt: Date; jobId: string; installations: number })[],
): Promise<void> {
  if (waves.length === 0) return;
  await run(
    db,
    sql`
      with waves as (
        insert into broadcast_waves (notification_id, due_at, application_id, timezones, covers_null, job_id, installations)
        select ${notificationId}, w.due_at, ${applicationId}, array(select jsonb_array_elements_text(w.timezones)), w.covers_null, w.job_id, w.installations
          from unnest(${arrayLiteral(waves.map((wave) => wave.dueAt.toISOString()))}::timestamptz[],
                      ${arrayLiteral(waves.map((wave) => JSON.stringify(wave.timezones)))}::jsonb[],
                      ${arrayLiteral(waves.map((wave) => String(wave.coversNull)))}::boolean[],
                      ${arrayLiteral(waves.map((wave) => wave.jobId))}::uuid[],
                      ${arrayLiteral(waves.map((wave) => String(wave.installations)))}::int[]) as w(due_at, timezones, covers_null, job_id, installations)
        returning installations
      )
      update notifications set audience_installations = (select sum(installations) from waves) where id = ${notificationId}`,
  );
}

/**
 * The walk jobs of a broadcast's waves still to come, due a second or more from now: no worker can
 * have taken them, so a cancel drops them (a wave due sooner runs then and does nothing).
 */
export async function deferredWaveJobs(db: Db, notificationId: string): Promise<string[]> {
  const found = await rows(
    db,
    sql<{ jobId: string }>`
      select job_id as "jobId" from broadcast_waves
       where notification_id = ${notificationId} and ended_at is null and walked = 0 and walk_after is null
         and due_at > clock_timestamp() + interval '1 second'`,
  );
  return found.map((row) => row.jobId);
}

/**
 * The next batch of a broadcast's installations: the active ones of the application that match the
 * audience, after the checkpoint, in provider identifier order, about `limit` of them and always
 * whole groups of one identifier, so that the installations sharing a device's identifier are in
 * one batch and the fanout's rule (one push per device, the most recently seen installation keeps
 * it) holds across the walk. Read from the (application_id, provider_identifier) index: the first
 * `limit` rows, then the rest of the last identifier's group (usually none). `ended`: the walk has
 * nothing after this batch.
 *
 * A wave (`wave`) reads the same rows, and keeps those whose time zone value it covers: a batch
 * reads `limit` installations of the audience whatever share of them is the wave's, so a wave of a
 * few installations among a million costs as many short batches as the whole walk, never one
 * statement that reads the whole audience to fill a batch (no index on the time zone: every
 * registration would write it).
 */
export async function walkAudience(
  db: Db,
  step: { applicationId: string; audience: Audience; walkAfter: string | null; withLocale: boolean; wave?: WaveZones },
  limit: number,
): Promise<{ candidates: NotificationCandidate[]; last: string | null; ended: boolean }> {
  const deviceLocale = step.withLocale ? sql`i.device->>'locale'` : sql`null`;
  const deviceTimezone = step.wave ? sql`i.device->>'timezone'` : sql`null`;
  const after = step.walkAfter === null ? sql`` : sql`and i.provider_identifier > ${step.walkAfter}`;
  const matches = sql`i.application_id = ${step.applicationId} and i.status = 'active' and ${audienceCondition(step.audience)}`;
  const columns = sql`i.id as "rowId", i.installation_id as "installationId", i.user_id as "userId", i.platform,
    i.provider_identifier as "providerIdentifier", i.permission, i.last_seen_at as "lastSeenAt", ${deviceLocale} as "deviceLocale",
    ${deviceTimezone} as "deviceTimezone"`;
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
  let last: string | null = null;
  for (const row of found) if (last === null || row.providerIdentifier > last) last = row.providerIdentifier;
  const inWave = step.wave ? waveMember(step.wave) : () => true;
  const candidates = found.filter(inWave).map(({ full: _full, ...row }) => ({ ...row, notificationId: '', lastSeenAt: asDate(row.lastSeenAt) }));
  return { candidates, last, ended: found.length === 0 || !found[0].full };
}

/** Whether an installation is a wave's: its time zone value as stored is one the wave covers (as planned). */
function waveMember(wave: WaveZones): (row: { deviceTimezone?: string | null }) => boolean {
  const covered = new Set(wave.timezones);
  return ({ deviceTimezone }) => (deviceTimezone == null ? wave.coversNull : covered.has(deviceTimezone));
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

/**
 * Moves a wave's checkpoint past the batch just walked, in the batch's transaction, and counts it on
 * the notification's `walked`. A wave with nothing after this batch ends; the walk ends
 * (walk_ended_at) with the last of its waves, so the notification stays `processing` until then
 * (notificationProgress). Answers whether the walk has ended.
 */
export async function advanceWave(db: Db, notificationId: string, dueAt: Date, step: { last: string | null; walked: number; ended: boolean }): Promise<boolean> {
  const due = dueAt.toISOString();
  // The statement sees the waves as they were when it began: this one is left out of the check.
  const [found] = await rows(
    db,
    sql<{ walkEnded: boolean }>`
      with wave as (
        update broadcast_waves
           set walk_after = coalesce(${step.last}::text, walk_after), walked = walked + ${step.walked},
               ended_at = case when ${step.ended}::boolean then now() end
         where notification_id = ${notificationId} and due_at = ${due}::timestamptz
      )
      update notifications n
         set walked = n.walked + ${step.walked},
             walk_ended_at = case when ${step.ended}::boolean and not exists (
               select from broadcast_waves w where w.notification_id = n.id and w.ended_at is null and w.due_at <> ${due}::timestamptz) then now() end
       where id = ${notificationId}
      returning walk_ended_at is not null as "walkEnded"`,
  );
  return found.walkEnded;
}

/**
 * What an audience send's walk has to read: its active installations matching the audience now,
 * those a push skips included (the walk reads them too). The count behind its progress.
 */
export async function countWalk(db: Db, applicationId: string, audience: Audience): Promise<number> {
  const [found] = await rows(
    db,
    sql<{ installations: number }>`
      select count(*)::int as installations from installations i
       where i.application_id = ${applicationId} and i.status = 'active' and ${audienceCondition(audience)}`,
  );
  return found.installations;
}

/**
 * An audience send's figures counted when its walk starts, written once: `target_users`
 * (countAudience) and, unless its waves already gave it, what the walk has to read (countWalk).
 */
export async function setAudienceSize(db: Db, notificationId: string, size: { users: number; installations: number | null }): Promise<void> {
  await run(
    db,
    sql`update notifications
           set target_users = case when target_users = 0 then ${size.users}::int else target_users end,
               audience_installations = coalesce(audience_installations, ${size.installations}::int)
         where id = ${notificationId}`,
  );
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

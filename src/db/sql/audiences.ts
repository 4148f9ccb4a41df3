// Audiences: the SQL of an audience's filter over installations, and the exact count of whom a
// send to it would reach (POST /api/v1/audiences/count; the fanout counts `target_users` the same way).
import { sql, type RawBuilder } from 'kysely';
import type { Audience } from '../entities.ts';
import { arrayLiteral } from '../array-literal.ts';
import { type Db, rows } from './execute.ts';

const contains = (key: string, value: string) => sql<boolean>`i.tags @> ${JSON.stringify({ [key]: value })}::jsonb`;

/**
 * The audience as a condition on an installations row aliased `i`, every condition ANDed. It
 * leaves out the application and the status: the caller adds them. Tag conditions are written as
 * containment (`@>`) and key tests (`?`), which the GIN index on tags answers (`in`: one
 * containment per value, a bitmap OR); `ne` and `not_exists` match rows without the key, which no
 * index can list. A locale matches by whole subtags: the device's, lowercased with `_` read as
 * `-`, is the tag or starts with the tag and a separator (`-`, or POSIX's `.`/`@` suffixes).
 */
export function audienceCondition(audience: Audience): RawBuilder<boolean> {
  const conditions = audienceConditions(audience);
  return conditions.length === 0 ? sql<boolean>`true` : sql<boolean>`(${sql.join(conditions, sql` and `)})`;
}

/** The audience's conditions, none for `all: true`. */
function audienceConditions(audience: Audience): RawBuilder<boolean>[] {
  const conditions = platformAndTagConditions(audience);
  if (audience.locales && audience.locales.length > 0) {
    // Language tags hold letters, digits and `-` only (the document's LanguageTag), nothing a
    // regular expression reads specially.
    const tags = [...new Set(audience.locales.map((tag) => tag.toLowerCase()))];
    const pattern = `^(${tags.join('|')})([-.@]|$)`;
    conditions.push(sql<boolean>`lower(translate(i.device->>'locale', '_', '-')) ~ ${pattern}`);
  }
  if (audience.active_within_days !== undefined) {
    conditions.push(sql<boolean>`i.last_seen_at >= ${activityCutoff(audience.active_within_days)}`);
  }
  return conditions;
}

const activityCutoff = (days: number) => sql`now() - make_interval(days => ${days})`;

/** The conditions on platform and tags: the columns `audience_members` shares with installations. */
function platformAndTagConditions(audience: Audience): RawBuilder<boolean>[] {
  const conditions: RawBuilder<boolean>[] = [];
  if (audience.platforms && audience.platforms.length > 0) {
    conditions.push(sql<boolean>`i.platform = any(${arrayLiteral(audience.platforms)}::text[])`);
  }
  for (const condition of audience.tags ?? []) {
    const { key } = condition;
    switch (condition.op) {
      case 'eq':
        conditions.push(contains(key, condition.value ?? ''));
        break;
      case 'ne':
        conditions.push(sql<boolean>`not ${contains(key, condition.value ?? '')}`);
        break;
      case 'in':
        conditions.push(sql<boolean>`(${sql.join((condition.values ?? []).map((value) => contains(key, value)), sql` or `)})`);
        break;
      case 'exists':
        conditions.push(sql<boolean>`i.tags ? ${key}`);
        break;
      case 'not_exists':
        conditions.push(sql<boolean>`not (i.tags ? ${key})`);
        break;
    }
  }
  return conditions;
}

/**
 * Whether an active installation gets a visible push (domain/fanout.ts classify): not when its
 * permission is denied, nor on iOS before the user answered the prompt.
 */
export const eligibleForVisiblePush = sql<boolean>`(i.permission <> 'denied' and not (i.platform = 'ios' and i.permission = 'not_determined'))`;

export type AudienceCount = { installations: number; users: number };

/**
 * A count's settings, for its transaction only: memory its hash tables may take before they spill
 * to disk; no JIT (compiling a plan over a million rows costs more than it saves on one run of
 * it); parallel workers whenever the plan allows them (the defaults start them only for far
 * bigger scans, and a count is one statement an operator waits for); and a plan made for its
 * values every time: statements are prepared on every pool, and after five runs Postgres may keep
 * a generic plan, made without knowing how many rows a tag or a day matches, which read more.
 */
const countSettings = { work_mem: '128MB', jit: 'off', parallel_setup_cost: '0', parallel_tuple_cost: '0', plan_cache_mode: 'force_custom_plan' };

/**
 * The installations that share no identifier, matching the audience, as one row (installations,
 * users), by the cheapest source that is exact:
 * - `all: true`: the kept totals, rows of differences the installation writes append (triggers of
 *   Migration20261206090000), summed: a few rows, not a million index entries grouped by user.
 * - platform, tag and activity conditions: `audience_members`, the kept installations' narrow copy,
 *   read from its covering index (platform and day narrow the range, tags are tested on the
 *   entries) or, for a tag few rows have, found by its GIN index. Its `seen_on` (the UTC day last
 *   seen) decides activity for every day but the one the cutoff falls in, whose rows are checked
 *   against last_seen_at itself, one probe each; that match is materialized so that its scan may
 *   run in parallel workers (a probe per row may not), and grouped in byte order (`collate "C"`:
 *   the same groups, and with no statistics on the materialized rows the planner sorts them, which
 *   a linguistic collation makes slower).
 * - locales (`device` is not copied): the installations, grouped by user.
 */
function unsharedPart(applicationId: string, audience: Audience, matches: RawBuilder<boolean>) {
  const grouped = (source: RawBuilder<unknown>) => sql`
    select coalesce(sum(g.installations), 0) as installations,
           count(*) filter (where g.user_id is not null) + coalesce(sum(g.installations) filter (where g.user_id is null), 0) as users
      from (${source}) g`;
  if (audienceConditions(audience).length === 0) {
    return sql`select coalesce(sum(t.installations), 0) as installations, coalesce(sum(t.users), 0) as users
                 from audience_totals t where t.application_id = ${applicationId}`;
  }
  if (audience.locales && audience.locales.length > 0) {
    return grouped(sql`select i.user_id, count(*) as installations from installations i
                        where ${matches} and not i.identifier_shared group by i.user_id`);
  }
  const conditions = [sql<boolean>`i.application_id = ${applicationId}`, ...platformAndTagConditions(audience)];
  const days = audience.active_within_days;
  if (days === undefined) {
    return grouped(sql`select i.user_id, count(*) as installations from audience_members i
                        where ${sql.join(conditions, sql` and `)} group by i.user_id`);
  }
  const cutoffDay = sql`((${activityCutoff(days)}) at time zone 'UTC')::date`;
  conditions.push(sql<boolean>`i.seen_on >= ${cutoffDay}`);
  return sql`
    with matched as materialized (
      select i.id, i.user_id, i.seen_on from audience_members i where ${sql.join(conditions, sql` and `)}
    )
    ${grouped(sql`select m.user_id collate "C" as user_id, count(*) as installations from matched m
                   where case when m.seen_on = ${cutoffDay}
                              then (select x.last_seen_at >= ${activityCutoff(days)} from installations x where x.id = m.id)
                              else true end
                   group by 1`)}`;
}

/**
 * Exactly whom a visible push to the audience would reach now: its active, eligible installations,
 * an identifier shared by several of them counted once, and the distinct users among those (an
 * installation without a user counts as one). Run it in a transaction: its settings are set for
 * that transaction alone.
 *
 * Two parts. Installations that share no identifier (`identifier_shared` false: nearly all) count
 * as themselves, grouped by user (unsharedPart). The few that share one are grouped by
 * identifier, the installation that keeps it picked as classify picks it (domain/fanout.ts: the
 * most recently seen), and its user counted unless the first part already counted them. Those few
 * are read from their own small index before the filter applies (`materialized`): left to choose,
 * the planner combined that index with the tag index's bitmap, reading the tags' whole posting
 * lists a second time for a few thousand rows.
 */
export async function countAudience(db: Db, applicationId: string, audience: Audience): Promise<AudienceCount> {
  const everyone = audienceConditions(audience).length === 0;
  const matches = sql<boolean>`i.application_id = ${applicationId} and i.status = 'active' and ${eligibleForVisiblePush} and ${audienceCondition(audience)}`;
  await rows(db, sql`select ${sql.join(Object.entries(countSettings).map(([name, value]) => sql`set_config(${name}, ${value}, true)`))}`);
  const countedAlready = everyone
    ? sql`exists (select from audience_users u where u.application_id = ${applicationId} and u.user_id = d.user_id and u.installations > 0)`
    : sql`exists (select from installations i where i.user_id = d.user_id and ${matches} and not i.identifier_shared)`;
  const [count] = await rows(
    db,
    sql<AudienceCount>`
      with single as (${unsharedPart(applicationId, audience, matches)}), holders as materialized (
        select i.* from installations i where i.application_id = ${applicationId} and i.identifier_shared and i.status = 'active'
      ), devices as (
        select distinct on (i.platform, i.provider_identifier) i.user_id
          from holders i
         where ${matches}
         order by i.platform, i.provider_identifier, i.last_seen_at desc, i.id desc
      ), shared as (
        select count(*) as installations,
               count(distinct d.user_id) filter (where d.user_id is not null and not ${countedAlready})
               + count(*) filter (where d.user_id is null) as users
          from devices d
      )
      select (s.installations + h.installations)::int as installations, (s.users + h.users)::int as users
        from single s, shared h`,
  );
  return count;
}

/**
 * Folds each application's rows of `audience_totals` into one (what the kept `all: true` count
 * sums), and answers how many rows it removed; users left with no kept installation are removed
 * from `audience_users` (the triggers leave them at 0). Rows a concurrent write adds meanwhile are
 * left for the next run, and a concurrent fold skips the rows this one deleted: the sums stay
 * exact. A user row that a concurrent write moves off 0 is skipped (the `where` is checked again
 * on the row's newest version). A user row a write holds is left for the next run: the fold never
 * waits on a registration, which may be waiting for another row the fold took.
 */
export async function foldAudienceTotals(db: Db): Promise<number> {
  await rows(
    db,
    sql`delete from audience_users u
         using (select application_id, user_id from audience_users where installations = 0
                 order by application_id, user_id for update skip locked) z
         where u.application_id = z.application_id and u.user_id = z.user_id`,
  );
  const [{ folded }] = await rows(
    db,
    sql<{ folded: number }>`
      with gone as (
        delete from audience_totals t
         where t.application_id in (select application_id from audience_totals group by application_id having count(*) > 1)
        returning t.application_id, t.installations, t.users
      ), folded as (
        insert into audience_totals (application_id, installations, users)
        select application_id, sum(installations), sum(users) from gone group by application_id
        returning 1
      )
      select ((select count(*) from gone) - (select count(*) from folded))::int as folded`,
  );
  return folded;
}

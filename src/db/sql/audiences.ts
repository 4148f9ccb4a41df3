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
  if (audience.locales && audience.locales.length > 0) {
    // Language tags hold letters, digits and `-` only (the document's LanguageTag), nothing a
    // regular expression reads specially.
    const tags = [...new Set(audience.locales.map((tag) => tag.toLowerCase()))];
    const pattern = `^(${tags.join('|')})([-.@]|$)`;
    conditions.push(sql<boolean>`lower(translate(i.device->>'locale', '_', '-')) ~ ${pattern}`);
  }
  if (audience.active_within_days !== undefined) {
    conditions.push(sql<boolean>`i.last_seen_at >= now() - make_interval(days => ${audience.active_within_days})`);
  }
  return conditions.length === 0 ? sql<boolean>`true` : sql<boolean>`(${sql.join(conditions, sql` and `)})`;
}

/**
 * Whether an active installation gets a visible push (domain/fanout.ts classify): not when its
 * permission is denied, nor on iOS before the user answered the prompt.
 */
export const eligibleForVisiblePush = sql<boolean>`(i.permission <> 'denied' and not (i.platform = 'ios' and i.permission = 'not_determined'))`;

export type AudienceCount = { installations: number; users: number };

/** Memory a count's hash tables may take before they spill to disk (its transaction's setting only). */
const countWorkMem = '128MB';

/**
 * Exactly whom a visible push to the audience would reach now: its active, eligible installations,
 * an identifier shared by several of them counted once, and the distinct users among those (an
 * installation without a user counts as one). Run it in a transaction: its work_mem is set for
 * that transaction alone.
 *
 * Hash aggregates, not DISTINCT ON or count(distinct), which sort every matched row (on disk past
 * work_mem). An identifier group of one installation is that installation; for the rare shared
 * identifier, the installation that keeps it is looked up as classify picks it (domain/fanout.ts:
 * the most recently seen), and its user is the one counted.
 */
export async function countAudience(db: Db, applicationId: string, audience: Audience): Promise<AudienceCount> {
  const matches = sql`i.application_id = ${applicationId} and i.status = 'active' and ${eligibleForVisiblePush} and ${audienceCondition(audience)}`;
  // JIT compiling a plan over a million rows costs more than it saves on one run of it.
  await rows(db, sql`select set_config('work_mem', ${countWorkMem}, true), set_config('jit', 'off', true)`);
  const [count] = await rows(
    db,
    sql<AudienceCount>`
      with devices as (
        select i.platform, i.provider_identifier, count(*) as installations, min(i.user_id) as user_id
          from installations i
         where ${matches}
         group by i.platform, i.provider_identifier
      ), reached as (
        select case when d.installations = 1 then d.user_id
                    else (select i.user_id from installations i
                           where i.platform = d.platform and i.provider_identifier = d.provider_identifier and ${matches}
                           order by i.last_seen_at desc, i.id desc limit 1)
               end as user_id
          from devices d
      ), users as (
        -- Installations without a user are one group here (user_id null): each of them counts as a user.
        select r.user_id, count(*) as installations from reached r group by r.user_id
      )
      select coalesce(sum(u.installations), 0)::int as installations,
             (count(*) filter (where u.user_id is not null) + coalesce(sum(u.installations) filter (where u.user_id is null), 0))::int as users
        from users u`,
  );
  return count;
}

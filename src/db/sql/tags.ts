// Tag summaries (GET /api/v1/tags): per application, its tag keys and their most common values
// over its active installations, computed by a worker job and stored, so that a read is one row.
// The installation writes that can change it (a registration, a tag written, a delete, an
// invalidation) mark the summary changed in their own statement (markTagsChanged), and only a
// changed summary is computed again.
import { sql, type RawBuilder } from 'kysely';
import { type Db, asDate, rows, run } from './execute.ts';

export type TagValueCount = { value: string; installations: number };
export type TagKeyCount = { key: string; installations: number; values: TagValueCount[] };
export type TagSummaryRow = { keys: TagKeyCount[]; refreshedAt: Date | null };

/** At most this many keys are kept, the most used; each with at most this many values. */
export const tagSummaryLimits = { keys: 100, values: 20 } as const;

/**
 * The body of a data-modifying `with` that marks the summaries of the applications `applicationIds`
 * (a select of application ids, from the statement's own written rows) changed, unless marked since
 * their last computation: a busy application's writes then read the summary's row and write nothing.
 * Taking its rows only once the installation rows are written (the select reads them) keeps one
 * lock order for every writer: installations, then the summary.
 */
export function markTagsChanged(applicationIds: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`
    update tag_summaries s set changed_at = now()
     where s.application_id in (${applicationIds}) and (s.changed_at is null or s.changed_at < s.refreshed_at)`;
}

/** The stored summary, or undefined when none has been asked for. `refreshedAt` null: not computed yet. */
export async function findTagSummary(db: Db, applicationId: string): Promise<TagSummaryRow | undefined> {
  const [found] = await rows(
    db,
    sql<TagSummaryRow>`select summary as keys, refreshed_at as "refreshedAt" from tag_summaries where application_id = ${applicationId}`,
  );
  return found && { keys: found.keys, refreshedAt: found.refreshedAt && asDate(found.refreshedAt) };
}

/** A summary to be computed (the sweep finds it, db/sql/tags.ts dueTagSummaries); nothing when one exists. */
export async function placeTagSummary(db: Db, applicationId: string): Promise<void> {
  await run(db, sql`insert into tag_summaries (application_id) values (${applicationId}) on conflict (application_id) do nothing`);
}

/** Whether the application has at most `limit` active installations (reads at most one more). */
export async function activeInstallationsAtMost(db: Db, applicationId: string, limit: number): Promise<boolean> {
  const [{ count }] = await rows(
    db,
    sql<{ count: number }>`
      select count(*)::int as count from (
        select 1 from installations where application_id = ${applicationId} and status = 'active' limit ${limit + 1}) found`,
  );
  return count <= limit;
}

/** Memory the computation's aggregates may take before spilling to disk (its transaction's setting only). */
const computeWorkMem = '128MB';

/**
 * Computes the application's summary and stores it, in one statement: every (key, value) of its
 * active installations counted in one hash aggregate, ranked within each key by a window, the most
 * used keys kept with their most common values (ties in byte order, so the answer is stable).
 * `refreshed_at` is the transaction's start, no later than the snapshot counted: a write committed
 * after it may be missing, which is why a summary is recomputed when a write marked it around then
 * (dueTagSummaries). Run it in a transaction: its settings are set for that transaction alone.
 * `statementSeconds`: the statement's own bound (a million installations take seconds).
 */
export async function computeTagSummary(db: Db, applicationId: string, statementSeconds?: number): Promise<TagSummaryRow> {
  // JIT compiling a plan over a million rows costs more than it saves on one run of it.
  await run(
    db,
    sql`select set_config('work_mem', ${computeWorkMem}, true), set_config('jit', 'off', true)
               ${statementSeconds === undefined ? sql`` : sql`, set_config('statement_timeout', ${`${statementSeconds}s`}, true)`}`,
  );
  const [stored] = await rows(
    db,
    sql<TagSummaryRow>`
      with pairs as (
        select t.key, t.value, count(*) as installations
          from installations i cross join lateral jsonb_each_text(i.tags) t
         where i.application_id = ${applicationId} and i.status = 'active' and i.tags <> '{}'
         group by t.key, t.value
      ), ranked as (
        select key, value, installations,
               row_number() over (partition by key order by installations desc, value collate "C") as rank,
               sum(installations) over (partition by key) as key_installations
          from pairs
      ), keys as (
        select key, key_installations::int as installations,
               json_agg(json_build_object('value', value, 'installations', installations::int) order by rank) as "values"
          from ranked where rank <= ${tagSummaryLimits.values}
         group by key, key_installations
         order by key_installations desc, key collate "C"
         limit ${tagSummaryLimits.keys}
      )
      insert into tag_summaries as s (application_id, summary, refreshed_at)
      select ${applicationId}, coalesce(json_agg(k order by k.installations desc, k.key collate "C"), '[]')::jsonb, now() from keys k
      on conflict (application_id) do update set summary = excluded.summary, refreshed_at = excluded.refreshed_at
      returning summary as keys, refreshed_at as "refreshedAt"`,
  );
  return { keys: stored.keys, refreshedAt: stored.refreshedAt && asDate(stored.refreshedAt) };
}

/**
 * The applications whose summary is to be computed: never computed, or marked changed by a write
 * since shortly before its computation (`marginSeconds`: a write's transaction may have begun, and
 * marked, before the computation's snapshot yet committed after it) and computed at least
 * `minAgeSeconds` ago. The oldest first, at most `limit`.
 */
export async function dueTagSummaries(db: Db, options: { minAgeSeconds: number; marginSeconds: number; limit: number }): Promise<string[]> {
  const found = await rows(
    db,
    sql<{ applicationId: string }>`
      select application_id as "applicationId" from tag_summaries
       where refreshed_at is null
          or (changed_at >= refreshed_at - make_interval(secs => ${options.marginSeconds})
              and refreshed_at <= now() - make_interval(secs => ${options.minAgeSeconds}))
       order by refreshed_at nulls first
       limit ${options.limit}`,
  );
  return found.map((row) => row.applicationId);
}

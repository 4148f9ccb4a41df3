// GET /api/v1/tags: an application's tag keys with their most common values, from a summary kept
// per application (db/sql/tags.ts). A worker recomputes a summary its installations' writes marked
// changed, at most every few minutes (worker/tag-summaries.ts); an application asks for its first
// by reading it. The freshness is the answer's `refreshed_at`.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import {
  activeInstallationsAtMost,
  computeTagSummary,
  dueTagSummaries,
  findTagSummary,
  placeTagSummary,
  type TagSummaryRow,
} from '../db/sql/tags.ts';

export type TagSummaryView = components['schemas']['TagSummary'];

/** Where the API asks a worker to compute a summary (worker/queue.ts tagSummaryQueue). */
export type TagSummaryQueue = { request(applicationId: string): Promise<void> };

export const tagSummarySettings = {
  /** A first summary is computed in the request when the application has at most this many active installations (tens of milliseconds). */
  computeInRequestUpTo: 10_000,
  /** A changed summary is recomputed once it is this old: a busy application's is recomputed this often, not at every write. */
  minAgeSeconds: 300,
  /**
   * A write marked within this long before a computation may have committed after its snapshot:
   * the summary is computed again. Longer than any installation write's transaction (a deliver
   * chunk's, which invalidates, lasts at most the provider deadline and its recording).
   */
  marginSeconds: 60,
  /** How often the sweep looks for summaries due (pg-boss cron: every minute). */
  sweepCron: '* * * * *',
  /** Summaries the sweep queues at most per run. */
  sweepLimit: 1_000,
  /** A worker's computation's bound: seconds at a million installations, more for larger ones. */
  statementSeconds: 120,
} as const;

/**
 * The application's summary as stored. None yet: computed now when the application is small,
 * otherwise requested from a worker and answered empty with `refreshed_at` null (what exists).
 */
export async function readTagSummary(em: EntityManager, applicationId: string, queue: TagSummaryQueue): Promise<TagSummaryView> {
  const stored = await findTagSummary(em, applicationId);
  if (stored) return tagSummaryView(stored);
  if (await activeInstallationsAtMost(em, applicationId, tagSummarySettings.computeInRequestUpTo)) {
    return tagSummaryView(await refreshTagSummary(em, applicationId));
  }
  // The placed row makes the sweep compute it too, should the request to the worker be lost.
  await placeTagSummary(em, applicationId);
  await queue.request(applicationId);
  return { data: [], refreshed_at: null };
}

/** Computes and stores the application's summary now (a worker's job; a small application's first read). */
export function refreshTagSummary(em: EntityManager, applicationId: string, statementSeconds?: number): Promise<TagSummaryRow> {
  // A transaction of its own: the computation's settings last for it alone.
  return em.transactional((tx) => computeTagSummary(tx, applicationId, statementSeconds));
}

/** The applications whose summary the sweep should have computed now. */
export function summariesDue(em: EntityManager, settings: { minAgeSeconds: number; marginSeconds: number } = tagSummarySettings): Promise<string[]> {
  return dueTagSummaries(em, { ...settings, limit: tagSummarySettings.sweepLimit });
}

export function tagSummaryView(summary: TagSummaryRow): TagSummaryView {
  return { data: summary.keys, refreshed_at: summary.refreshedAt?.toISOString() ?? null };
}

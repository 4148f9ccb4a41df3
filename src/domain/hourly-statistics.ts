// GET /api/v1/stats/hourly: an application's sends and their outcomes hour by hour, from the rollup
// the counter-moving statements keep (db/sql/statistics.ts). The range's rules and the filling of
// hours nothing was counted in are here, pure.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { hourRows, type HourRow } from '../db/sql/statistics.ts';
import { readDateTime } from './date-times.ts';
import { addFieldError, fieldErrors, validationFailed, type FieldErrors } from './errors.ts';

export type HourlyStatsView = components['schemas']['HourlyStats'];

const hourMs = 3_600_000;
/** The longest range answered: a month of hours, a chart's widest view, at most 745 rows. */
export const maxRangeDays = 31;
/** The range when `from` is left out: the last day before `to`. */
const defaultRangeHours = 24;

/** The hours answered: from the start of the UTC hour that holds `from`, up to `to` (exclusive). */
export type HourRange = { from: Date; to: Date };

/**
 * The range the query asks for: `to` defaults to now and `from` to 24 hours before `to`; each must
 * follow the rule of every date-time a client gives, `to` must be after `from` and at most 31 days
 * after it. A range's error names `to`, or `from` when `to` was left out (the field the caller chose).
 */
export function hourRange(query: { from?: string; to?: string }, now: Date): { range: HourRange } | { errors: FieldErrors } {
  const errors = fieldErrors();
  const read = (field: 'from' | 'to', given: string | undefined): Date | null => {
    if (given === undefined) return null;
    const dateTime = readDateTime(field, given);
    if ('problem' in dateTime) {
      addFieldError(errors, field, dateTime.problem);
      return null;
    }
    return dateTime.at;
  };
  const givenFrom = read('from', query.from);
  const givenTo = read('to', query.to);
  if (Object.keys(errors).length > 0) return { errors };
  const to = givenTo ?? now;
  const from = givenFrom ?? new Date(to.getTime() - defaultRangeHours * hourMs);
  const field = query.to === undefined ? 'from' : 'to';
  if (to.getTime() <= from.getTime()) {
    addFieldError(errors, field, field === 'to' ? 'The to field must be after from.' : 'The from field must be before to (now, when to is left out).');
  } else if (to.getTime() - from.getTime() > maxRangeDays * 24 * hourMs) {
    addFieldError(
      errors,
      field,
      field === 'to' ? `The to field must be at most ${maxRangeDays} days after from.` : `The from field must be at most ${maxRangeDays} days before to (now, when to is left out).`,
    );
  }
  if (Object.keys(errors).length > 0) return { errors };
  return { range: { from: new Date(Math.floor(from.getTime() / hourMs) * hourMs), to } };
}

/** Every hour of the range, oldest first, with what was counted in it (zeros where nothing was). */
export function everyHour(range: HourRange, counted: HourRow[]): HourlyStatsView['data'] {
  const byHour = new Map(counted.map((row) => [row.hour.getTime(), row]));
  const hours: HourlyStatsView['data'] = [];
  for (let at = range.from.getTime(); at < range.to.getTime(); at += hourMs) {
    const row = byHour.get(at);
    hours.push({
      hour: new Date(at).toISOString(),
      sends: row?.sends ?? 0,
      accepted: row?.accepted ?? 0,
      failed: row?.failed ?? 0,
      skipped: row?.skipped ?? 0,
      opens: row?.opens ?? 0,
    });
  }
  return hours;
}

export async function hourlyStatistics(
  em: EntityManager,
  applicationId: string,
  query: { from?: string; to?: string },
  now: Date = new Date(),
): Promise<HourlyStatsView> {
  const asked = hourRange(query, now);
  if ('errors' in asked) throw validationFailed(asked.errors);
  return { data: everyHour(asked.range, await hourRows(em, applicationId, asked.range)) };
}

// Segments: an application's named audiences.
import { sql } from 'kysely';
import type { Audience } from '../entities.ts';
import { newId } from '../ids.ts';
import { type Db, asDate, rows } from './execute.ts';

export type SegmentRow = { name: string; audience: Audience; createdAt: Date; updatedAt: Date };

const segmentColumns = sql`name, audience, created_at as "createdAt", updated_at as "updatedAt"`;
const segmentRow = (row: SegmentRow): SegmentRow => ({ ...row, createdAt: asDate(row.createdAt), updatedAt: asDate(row.updatedAt) });

/** Creates the segment or replaces its audience, in one statement; `created`: no row existed. */
export async function upsertSegment(db: Db, applicationId: string, name: string, audience: Audience): Promise<{ segment: SegmentRow; created: boolean }> {
  const [row] = await rows(
    db,
    sql<SegmentRow & { created: boolean }>`
      insert into segments as s (id, application_id, name, audience, created_at, updated_at)
      values (${newId()}, ${applicationId}, ${name}, ${JSON.stringify(audience)}::jsonb, now(), now())
      on conflict (application_id, name) do update set audience = excluded.audience, updated_at = excluded.updated_at
      returning ${segmentColumns}, (xmax = 0) as created`,
  );
  const { created, ...segment } = row;
  return { segment: segmentRow(segment), created };
}

export async function findSegmentRow(db: Db, applicationId: string, name: string): Promise<SegmentRow | undefined> {
  const [row] = await rows(db, sql<SegmentRow>`select ${segmentColumns} from segments where application_id = ${applicationId} and name = ${name}`);
  return row && segmentRow(row);
}

/** Every segment of the application, by name (byte order: the same whatever the database's collation). */
export async function listSegmentRows(db: Db, applicationId: string): Promise<SegmentRow[]> {
  const found = await rows(db, sql<SegmentRow>`select ${segmentColumns} from segments where application_id = ${applicationId} order by name collate "C"`);
  return found.map(segmentRow);
}

export async function deleteSegmentRow(db: Db, applicationId: string, name: string): Promise<boolean> {
  const deleted = await rows(db, sql<{ id: string }>`delete from segments where application_id = ${applicationId} and name = ${name} returning id`);
  return deleted.length > 0;
}

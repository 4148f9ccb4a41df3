// Segments (named audiences) and the size of an audience. A segment's audience follows the rules
// of any audience (domain/audiences.ts); a send copies it when sent (domain/notifications.ts), so
// changing or deleting a segment never changes whom an earlier send reaches.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { countAudience, type AudienceCount } from '../db/sql/audiences.ts';
import { deleteSegmentRow, findSegmentRow, listSegmentRows, upsertSegment, type SegmentRow } from '../db/sql/segments.ts';
import { audienceErrors, type Audience } from './audiences.ts';
import { notFound, validationFailed } from './errors.ts';

type Schemas = components['schemas'];
export type SegmentView = Schemas['Segment'];
export type CountRequest = Schemas['AudienceCountRequest'];

export const unknownSegmentMessage = (name: string) => `There is no segment named "${name}".`;
export const oneOfCountMessage = 'Give exactly one of audience or segment.';

/** Throws 422 naming `field` (and below) when the audience breaks a rule the document's schema cannot state. */
export function checkAudience(audience: Audience, field: string): void {
  const errors = audienceErrors(audience, field);
  if (Object.keys(errors).length > 0) throw validationFailed(errors);
}

export async function saveSegment(em: EntityManager, applicationId: string, name: string, audience: Audience): Promise<{ segment: SegmentRow; created: boolean }> {
  checkAudience(audience, 'audience');
  return upsertSegment(em, applicationId, name, audience);
}

export async function findSegment(em: EntityManager, applicationId: string, name: string): Promise<SegmentRow> {
  const segment = await findSegmentRow(em, applicationId, name);
  if (!segment) throw notFound();
  return segment;
}

export const listSegments = (em: EntityManager, applicationId: string): Promise<SegmentRow[]> => listSegmentRows(em, applicationId);

export async function deleteSegment(em: EntityManager, applicationId: string, name: string): Promise<void> {
  if (!(await deleteSegmentRow(em, applicationId, name))) throw notFound();
}

/** The audience a segment names, or 422 naming `field` when the application has no such segment. */
export async function segmentAudience(em: EntityManager, applicationId: string, name: string, field: string): Promise<Audience> {
  const segment = await findSegmentRow(em, applicationId, name);
  if (!segment) throw validationFailed({ [field]: [unknownSegmentMessage(name)] });
  return segment.audience;
}

/** Whom a visible push to the audience or segment would reach now (db/sql/audiences.ts countAudience). */
export async function countAudienceOf(em: EntityManager, applicationId: string, request: CountRequest): Promise<AudienceCount> {
  const given = (request.audience === undefined ? 0 : 1) + (request.segment === undefined ? 0 : 1);
  if (given !== 1) throw validationFailed({ body: [oneOfCountMessage] });
  if (request.audience !== undefined) checkAudience(request.audience, 'audience');
  // An unknown segment is 404 here, as an unknown resource a body names is elsewhere (an event's
  // delivery); a send's is 422 naming recipients.segment (issue 40 fixes that one).
  const audience = request.audience ?? (await findSegment(em, applicationId, request.segment!)).audience;
  // In a transaction of its own: the count sets its memory for that transaction alone.
  return em.transactional((tx) => countAudience(tx, applicationId, audience));
}

export function segmentView(segment: SegmentRow): SegmentView {
  return {
    name: segment.name,
    audience: segment.audience,
    created_at: segment.createdAt.toISOString(),
    updated_at: segment.updatedAt.toISOString(),
  };
}

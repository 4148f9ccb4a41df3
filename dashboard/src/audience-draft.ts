// An audience as a form edits it (text the operator types, kept as typed), turned into the API's
// `Audience` when it names something to match.
import type { Audience, Platform } from './api.ts';

export type TagOp = 'eq' | 'ne' | 'in' | 'exists' | 'not_exists';
export type TagDraft = { key: string; op: TagOp; value: string };
export type AudienceDraft = { all: boolean; platforms: Platform[]; tags: TagDraft[]; locales: string; activeWithinDays: string };

export const emptyAudience: AudienceDraft = { all: false, platforms: [], tags: [], locales: '', activeWithinDays: '' };
export const opLabels: Record<TagOp, string> = { eq: 'is', ne: 'is not', in: 'is one of', exists: 'is set', not_exists: 'is not set' };

/** "a, b c" → ['a', 'b', 'c']: lists are typed separated by commas, spaces or lines. */
export const splitList = (text: string): string[] => [...new Set(text.split(/[\s,]+/).filter(Boolean))];

/** The API's audience for a draft; null when it matches nothing yet (the API would refuse an empty one). */
export function toAudience(draft: AudienceDraft): Audience | null {
  if (draft.all) return { all: true };
  const audience: Audience = {};
  if (draft.platforms.length) audience.platforms = draft.platforms;
  const tags = draft.tags
    .filter((tag) => tag.key.trim())
    .map((tag) => {
      const key = tag.key.trim();
      if (tag.op === 'in') return { key, op: tag.op, values: splitList(tag.value) };
      if (tag.op === 'eq' || tag.op === 'ne') return { key, op: tag.op, value: tag.value };
      return { key, op: tag.op };
    });
  if (tags.length) audience.tags = tags;
  const locales = splitList(draft.locales);
  if (locales.length) audience.locales = locales;
  // Sent as typed: a value the API refuses comes back as a field error beside the box.
  if (draft.activeWithinDays.trim()) audience.active_within_days = Number(draft.activeWithinDays);
  return Object.keys(audience).length ? audience : null;
}

export function fromAudience(audience: Audience): AudienceDraft {
  return {
    all: audience.all === true,
    platforms: audience.platforms ?? [],
    tags: (audience.tags ?? []).map((tag) => ({ key: tag.key, op: tag.op, value: tag.op === 'in' ? (tag.values ?? []).join(', ') : (tag.value ?? '') })),
    locales: (audience.locales ?? []).join(', '),
    activeWithinDays: audience.active_within_days ? String(audience.active_within_days) : '',
  };
}

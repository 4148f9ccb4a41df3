// A notification as the compose form holds it (text as typed) and the send it becomes: pure, so
// that what the page sends is plain to read. Only what cannot be sent at all (data that is not a
// JSON object) is refused here; everything else goes to the API, whose field errors the form shows.
import type { NotificationSend } from './api.ts';
import { emptyAudience, splitList, toAudience, type AudienceDraft } from './audience-draft.ts';
import type { FieldErrorsOf } from './components.tsx';

export type RecipientKind = 'users' | 'audience' | 'segment';
export type LocalizationDraft = { tag: string; title: string; body: string };
export type MessageDraft = {
  kind: RecipientKind;
  userIds: string;
  audience: AudienceDraft;
  segment: string;
  title: string;
  body: string;
  imageUrl: string;
  actionUrl: string;
  localizations: LocalizationDraft[];
  data: string;
  priority: '' | 'normal' | 'high';
  ttl: string;
  collapseId: string;
  /** A `datetime-local` value: the browser's own time zone. */
  sendAt: string;
  localTime: string;
  timezone: string;
  throttle: string;
};

/** A message with nothing filled in: an audience to build, no content, no options. */
export const emptyDraft: MessageDraft = {
  kind: 'audience',
  userIds: '',
  audience: emptyAudience,
  segment: '',
  title: '',
  body: '',
  imageUrl: '',
  actionUrl: '',
  localizations: [],
  data: '',
  priority: '',
  ttl: '',
  collapseId: '',
  sendAt: '',
  localTime: '',
  timezone: '',
  throttle: '',
};

export type Content = Omit<NotificationSend, 'recipients'>;
export type Built = { content: Content; recipients: NotificationSend['recipients'] | null; problems: FieldErrorsOf };

const orNull = (text: string) => (text.trim() ? text.trim() : undefined);
const whole = (text: string) => (text.trim() ? Number(text.trim()) : undefined);

/** The content and options of a draft, as sent with any recipients (a test send's too). */
export function contentOf(draft: MessageDraft): { content: Content; problems: FieldErrorsOf } {
  const problems: FieldErrorsOf = {};
  const localizations = Object.fromEntries(
    draft.localizations.filter((l) => l.tag.trim()).map((l) => [l.tag.trim(), { title: orNull(l.title), body: orNull(l.body) }]),
  );
  let data: Content['data'];
  if (draft.data.trim()) {
    try {
      const parsed: unknown = JSON.parse(draft.data);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) data = parsed as NonNullable<Content['data']>;
      else problems.data = ['The data must be a JSON object, such as {"order_id": "1042"}.'];
    } catch (error) {
      problems.data = [`The data is not JSON: ${(error as Error).message}`];
    }
  }
  const options: NonNullable<Content['options']> = {};
  if (draft.priority) options.priority = draft.priority;
  if (whole(draft.ttl) !== undefined) options.ttl = whole(draft.ttl);
  if (orNull(draft.collapseId)) options.collapse_id = draft.collapseId.trim();
  if (draft.sendAt) {
    const at = new Date(draft.sendAt);
    if (Number.isNaN(at.getTime())) problems['options.send_at'] = ['Give a date and a time.'];
    else options.send_at = at.toISOString();
  }
  if (draft.localTime) options.local_time = draft.localTime;
  if (orNull(draft.timezone)) options.timezone = draft.timezone.trim();
  if (whole(draft.throttle) !== undefined) options.throttle_per_minute = whole(draft.throttle);
  const content: Content = {
    notification: {
      title: orNull(draft.title),
      body: orNull(draft.body),
      image_url: orNull(draft.imageUrl),
      action_url: orNull(draft.actionUrl),
      ...(Object.keys(localizations).length ? { localizations } : {}),
    },
    ...(data ? { data } : {}),
    ...(Object.keys(options).length ? { options } : {}),
  };
  return { content, problems };
}

/** The whole send; `recipients` null when there are none yet (said beside the recipients). */
export function buildSend(draft: MessageDraft): Built {
  const { content, problems } = contentOf(draft);
  let recipients: Built['recipients'] = null;
  if (draft.kind === 'users') {
    const userIds = splitList(draft.userIds);
    if (userIds.length) recipients = { user_ids: userIds };
    else problems['recipients.user_ids'] = ['Paste at least one user id.'];
  } else if (draft.kind === 'segment') {
    if (draft.segment) recipients = { segment: draft.segment };
    else problems['recipients.segment'] = ['Choose a segment.'];
  } else {
    const audience = toAudience(draft.audience);
    if (audience) recipients = { audience };
    else problems['recipients.audience'] = ['Add a condition, or tick every installation.'];
  }
  return { content, recipients, problems };
}

/**
 * One Idempotency-Key per composed message: the same body sends with the same key (so a second
 * click, or a retry after a lost answer, returns the first notification), a changed one with a new key.
 */
export function idempotencyKeys(newKey: () => string = () => globalThis.crypto.randomUUID()): (body: NotificationSend) => string {
  let last: { json: string; key: string } | null = null;
  return (body) => {
    const json = JSON.stringify(body);
    if (last?.json !== json) last = { json, key: newKey() };
    return last.key;
  };
}

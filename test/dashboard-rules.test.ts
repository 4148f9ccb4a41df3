// The dashboard's own rules, on plain values: what the compose form sends, the Idempotency-Key it
// sends with, an audience as the editor holds it, and a running send's progress, due hours and
// back-off.
import { fromAudience, toAudience, emptyAudience, type AudienceDraft } from '../dashboard/src/audience-draft.ts';
import { buildSend, emptyDraft, idempotencyKeys, type MessageDraft } from '../dashboard/src/compose.ts';
import { dueByHour, followMs, nextReadMs, progressOf, wavesDueByHour } from '../dashboard/src/progress.ts';
import type { Notification } from '../dashboard/src/api.ts';

const draft: MessageDraft = { ...emptyDraft, audience: { ...emptyAudience, tags: [{ key: 'plan', op: 'eq', value: 'pro' }] }, title: 'Sale' };

describe('the send a composed message becomes', () => {
  test('an audience filter, content without empty fields, and no options when none were given', () => {
    expect(buildSend(draft)).toEqual({
      content: { notification: { title: 'Sale', body: undefined, image_url: undefined, action_url: undefined } },
      recipients: { audience: { tags: [{ key: 'plan', op: 'eq', value: 'pro' }] } },
      problems: {},
    });
  });

  test('user ids pasted with commas, spaces and lines, duplicates once', () => {
    expect(buildSend({ ...draft, kind: 'users', userIds: 'ann, bob\ncat  ann' }).recipients).toEqual({ user_ids: ['ann', 'bob', 'cat'] });
    expect(buildSend({ ...draft, kind: 'users', userIds: ' ' }).problems).toEqual({ 'recipients.user_ids': ['Paste at least one user id.'] });
  });

  test('options as typed: numbers as numbers, send at in UTC, local time with its zone', () => {
    const { content } = buildSend({
      ...draft,
      priority: 'high',
      ttl: '3600',
      collapseId: ' sale ',
      sendAt: '2030-01-02T09:30',
      localTime: '09:00',
      timezone: 'Europe/Berlin',
      throttle: '600',
      data: '{"campaign": "winter"}',
      localizations: [{ tag: 'fr', title: 'Soldes', body: '' }, { tag: '', title: 'ignored', body: '' }],
    });
    expect(content.options).toEqual({
      priority: 'high',
      ttl: 3600,
      collapse_id: 'sale',
      send_at: new Date('2030-01-02T09:30').toISOString(),
      local_time: '09:00',
      timezone: 'Europe/Berlin',
      throttle_per_minute: 600,
    });
    expect(content.data).toEqual({ campaign: 'winter' });
    expect(content.notification.localizations).toEqual({ fr: { title: 'Soldes', body: undefined } });
  });

  test('data that is not a JSON object is refused beside its field, before anything is sent', () => {
    expect(buildSend({ ...draft, data: '[1, 2]' }).problems).toEqual({ data: ['The data must be a JSON object, such as {"order_id": "1042"}.'] });
    expect(buildSend({ ...draft, data: '{oops' }).problems.data?.[0]).toMatch(/^The data is not JSON: /);
  });

  test('an audience with no condition is no recipients yet', () => {
    expect(buildSend({ ...draft, audience: emptyAudience })).toMatchObject({ recipients: null, problems: { 'recipients.audience': [expect.any(String)] } });
  });
});

test('one Idempotency-Key per composed message: the same body keeps its key, a changed one gets a new key', () => {
  let n = 0;
  const keyFor = idempotencyKeys(() => `key-${++n}`);
  const body = { recipients: { user_ids: ['ann'] }, notification: { title: 'Hi' } };
  expect(keyFor(body)).toBe('key-1');
  expect(keyFor({ ...body })).toBe('key-1');
  expect(keyFor({ ...body, notification: { title: 'Hello' } })).toBe('key-2');
  expect(keyFor(body)).toBe('key-3');
});

test("an audience round-trips through the editor's draft", () => {
  const audience = {
    platforms: ['android' as const],
    tags: [
      { key: 'plan', op: 'in' as const, values: ['pro', 'team'] },
      { key: 'beta', op: 'exists' as const },
    ],
    locales: ['de', 'pt-BR'],
    active_within_days: 30,
  };
  expect(toAudience(fromAudience(audience))).toEqual(audience);
  expect(toAudience(fromAudience({ all: true }))).toEqual({ all: true });
  const blankKey: AudienceDraft = { ...emptyAudience, tags: [{ key: ' ', op: 'eq', value: 'x' }] };
  expect(toAudience(blankKey)).toBeNull();
});

const running = (change: Partial<Notification>, statistics: Partial<Notification['statistics']> = {}): Notification =>
  ({
    status: 'processing',
    target_users: 0,
    completed_at: null,
    statistics: { users: 0, installations: 0, accepted: 0, received: 0, displayed: 0, opened: 0, failed: 0, skipped: 0, ...statistics },
    ...change,
  }) as Notification;

describe("a running send's progress", () => {
  const walking = (progress: Partial<NonNullable<Notification['progress']>>) => ({ installations: null, walked: 0, walk_ended_at: null, waves: [], ...progress });

  test("a broadcast's walk in installations walked of those it has to read, its pushes of the installations walked", () => {
    const progress = progressOf(
      running({ audience: { all: true }, target_users: 8, progress: walking({ installations: 9, walked: 4 }) }, { users: 3, installations: 4, accepted: 2, failed: 1 }),
    );
    expect(progress).toEqual({
      walk: { walked: 4, of: 9, percent: 44 },
      pushes: { installations: 4, accepted: 2, failed: 1, skipped: 0, pending: 1, percent: 75 },
    });
  });

  test('a walk is 100 % only once it has ended, whatever it walked beyond its count', () => {
    expect(progressOf(running({ progress: walking({ installations: 4, walked: 5 }) })).walk).toEqual({ walked: 5, of: 4, percent: 99 });
    expect(progressOf(running({ progress: walking({ installations: 4, walked: 3, walk_ended_at: '2030-01-02T09:00:00.000Z' }) })).walk?.percent).toBe(100);
    expect(progressOf(running({ progress: walking({ installations: 0 }) })).walk?.percent).toBe(0);
  });

  test('no walk for a send to user ids, nor for a broadcast whose audience is not counted yet', () => {
    expect(progressOf(running({ target_users: 3 }, { users: 3 })).walk).toBeNull();
    expect(progressOf(running({ audience: { all: true }, progress: walking({ walked: 1000 }) })).walk).toBeNull();
  });

  test("a local-time broadcast's installations still to walk, by the UTC hour of their wave, ended waves left out", () => {
    const wave = (due_at: string, installations: number, walked: number, ended_at: string | null = null) => ({ due_at, installations, walked, ended_at });
    expect(
      wavesDueByHour([
        wave('2030-01-02T08:00:00.000Z', 5, 5, '2030-01-02T08:00:01.000Z'),
        wave('2030-01-02T15:45:00.000Z', 3, 0),
        wave('2030-01-02T09:00:00.000Z', 10, 4),
        wave('2030-01-02T15:00:00.000Z', 2, 0),
      ]),
    ).toEqual([
      { hour: '2030-01-02T09:00:00Z', pushes: 6 },
      { hour: '2030-01-02T15:00:00Z', pushes: 5 },
    ]);
  });

  test('pending deliveries counted by the UTC hour they are due, those due now first', () => {
    expect(
      dueByHour([
        { scheduled_for: '2030-01-02T15:59:00.000Z' },
        { scheduled_for: null },
        { scheduled_for: '2030-01-02T09:00:00.000Z' },
        { scheduled_for: '2030-01-02T15:00:00.000Z' },
      ]),
    ).toEqual([
      { hour: null, pushes: 1 },
      { hour: '2030-01-02T09:00:00Z', pushes: 1 },
      { hour: '2030-01-02T15:00:00Z', pushes: 2 },
    ]);
  });

  test('read soon while it moves, twice as long after each read that found nothing new, never once it has ended', () => {
    expect(nextReadMs(false, true, 8000)).toBe(followMs.first);
    expect(nextReadMs(false, false, 1000)).toBe(2000);
    expect(nextReadMs(false, false, 2000)).toBe(4000);
    expect(nextReadMs(false, false, 20_000)).toBe(followMs.longest);
    expect(nextReadMs(true, true, 1000)).toBeNull();
  });
});

// GET /api/v1/tags against real Postgres: the keys of the application's active installations with
// their most common values and counts (top 20 values, at most 100 keys, ties in byte order), served
// from a stored summary; the writes that can change it mark it, and only a marked one is due for
// the worker; a large application's first read is answered empty and computed by a worker job.
import request from 'supertest';
import type { PgBoss } from 'pg-boss';
import { invalidateInstallations } from '../src/db/sql/installations.ts';
import { summariesDue, tagSummarySettings } from '../src/domain/tag-summaries.ts';
import { startBoss } from '../src/worker/queue.ts';
import { computeSummary, startTagSummaries } from '../src/worker/tag-summaries.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { waitFor } from './support/receiver.ts';
import { silentLogger } from './support/simulators.ts';

let harness: Harness;
let workerBoss: PgBoss;

beforeAll(async () => {
  harness = await startHarness({ queueSchema: 'tag_summaries_test' });
  workerBoss = await startBoss(harness.url, silentLogger, { worker: true, schema: 'tag_summaries_test' });
  await startTagSummaries(workerBoss, harness.orm, silentLogger);
});
afterAll(async () => {
  await workerBoss.stop({ graceful: false, close: true });
  await harness.close();
});

type Summary = { data: { key: string; installations: number; values: { value: string; installations: number }[] }[]; refreshed_at: string | null };

async function newApp(name: string) {
  const application = await harness.newApplication(name);
  const token = await application.token(['*']);
  const call = (method: 'get' | 'put' | 'patch' | 'delete', path: string, body?: object) => {
    const req = request(harness.app)[method](path).set('Authorization', `Bearer ${token}`);
    return body === undefined ? req : req.send(body);
  };
  return {
    id: application.id,
    token: application.token,
    /** Without tags: the stored ones are kept. */
    register: async (installationId: string, tags?: Record<string, string>) => {
      const res = await call('put', `/api/v1/installations/${installationId}`, { platform: 'android', provider: { identifier: `tok-${name}-${installationId}` }, ...(tags && { tags }) });
      expect([200, 201]).toContain(res.status);
    },
    patch: (installationId: string, tags: Record<string, string | null>) => call('patch', `/api/v1/installations/${installationId}`, { tags }).expect(200),
    remove: (installationId: string) => call('delete', `/api/v1/installations/${installationId}`).expect(204),
    tags: async (): Promise<Summary> => (await call('get', '/api/v1/tags').expect(200)).body,
  };
}

/** Due now, whatever its age, and with no margin: only a write after the computation makes it due. */
const dueNow = async () => summariesDue(harness.orm.em.fork(), { minAgeSeconds: 0, marginSeconds: 0 });

test("a small application's first read computes its summary: keys by installations, values by count, active installations only", async () => {
  const app = await newApp('tags-first');
  const other = await newApp('tags-other');
  await app.register('a', { plan: 'pro', country: 'de' });
  await app.register('b', { plan: 'free', country: 'de' });
  await app.register('c', { plan: 'free', country: 'fr', beta: 'yes' });
  await app.register('d', { plan: 'free' });
  await app.register('gone', { plan: 'free', team: 'red' });
  await other.register('x', { secret: 'theirs', plan: 'enterprise' });
  // An invalid installation is not counted: an audience never reaches it.
  const [row] = await harness.orm.em.fork().execute<{ id: string }[]>(`select id from installations where application_id = ? and installation_id = 'gone'`, [app.id]);
  await invalidateInstallations(harness.orm.em.fork(), [{ installationRowId: row.id, providerIdentifier: 'tok-tags-first-gone', reason: 'UNREGISTERED', providerTimestamp: null }]);

  const before = Date.now();
  const summary = await app.tags();
  expect(summary.data).toEqual([
    { key: 'plan', installations: 4, values: [{ value: 'free', installations: 3 }, { value: 'pro', installations: 1 }] },
    { key: 'country', installations: 3, values: [{ value: 'de', installations: 2 }, { value: 'fr', installations: 1 }] },
    { key: 'beta', installations: 1, values: [{ value: 'yes', installations: 1 }] },
  ]);
  expect(Date.parse(summary.refreshed_at!)).toBeLessThanOrEqual(Date.now());
  expect(Date.parse(summary.refreshed_at!)).toBeGreaterThan(before - 5_000);
  // Served from the summary: the same answer, computed at the same time.
  expect(await app.tags()).toEqual(summary);
});

test('each key keeps its 20 most common values (ties in byte order), and at most 100 keys, the most used', async () => {
  const app = await newApp('tags-cut');
  // Key `many`: value v0 on 25 installations down to v24 on 1; `Z`/`a`/`b` tie at 2 installations each.
  const installations: [string, Record<string, string>][] = [];
  for (let value = 0; value < 25; value++) {
    for (let n = 0; n < 25 - value; n++) installations.push([`many-${value}-${n}`, { many: `v${value}` }]);
  }
  for (const [i, value] of ['b', 'a', 'Z', 'b', 'a', 'Z'].entries()) installations.push([`tie-${i}`, { tie: value }]);
  // 101 more keys on two installations (64 tags at most each): one installation each, after `many` and `tie`.
  installations.push(['wide-1', Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${String(i).padStart(3, '0')}`, 'x']))]);
  installations.push(['wide-2', Object.fromEntries(Array.from({ length: 37 }, (_, i) => [`k${String(64 + i).padStart(3, '0')}`, 'x']))]);
  for (const [id, tags] of installations) await app.register(id, tags);

  const { data } = await app.tags();
  expect(data).toHaveLength(100);
  const many = data.find((key) => key.key === 'many')!;
  expect(many.installations).toBe((25 * 26) / 2);
  expect(many.values).toEqual(Array.from({ length: 20 }, (_, value) => ({ value: `v${value}`, installations: 25 - value })));
  // Equal counts in byte order: upper case before lower case.
  expect(data.find((key) => key.key === 'tie')!.values).toEqual([
    { value: 'Z', installations: 2 },
    { value: 'a', installations: 2 },
    { value: 'b', installations: 2 },
  ]);
  expect(data.slice(0, 2).map((key) => key.key)).toEqual(['many', 'tie']);
  // The 101 keys of one installation each tie: the first 98 in byte order are kept.
  expect(data.slice(2).map((key) => key.key)).toEqual(Array.from({ length: 98 }, (_, i) => `k${String(i).padStart(3, '0')}`));
});

test('a write that can change the summary makes it due; the computation brings the change and a later refreshed_at', async () => {
  const app = await newApp('tags-refresh');
  await app.register('a', { plan: 'pro' });
  await app.register('b', { plan: 'free' });
  await app.register('untagged');
  const first = await app.tags();
  expect(await dueNow()).not.toContain(app.id);

  // A registration without tags of an untagged installation changes nothing.
  await app.register('untagged');
  expect(await dueNow()).not.toContain(app.id);

  await app.patch('b', { plan: 'pro', team: 'red' });
  expect(await dueNow()).toContain(app.id);
  // Until computed again, the stored summary is served.
  expect(await app.tags()).toEqual(first);
  // A due summary is computed at most every few minutes.
  expect(await summariesDue(harness.orm.em.fork(), { ...tagSummarySettings, marginSeconds: 0 })).not.toContain(app.id);

  await computeSummary(harness.orm, silentLogger, app.id);
  const second = await app.tags();
  expect(second.data).toEqual([
    { key: 'plan', installations: 2, values: [{ value: 'pro', installations: 2 }] },
    { key: 'team', installations: 1, values: [{ value: 'red', installations: 1 }] },
  ]);
  expect(Date.parse(second.refreshed_at!)).toBeGreaterThan(Date.parse(first.refreshed_at!));
  expect(await dueNow()).not.toContain(app.id);

  // Deleting a tagged installation marks it too.
  await app.remove('a');
  expect(await dueNow()).toContain(app.id);
  await computeSummary(harness.orm, silentLogger, app.id);
  expect((await app.tags()).data).toEqual([
    { key: 'plan', installations: 1, values: [{ value: 'pro', installations: 1 }] },
    { key: 'team', installations: 1, values: [{ value: 'red', installations: 1 }] },
  ]);
});

test('a large application is answered empty with refreshed_at null at first, and a worker job computes its summary', async () => {
  const app = await newApp('tags-large');
  const count = tagSummarySettings.computeInRequestUpTo + 1;
  await harness.orm.em.fork().execute(
    `insert into installations (id, application_id, installation_id, platform, provider_identifier, status, permission, device, tags,
                                registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
     select gen_random_uuid(), ?, 'large-' || n, 'ios', 'tok-large-' || n, 'active', 'authorized', '{}',
            jsonb_build_object('plan', case when n % 10 = 0 then 'pro' else 'free' end), now(), now(), now(), now()
       from generate_series(1, ?) n`,
    [app.id, count],
  );
  expect(await app.tags()).toEqual({ data: [], refreshed_at: null });
  const summary = await waitFor(() => app.tags(), (answer) => answer.refreshed_at !== null, 20_000);
  expect(summary.data).toEqual([
    { key: 'plan', installations: count, values: [{ value: 'free', installations: count - Math.floor(count / 10) }, { value: 'pro', installations: Math.floor(count / 10) }] },
  ]);
});

test('listing tags needs notifications:read', async () => {
  const app = await newApp('tags-ability');
  const appToken = await app.token(['installations:write', 'installations:read', 'events:write']);
  const res = await request(harness.app).get('/api/v1/tags').set('Authorization', `Bearer ${appToken}`);
  expect(res.status).toBe(403);
  const reader = await app.token(['notifications:read']);
  expect((await request(harness.app).get('/api/v1/tags').set('Authorization', `Bearer ${reader}`)).body).toEqual({ data: [], refreshed_at: expect.any(String) });
});

// GET /api/v1/stats/hourly end to end, against the simulators: the hourly rollup that the
// counter-moving statements keep (a send, the fanout's skips, a batch's outcomes, a walk's, an
// event's first `opened`) answers what the notifications' statistics say, every hour of the range
// present with zeros where nothing happened; replays count nothing; the range's rules are 422s.
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { android, ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';

let pipeline: Pipeline;

beforeAll(async () => {
  pipeline = await startPipeline();
}, 120_000);
afterAll(async () => {
  await pipeline.close();
});
afterEach(() => {
  pipeline.apns.setRules([]);
});

const hourMs = 3_600_000;
type Hour = { hour: string; sends: number; accepted: number; failed: number; skipped: number; opens: number };

const hourly = (bearer: string, query: Record<string, string> = {}) =>
  request(pipeline.harness.app).get('/api/v1/stats/hourly').query(query).set('Authorization', `Bearer ${bearer}`);

const totals = (hours: Hour[]) =>
  hours.reduce(
    (sum, hour) => ({
      sends: sum.sends + hour.sends,
      accepted: sum.accepted + hour.accepted,
      failed: sum.failed + hour.failed,
      skipped: sum.skipped + hour.skipped,
      opens: sum.opens + hour.opens,
    }),
    { sends: 0, accepted: 0, failed: 0, skipped: 0, opens: 0 },
  );

async function report(app: PipelineApplication, delivery: { id: string; installation_id: string }, type: string) {
  const res = await request(pipeline.harness.app)
    .post('/api/v1/events')
    .set('Authorization', `Bearer ${app.client}`)
    .send({ event_id: randomUUID(), delivery_id: delivery.id, installation_id: delivery.installation_id, type, occurred_at: new Date().toISOString() });
  expect([200, 201]).toContain(res.status);
}

test('after sends with every outcome and open events, the hours add up to the statistics, zero hours included', async () => {
  const started = new Date();
  pipeline.apns.setRules([{ prefix: 'dead-', reason: 'Unregistered' }]);
  const app = await pipeline.newApplication();
  const bystander = await pipeline.newApplication();
  await app.registerAll([
    ['hs-ok', ios('hs-live-1', 'hs-user-1')],
    ['hs-dead', ios('dead-hs-1', 'hs-user-1')],
    ['hs-denied', android('hs-denied-1', 'hs-user-2', { permission: 'denied' })],
  ]);
  const body = { recipients: { user_ids: ['hs-user-1', 'hs-user-2'] }, notification: { title: 'Hi' } };
  const first = await request(pipeline.harness.app).post('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).set('Idempotency-Key', 'hs-once').send(body);
  expect(first.status).toBe(202);
  // A replay is the same send: nothing counted twice.
  const replay = await request(pipeline.harness.app).post('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).set('Idempotency-Key', 'hs-once').send(body);
  expect(replay.body.meta.accepted).toBe(false);
  // Ended before the broadcast starts, which then finds the dead token invalidated (asserted below).
  const firstSettled = await app.settled(first.body.data.id);
  // A send to an audience: its walk writes the deliveries and their skips.
  const broadcast = await app.send({ recipients: { audience: { all: true } }, notification: { title: 'Everyone' } });

  const notifications = [firstSettled, await app.settled(broadcast)];
  // Opened twice (two reports) on one delivery, received on another: one open.
  const [pushed] = (await app.deliveries(first.body.data.id)).filter((delivery) => delivery.state === 'accepted');
  await report(app, pushed, 'opened');
  await report(app, pushed, 'opened');
  await report(app, pushed, 'received');
  const statistics = await Promise.all(notifications.map(async (notification) => (await app.notification(notification.id)).statistics));

  const from = new Date(started.getTime() - 3 * hourMs);
  const to = new Date();
  const res = await hourly(app.server, { from: from.toISOString(), to: to.toISOString() });
  expect(res.status).toBe(200);
  const hours: Hour[] = res.body.data;
  // Every hour from the one holding `from` to the one holding `to`, oldest first.
  const firstHour = Math.floor(from.getTime() / hourMs) * hourMs;
  expect(hours.map((hour) => hour.hour)).toEqual(
    Array.from({ length: Math.floor((to.getTime() - firstHour - 1) / hourMs) + 1 }, (_, i) => new Date(firstHour + i * hourMs).toISOString()),
  );
  // Nothing happened before the test began.
  const startedHour = Math.floor(started.getTime() / hourMs) * hourMs;
  for (const hour of hours.filter((hour) => Date.parse(hour.hour) < startedHour)) {
    expect(hour).toEqual({ hour: hour.hour, sends: 0, accepted: 0, failed: 0, skipped: 0, opens: 0 });
  }
  const sum = (key: 'accepted' | 'failed' | 'skipped') => statistics.reduce((total, counted) => total + counted[key], 0);
  expect(totals(hours)).toEqual({ sends: 2, accepted: sum('accepted'), failed: sum('failed'), skipped: sum('skipped'), opens: 1 });
  // The dead token failed the first send and was invalidated: the broadcast did not consider it.
  expect(totals(hours)).toEqual({ sends: 2, accepted: 2, failed: 1, skipped: 2, opens: 1 });

  // Another application's hours are its own.
  expect(totals((await hourly(bystander.server, { from: from.toISOString(), to: to.toISOString() })).body.data)).toEqual({
    sends: 0, accepted: 0, failed: 0, skipped: 0, opens: 0,
  });
}, 60_000);

test('without from and to: the 24 hours before now, the current hour last', async () => {
  const app = await pipeline.newApplication();
  const before = Date.now();
  const res = await hourly(app.server);
  expect(res.status).toBe(200);
  const hours: Hour[] = res.body.data;
  expect([24, 25]).toContain(hours.length);
  expect(Date.parse(hours.at(-1)!.hour)).toBe(Math.floor(before / hourMs) * hourMs);
  expect(Date.parse(hours[0].hour)).toBe(Math.floor((before - 24 * hourMs) / hourMs) * hourMs);
});

test.each<[string, Record<string, string>, string]>([
  ['a range over 31 days', { from: '2026-11-01T00:00:00Z', to: '2026-12-02T00:00:01Z' }, 'to'],
  ['from over 31 days ago, to left out', { from: '2020-01-01T00:00:00Z' }, 'from'],
  ['to before from', { from: '2026-12-02T00:00:00Z', to: '2026-12-01T00:00:00Z' }, 'to'],
  ['to equal to from', { from: '2026-12-02T00:00:00Z', to: '2026-12-02T00:00:00Z' }, 'to'],
  ['a from that is not a date-time', { from: 'yesterday' }, 'from'],
  ['a to without an offset', { to: '2026-12-02T00:00:00' }, 'to'],
  ['a from in year 0000', { from: '0000-12-31T00:00:00Z', to: '0001-01-01T10:00:00Z' }, 'from'],
  ['a to that is a leap second', { from: '2026-12-31T00:00:00Z', to: '2026-12-31T23:59:60Z' }, 'to'],
  ['an unknown parameter', { days: '7' }, 'days'],
])('%s is 422 naming %s', async (_, query, field) => {
  const app = await pipeline.newApplication();
  const res = await hourly(app.server, query);
  expect(res.status).toBe(422);
  expect(Object.keys(res.body.errors)).toEqual([field]);
});

test('a range of exactly 31 days answers 745 hours at most; the ability is notifications:read', async () => {
  const app = await pipeline.newApplication();
  const res = await hourly(app.server, { from: '2026-11-01T00:30:00Z', to: '2026-12-02T00:30:00Z' });
  expect(res.status).toBe(200);
  expect(res.body.data).toHaveLength(745);
  expect((await hourly(app.client)).status).toBe(403);
});

// Throttled sends (`options.throttle_per_minute`), end to end through the real APNs and FCM clients
// and the simulators: the pushes arrive at the pace asked, evenly, whichever deliver job of which
// platform sends them; the statistics end equal to the deliveries; a cancel stops the pace at once.
import request from 'supertest';
import { reserveSlots } from '../src/db/sql/throttles.ts';
import { reservationLookaheadMs } from '../src/domain/throttle.ts';
import { recountedStatistics } from './support/deliveries.ts';
import { android, ios, jobsOf, startPipeline, type Pipeline } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

let pipeline: Pipeline;
beforeAll(async () => {
  pipeline = await startPipeline();
});
afterAll(() => pipeline.close());

/** When each push to a token starting with `prefix` reached its simulator (epoch ms), in order. */
const arrivals = (prefix: string): number[] =>
  [...pipeline.apns.received, ...pipeline.fcm.received]
    .filter((push) => push.token?.startsWith(prefix))
    .map((push) => push.at)
    .sort((a, b) => a - b);

/** The most arrivals in any window of `ms` (each window starting at an arrival). */
const mostWithin = (times: number[], ms: number): number =>
  Math.max(...times.map((start) => times.filter((at) => at >= start && at < start + ms).length));

/** `users` users, each with an iPhone and an Android phone, their tokens starting with `prefix`. */
async function devices(app: Awaited<ReturnType<Pipeline['newApplication']>>, prefix: string, users: number): Promise<string[]> {
  const ids = Array.from({ length: users }, (_, i) => `${prefix}-user-${i}`);
  await app.registerAll(
    ids.flatMap((user, i): [string, Record<string, unknown>][] => [
      [`${prefix}-ios-${i}`, ios(`${prefix}-ios-${String(i).padStart(3, '0')}`, user)],
      [`${prefix}-android-${i}`, android(`${prefix}-android-${String(i).padStart(3, '0')}`, user)],
    ]),
  );
  return ids;
}

test.concurrent('40 pushes at 240 a minute arrive evenly, at that rate, on both platforms, retries within the pace; the statistics end equal to the deliveries', async () => {
  const app = await pipeline.newApplication();
  const users = await devices(app, 'thr-pace', 20);
  // One push per platform refused at first (the provider unavailable): their retries take slots of
  // the same pace.
  pipeline.apns.setRules([{ prefix: 'thr-pace-ios-003', reason: 'ServiceUnavailable' }]);
  pipeline.fcm.setRules([{ prefix: 'thr-pace-android-007', reason: 'UNAVAILABLE' }]);
  const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'Paced' }, options: { throttle_per_minute: 240 } });
  const refused = (prefix: string) => [...pipeline.apns.received, ...pipeline.fcm.received].filter((push) => push.token?.startsWith(prefix) && push.status !== 200);
  await waitFor(() => [refused('thr-pace-ios-003'), refused('thr-pace-android-007')], (both) => both.every((pushes) => pushes.length > 0), 25_000);
  pipeline.apns.setRules([]);
  pipeline.fcm.setRules([]);

  // 40 pushes and the retries, four a second: about 11 s.
  const done = await app.settled(id, 40_000);
  expect(done.status).toBe('completed');
  expect(done.statistics).toMatchObject({ users: 20, installations: 40, accepted: 40, failed: 0, skipped: 0 });
  expect(done.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));

  // Every request that reached a provider, the refused ones included.
  const times = arrivals('thr-pace');
  expect(times.length).toBeGreaterThanOrEqual(42);
  expect(arrivals('thr-pace-ios').length).toBeGreaterThanOrEqual(21);
  expect(arrivals('thr-pace-android').length).toBeGreaterThanOrEqual(21);
  const perMinute = ((times.length - 1) * 60_000) / (times.at(-1)! - times[0]);
  expect(perMinute).toBeGreaterThan(240 * 0.85);
  expect(perMinute).toBeLessThan(240 * 1.15);
  // Evenly: never a burst, however the deliver jobs of the two platforms took turns. A second holds
  // four slots; a busy host that stalls a worker for a moment sends the slots it missed at once, so
  // up to twice that (a pace not kept would put dozens in a second).
  expect(mostWithin(times, 1_000)).toBeLessThanOrEqual(8);
}, 45_000);

test.concurrent("a broadcast at 480 a minute: its pushes keep the pace, and its walk, its window full, comes back later instead of waiting in a worker", async () => {
  const app = await pipeline.newApplication();
  // 1,100 installations: the walk's first batch (1,000) fills the window of a pace of 480 a minute
  // (a batch: two minutes of it would be less), so the rest waits for the pace to make room.
  await pipeline.harness.orm.em.fork().execute(
    `insert into installations
       (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
        registered_at, last_seen_at, identifier_updated_at, permission_updated_at, tags)
     select gen_random_uuid(), ?, 'thr-cast-' || n, case when n % 2 = 0 then 'ios' else 'android' end,
            'thr-cast-' || lpad(n::text, 5, '0'), 'active', 'authorized', 'thr-cast-user-' || n, '{}'::jsonb, now(), now(), now(), now(), '{}'::jsonb
       from generate_series(1, 1100) n`,
    [app.id],
  );
  const id = await app.send({ recipients: { audience: { all: true } }, notification: { title: 'Campaign' }, options: { throttle_per_minute: 480 } });

  const walk = () =>
    pipeline.harness.orm.em
      .fork()
      .execute<{ walked: number; ended: boolean }[]>(`select walked, walk_ended_at is not null as ended from notifications where id = ?`, [id])
      .then(([row]) => row);
  expect(await waitFor(walk, (row) => row.ended, 15_000)).toEqual({ walked: 1_100, ended: true });
  // Its slices: the first ended with the window full, the next was queued to start later.
  const slices = await pipeline.harness.orm.em
    .fork()
    .execute<{ deferredMs: number }[]>(
      `select extract(epoch from start_after - created_on) * 1000 as "deferredMs" from ${pipeline.queueSchema}.job
        where name = 'broadcast' and data->>'notificationId' = ? order by created_on`,
      [id],
    );
  expect(slices.length).toBeGreaterThanOrEqual(2);
  expect(Math.max(...slices.map((slice) => Number(slice.deferredMs)))).toBeGreaterThanOrEqual(900);

  // Eight a second, evenly, over the first 80: ten seconds, so that a worker stalled for a moment
  // on a busy host (its missed slots then sent at once) moves the measured pace by a few percent.
  const times = (await waitFor(() => arrivals('thr-cast'), (found) => found.length >= 80, 25_000)).slice(0, 80);
  const perMinute = ((times.length - 1) * 60_000) / (times.at(-1)! - times[0]);
  expect(perMinute).toBeGreaterThan(480 * 0.85);
  expect(perMinute).toBeLessThan(480 * 1.15);
  // Eight slots a second; up to twice that when a busy host stalls a worker (as above).
  expect(mostWithin(times, 1_000)).toBeLessThanOrEqual(16);

  // Ended by a cancel: a 1,100-push campaign at this pace would take over two minutes.
  await request(pipeline.harness.app).post(`/api/v1/notifications/${id}/cancel`).set('Authorization', `Bearer ${app.server}`).expect(200);
  const done = await app.notification(id);
  expect(done.statistics.installations).toBe(1_100);
  expect(done.statistics.accepted + done.statistics.skipped).toBe(1_100);
  expect(done.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
}, 45_000);

test('a cancel mid-way: nothing arrives after its answer, and what was not pushed ends skipped as cancelled', async () => {
  const app = await pipeline.newApplication();
  const users = await devices(app, 'thr-stop', 10);
  const id = await app.send({ recipients: { user_ids: users }, notification: { title: 'Stop me' }, options: { throttle_per_minute: 120 } });
  await waitFor(async () => (await app.notification(id)).statistics.accepted, (accepted) => accepted >= 3, 10_000);

  const res = await request(pipeline.harness.app).post(`/api/v1/notifications/${id}/cancel`).set('Authorization', `Bearer ${app.server}`);
  expect([res.status, res.body.data.status]).toEqual([200, 'cancelled']);
  const pushedAtAnswer = arrivals('thr-stop').length;
  // Every deliver job of it has ended (those handed back to wait for the pace included): nothing
  // of it can push any more.
  await waitFor(() => jobsOf(pipeline, 'deliver', [id]), (jobs) => jobs.length > 0 && jobs.every((job) => job.completed !== null), 10_000);
  expect(arrivals('thr-stop')).toHaveLength(pushedAtAnswer);

  const done = await app.notification(id);
  expect(done.status).toBe('cancelled');
  expect(done.statistics).toMatchObject({ installations: 20, accepted: pushedAtAnswer, failed: 0, skipped: 20 - pushedAtAnswer });
  expect(pushedAtAnswer).toBeLessThan(20);
  expect(done.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
  expect(new Set((await app.deliveries(id, { state: 'skipped' })).map((row) => row.reason))).toEqual(new Set(['cancelled']));
});

test('a reservation takes the next free slots, shared by every caller, and none further ahead than the lookahead', async () => {
  const app = await pipeline.newApplication();
  // A notification with no installation: its row is what the slots belong to.
  const id = await app.send({ recipients: { user_ids: ['thr-nobody'] }, notification: { title: 'Slots' }, options: { throttle_per_minute: 120 } });
  const pace = { notificationId: id, dueAt: null, applicationId: app.id, count: 2, spacingMs: 500, lookaheadMs: reservationLookaheadMs };
  const [first, second] = await Promise.all([reserveSlots(pipeline.harness.orm.em.fork(), pace), reserveSlots(pipeline.harness.orm.em.fork(), pace)]);
  // Two callers at once: one gets the slots from now, the other the next two.
  const starts = [first, second].map((reserved) => ('startsInMs' in reserved ? reserved.startsInMs : NaN)).sort((a, b) => a - b);
  expect(starts[0]).toBeLessThan(100);
  expect(starts[1]).toBeGreaterThan(900);
  expect(starts[1]).toBeLessThanOrEqual(1_000);
  // The next free slot is now two seconds ahead: nothing is reserved, and it says when.
  const third = await reserveSlots(pipeline.harness.orm.em.fork(), pace);
  expect('freeInMs' in third && third.freeInMs).toBeGreaterThan(1_800);
  // Another due instant of the notification (local_time) has a pace of its own: its slots start now.
  const elsewhere = await reserveSlots(pipeline.harness.orm.em.fork(), { ...pace, dueAt: new Date(Date.now() + 3_600_000) });
  expect('startsInMs' in elsewhere ? elsewhere.startsInMs : NaN).toBeLessThan(100);
  const [row] = await pipeline.harness.orm.em
    .fork()
    .execute<{ ahead: number }[]>(
      `select extract(epoch from next_slot - now()) * 1000 as ahead from notification_throttles where notification_id = ? and due_at = '-infinity'`,
      [id],
    );
  expect(Number(row.ahead)).toBeGreaterThan(1_800);
  expect(Number(row.ahead)).toBeLessThanOrEqual(2_000);
});

test('throttle_per_minute is a whole number from 1 to 1,000,000: anything else is 422 naming it', async () => {
  const app = await pipeline.newApplication();
  for (const throttle of [0, 1_000_001, 2.5, '60']) {
    const res = await request(pipeline.harness.app)
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${app.server}`)
      .send({ recipients: { user_ids: ['thr-bad'] }, notification: { title: 'Bad' }, options: { throttle_per_minute: throttle } });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors)).toEqual(['options.throttle_per_minute']);
  }
  const res = await request(pipeline.harness.app)
    .post('/api/v1/notifications')
    .set('Authorization', `Bearer ${app.server}`)
    .send({ recipients: { user_ids: ['thr-ok'] }, notification: { title: 'Fine' }, options: { throttle_per_minute: 1_000_000 } })
    .expect(202);
  expect(res.body.data.options.throttle_per_minute).toBe(1_000_000);
});

// The statistics are counters on the notification, moved by the statements that move the
// delivery rows. Under concurrent batches, retries, failures and events reported twice at once,
// a recount from the rows must find them equal, and reading one must not count rows; the
// application's hourly rollup, moved by the same statements, must add up to the same.
import request from 'supertest';
import { randomUUID } from 'node:crypto';
import { android, ios, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { recountedStatistics, zeroStatistics } from './support/deliveries.ts';
import { waitFor } from './support/receiver.ts';
import { hourRows } from '../src/db/sql/statistics.ts';

let pipeline: Pipeline;

beforeAll(async () => {
  // Small batches and chunks: many deliver jobs of one notification record at the same time.
  pipeline = await startPipeline({ batchSize: 10, chunkSize: 5 });
}, 120_000);
afterAll(async () => {
  await pipeline.close();
});
afterEach(() => {
  pipeline.apns.setRules([]);
  pipeline.fcm.setRules([]);
});

type Delivery = { id: string; installation_id: string; state: string; attempts: number };

async function report(app: PipelineApplication, delivery: Delivery, type: string, eventId = randomUUID(), occurredAt = new Date()) {
  const res = await request(pipeline.harness.app)
    .post('/api/v1/events')
    .set('Authorization', `Bearer ${app.client}`)
    .send({ event_id: eventId, delivery_id: delivery.id, installation_id: delivery.installation_id, type, occurred_at: occurredAt.toISOString() });
  if (res.status !== 201 && res.status !== 200) throw new Error(`event: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Every kind of report a device makes, with the duplicates a flaky network causes, all at once. */
async function reportEverything(app: PipelineApplication, delivery: Delivery) {
  const opened = { id: randomUUID(), at: new Date() };
  await Promise.all([
    report(app, delivery, 'received'),
    report(app, delivery, 'received'),
    report(app, delivery, 'displayed'),
    report(app, delivery, 'opened', opened.id, opened.at),
    report(app, delivery, 'opened', opened.id, opened.at),
    report(app, delivery, 'dismissed'),
  ]);
}

test('after concurrent batches, retries, failures and duplicate events, the counters equal a recount of the rows', async () => {
  pipeline.apns.setRules([
    { prefix: 'dead-', reason: 'Unregistered' },
    { rate: 0.2, reason: 'ServiceUnavailable', retryAfter: 1 },
  ]);
  pipeline.fcm.setRules([{ rate: 0.2, reason: 'UNAVAILABLE', retryAfter: 1 }]);
  const app = await pipeline.newApplication();
  const users = Array.from({ length: 40 }, (_, i) => `stat-user-${i}`);
  await Promise.all(
    users.flatMap((user, i) => [
      app.register(`${user}-ios`, ios(i % 7 === 0 ? `dead-${i}` : `live-${i}`, user)),
      app.register(`${user}-android`, android(`fcm-${i}`, user, { permission: i % 5 === 0 ? 'denied' : 'authorized' })),
    ]),
  );
  // Overlapping audiences, sent together.
  const ids = await Promise.all([
    app.send({ recipients: { user_ids: users }, notification: { title: 'All' } }),
    app.send({ recipients: { user_ids: users.slice(0, 25) }, notification: { title: 'Some' } }),
    app.send({ recipients: { user_ids: [...users.slice(20), 'nobody'] }, notification: { title: 'Others' } }),
  ]);

  // The providers refuse a fifth of the pushes for the first 3 s, then only the dead tokens: retries
  // happen alongside everything else, and end. (Refused all along, a push refused five or six times
  // in a row, one in 3,000 or 15,000, waits 1 + 2 + … + 16 or 32 s: at or past the deadline below.)
  const transientFailures = setTimeout(() => {
    pipeline.apns.setRules([{ prefix: 'dead-', reason: 'Unregistered' }]);
    pipeline.fcm.setRules([]);
  }, 3_000);
  // Events are reported while the batches are still being delivered.
  // Reported on as soon as it is pushed (a pending one may still end skipped, and refuse events).
  const reported = new Map<string, Set<string>>(ids.map((id) => [id, new Set()]));
  const reports: Promise<void>[] = [];
  const retried = new Set<string>();
  // Each look at the notifications also reports on what was pushed since the last.
  const look = async () => {
    const states = await Promise.all(ids.map((id) => app.notification(id)));
    for (const id of ids) {
      for (const delivery of await app.deliveries(id)) {
        if (delivery.attempts > 1) retried.add(delivery.id);
        if (delivery.state === 'pending' || delivery.state === 'skipped' || reported.get(id)!.has(delivery.id)) continue;
        reported.get(id)!.add(delivery.id);
        reports.push(reportEverything(app, delivery));
      }
    }
    return states.map((notification) => notification.completed_at);
  };
  await waitFor(look, (completed) => completed.every(Boolean), 60_000);
  clearTimeout(transientFailures);
  await Promise.all(reports);
  expect(retried.size).toBeGreaterThan(0);

  for (const id of ids) {
    const { statistics } = await app.notification(id);
    expect(statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
    // Each kind counts once per delivery, however many times it was reported.
    const once = reported.get(id)!.size;
    expect(once).toBe(statistics.accepted + statistics.failed);
    expect(statistics).toMatchObject({ received: once, displayed: once, opened: once });
    expect(statistics.installations).toBe(statistics.accepted + statistics.failed + statistics.skipped);
  }
  // The application's hours, moved by the same statements, add up to the same outcomes.
  const counted = await Promise.all(ids.map(async (id) => (await app.notification(id)).statistics));
  const sum = (key: 'accepted' | 'failed' | 'skipped' | 'opened') => counted.reduce((total, statistics) => total + statistics[key], 0);
  const hours = await hourRows(pipeline.harness.orm.em.fork(), app.id, { from: new Date(Date.now() - 2 * 3_600_000), to: new Date(Date.now() + 3_600_000) });
  const total = (key: 'sends' | 'accepted' | 'failed' | 'skipped' | 'opens') => hours.reduce((sum, hour) => sum + hour[key], 0);
  expect({ sends: total('sends'), accepted: total('accepted'), failed: total('failed'), skipped: total('skipped'), opens: total('opens') }).toEqual({
    sends: ids.length, accepted: sum('accepted'), failed: sum('failed'), skipped: sum('skipped'), opens: sum('opened'),
  });
  const [all] = await Promise.all(ids.map((id) => app.notification(id)));
  expect(all.statistics).toMatchObject({ users: 40, installations: 80 });
  expect(all.statistics.failed + all.statistics.skipped).toBeGreaterThanOrEqual(6 + 8);
}, 120_000);

test('a notification with no delivery reads zero everywhere, and a recount agrees', async () => {
  const app = await pipeline.newApplication();
  const id = await app.send({ recipients: { user_ids: ['nobody-at-all'] }, notification: { title: 'Hi' } });
  const settled = await app.settled(id);
  expect(settled.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
  expect(settled.statistics).toEqual(zeroStatistics);
});

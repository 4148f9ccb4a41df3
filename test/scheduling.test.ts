// Scheduled sends and cancellation (API 1.1.0), end to end through the real APNs and FCM clients
// and the simulators: a scheduled notification waits `queued` until its send_at, its fanout job is
// queued deferred with it, its ttl counts from then; a cancel ends it before any push, or stops a
// running fanout with no push leaving after the answer.
import request from 'supertest';
import { deleteExpired } from '../src/domain/retention.ts';
import { registry } from '../src/observability/metrics.ts';
import { countNotifications, recountedStatistics } from './support/deliveries.ts';
import { android, ios, jobsOf, startPipeline, type Pipeline, type PipelineApplication } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

let pipeline: Pipeline;
beforeAll(async () => {
  // Small chunks: a running fanout is many provider round trips, so a cancel lands between them.
  pipeline = await startPipeline({ batchSize: 10, chunkSize: 5 });
});
afterAll(() => pipeline.close());
afterEach(() => {
  pipeline.apns.setLatency(undefined);
  pipeline.fcm.setLatency(undefined);
});

const api = () => request(pipeline.harness.app);
const inSeconds = (seconds: number) => new Date(Date.now() + seconds * 1000);
/** A counter's value in this process's metrics (the API and the workers run here). */
async function counted(name: string, labels: Record<string, string>): Promise<number> {
  const metric = await registry.getSingleMetric(name)!.get();
  return metric.values
    .filter((value) => Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted))
    .reduce((sum, value) => sum + value.value, 0);
}
const cancelledSkips = () => counted('herald_deliveries_total', { outcome: 'skipped', reason: 'cancelled' });
const cancelledEnds = () => counted('herald_notifications_total', { status: 'cancelled' });

/**
 * Waits until a scheduled-fanout worker has looked for due jobs twice since `after`: a fetch is
 * recorded when it returns, so the second began after it. What was due then has been seen.
 */
async function lookedForDueJobsSince(after: Date): Promise<void> {
  const fetches = new Set<number>();
  await waitFor(
    () => pipeline.workerBoss.getWipData().filter((worker) => worker.name === 'fanout_scheduled'),
    (workers) => {
      for (const { lastFetchedOn } of workers) if (lastFetchedOn !== null && lastFetchedOn > after.getTime()) fetches.add(lastFetchedOn);
      return fetches.size >= 2;
    },
    10_000,
  );
}

/** Waits until every job of the notification has ended: nothing of it can push any more. */
async function jobsEnded(notificationId: string): Promise<void> {
  await waitFor(() => jobsOf(pipeline, 'fanout', [notificationId]), (jobs) => jobs.every((job) => job.completed !== null), 10_000);
  await waitFor(() => jobsOf(pipeline, 'deliver', [notificationId]), (jobs) => jobs.every((job) => job.completed !== null), 10_000);
}

const pushesTo = (token: string) =>
  pipeline.apns.received.filter((push) => push.token === token).length + pipeline.fcm.received.filter((push) => push.token === token).length;

/** The pg-boss state of a notification's fanout job (its id is the notification's). */
async function fanoutJobState(notificationId: string): Promise<string | undefined> {
  const [job] = await pipeline.harness.orm.em
    .fork()
    .execute<{ state: string }[]>(`select state::text from ${pipeline.queueSchema}.job where id = ?`, [notificationId]);
  return job?.state;
}

function cancel(app: PipelineApplication, id: string, token = app.server) {
  return api().post(`/api/v1/notifications/${id}/cancel`).set('Authorization', `Bearer ${token}`);
}

function scheduled(user: string, sendAt: Date | string, options: Record<string, unknown> = {}) {
  const send_at = typeof sendAt === 'string' ? sendAt : sendAt.toISOString();
  return { recipients: { user_ids: [user] }, notification: { title: 'Later', body: 'At its time.' }, options: { send_at, ...options } };
}

describe('scheduled sends', () => {
  test('a send for later answers queued with scheduled_for, pushes nothing before it, and fans out at its time', async () => {
    const app = await pipeline.newApplication();
    await app.register('later-ios', ios('sched-later-01', 'sam'));
    await app.register('later-android', android('fcm-sched-later-02', 'sam'));
    const sendAt = inSeconds(2);
    const res = await api().post('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).send(scheduled('sam', sendAt)).expect(202);
    expect(res.body.data).toMatchObject({ status: 'queued', scheduled_for: sendAt.toISOString(), processing_started_at: null });
    expect(res.body.data.options.send_at).toBe(sendAt.toISOString());

    await lookedForDueJobsSince(new Date());
    expect(Date.now()).toBeLessThan(sendAt.getTime());
    expect(await app.notification(res.body.data.id)).toMatchObject({ status: 'queued', scheduled_for: sendAt.toISOString() });
    expect(pushesTo('sched-later-01') + pushesTo('fcm-sched-later-02')).toBe(0);

    const done = await app.settled(res.body.data.id, 10_000);
    expect(done.status).toBe('completed');
    expect(done.statistics).toMatchObject({ installations: 2, accepted: 2 });
    expect(new Date(done.processing_started_at).getTime()).toBeGreaterThanOrEqual(sendAt.getTime());
    expect(pushesTo('sched-later-01')).toBe(1);
    expect(pushesTo('fcm-sched-later-02')).toBe(1);
  });

  test('its fanout job is stored with the notification, deferred to send_at, under the notification id', async () => {
    const app = await pipeline.newApplication();
    const sendAt = new Date(Date.now() + 3_600_000);
    const res = await api().post('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).send(scheduled('nobody', sendAt)).expect(202);
    const [job] = await pipeline.harness.orm.em
      .fork()
      .execute<{ name: string; state: string; start_after: Date }[]>(`select name, state::text, start_after from ${pipeline.queueSchema}.job where id = ?`, [res.body.data.id]);
    expect(job.name).toBe('fanout_scheduled');
    expect(job.state).toBe('created');
    expect(new Date(job.start_after).toISOString()).toBe(sendAt.toISOString());
    await cancel(app, res.body.data.id).expect(200);
  });

  test('a cancel drops the deferred fanout job with the status: it does not wait in the queue until its time', async () => {
    const app = await pipeline.newApplication();
    const id = await app.send(scheduled('nobody', new Date(Date.now() + 365 * 86_400_000)));
    const jobState = () => fanoutJobState(id);
    expect(await jobState()).toBe('created');
    await cancel(app, id).expect(200);
    expect(await jobState()).toBe('cancelled');
    // A cancel repeated, or of an ended notification, leaves the job alone.
    await cancel(app, id).expect(200);
    expect(await jobState()).toBe('cancelled');
  });

  test('notifications due together are fanned out together: a batch of them in one transaction', async () => {
    const app = await pipeline.newApplication();
    const users = Array.from({ length: 30 }, (_, i) => `batch-${i}`);
    await app.registerAll(users.map((user) => [`${user}-android`, android(`fcm-sched-${user}`, user)]));
    const sendAt = inSeconds(2);
    const ids = await Promise.all(users.map((user) => app.send(scheduled(user, sendAt))));
    const done = await Promise.all(ids.map((id) => app.settled(id, 10_000)));
    expect(done.map((notification) => notification.statistics.accepted)).toEqual(users.map(() => 1));
    // now() is the transaction's start: notifications of one batch share their processing_started_at.
    expect(new Set(done.map((notification) => notification.processing_started_at)).size).toBeLessThanOrEqual(4);
    // Their pushes share deliver batches (of 10 here), and each device got its push once.
    expect((await jobsOf(pipeline, 'deliver', ids)).length).toBeLessThanOrEqual(6);
    expect(users.map((user) => pushesTo(`fcm-sched-${user}`))).toEqual(users.map(() => 1));
  });

  test('a batch mixing applications fans each out with its own credentials and in its own deliver batches', async () => {
    const both = await pipeline.newApplication();
    const iosOnly = await pipeline.newApplication({ apns: true, fcm: false });
    for (const app of [both, iosOnly]) {
      await app.register(`mix-${app.id}-ios`, ios(`sched-mix-ios-${app.id}`, 'mo'));
      await app.register(`mix-${app.id}-android`, android(`fcm-sched-mix-${app.id}`, 'mo'));
    }
    const sendAt = inSeconds(2);
    const [fromBoth, fromIosOnly] = await Promise.all([both, iosOnly].map((app) => app.send(scheduled('mo', sendAt))));
    const [doneBoth, doneIosOnly] = await Promise.all([both.settled(fromBoth, 10_000), iosOnly.settled(fromIosOnly, 10_000)]);
    // Fanned out together (one transaction's start), each with its own application's credentials.
    expect(doneBoth.processing_started_at).toBe(doneIosOnly.processing_started_at);
    expect(doneBoth.statistics).toMatchObject({ accepted: 2, skipped: 0 });
    expect(doneIosOnly.statistics).toMatchObject({ accepted: 1, skipped: 1 });
    expect((await iosOnly.deliveries(fromIosOnly, { state: 'skipped' })).map((row) => row.reason)).toEqual(['no_credentials']);
    // No deliver batch holds deliveries of both applications: each is in its application's group.
    for (const [app, id] of [[both, fromBoth], [iosOnly, fromIosOnly]] as const) {
      expect(new Set((await jobsOf(pipeline, 'deliver', [id])).map((job) => job.group_id))).toEqual(new Set([app.id]));
    }
  });

  test('a batch of large notifications is fanned out in transactions of at most 1,000 users', async () => {
    const app = await pipeline.newApplication();
    const sendAt = inSeconds(2);
    // 12 × 500 users (none has an installation: each ends at once, completed with nothing to push).
    const sends = Array.from({ length: 12 }, (_, n) => ({
      ...scheduled('unused', sendAt),
      recipients: { user_ids: Array.from({ length: 500 }, (_, i) => `large-${n}-${i}`) },
    }));
    const ids = await Promise.all(sends.map((send) => app.send(send)));
    const done = await Promise.all(ids.map((id) => app.settled(id, 10_000)));
    expect(done.map((notification) => notification.status)).toEqual(ids.map(() => 'completed'));
    // now() is the transaction's start: notifications that share it were fanned out together.
    const usersPerTransaction = new Map<string, number>();
    for (const { processing_started_at: started } of done) usersPerTransaction.set(started, (usersPerTransaction.get(started) ?? 0) + 500);
    expect(Math.max(...usersPerTransaction.values())).toBeLessThanOrEqual(1_000);
    expect(usersPerTransaction.size).toBeLessThan(12);
  });

  test('in a shared deliver batch, notifications cancelled while its first chunk is pushed are not pushed; the others are', async () => {
    const app = await pipeline.newApplication();
    const users = Array.from({ length: 10 }, (_, i) => `shared-${i}`);
    const tokenOf = (user: string) => `fcm-sched-${user}`;
    await app.registerAll(users.map((user) => [`${user}-android`, android(tokenOf(user), user)]));
    // One batch of 10 pushes, in chunks of 5 that take 600 ms each at the provider.
    pipeline.fcm.setLatency(600);
    const ids = await Promise.all(users.map((user) => app.send(scheduled(user, inSeconds(1)))));
    await waitFor(() => users.some((user) => pushesTo(tokenOf(user)) > 0), Boolean, 10_000);
    // The first step of a cancel (as a cancel cut short leaves it) for every one not pushed yet.
    const waiting = ids.filter((_, i) => pushesTo(tokenOf(users[i])) === 0);
    await pipeline.harness.orm.em.fork().execute(`update notifications set status = 'cancelled' where id in (?)`, [waiting]);
    const done = await Promise.all(ids.map((id) => app.settled(id, 10_000)));

    expect(waiting.length).toBeGreaterThan(0);
    expect(waiting.length).toBeLessThan(ids.length);
    for (const [i, notification] of done.entries()) {
      if (waiting.includes(ids[i])) {
        expect([notification.status, notification.statistics.skipped, pushesTo(tokenOf(users[i]))]).toEqual(['cancelled', 1, 0]);
      } else {
        expect([notification.status, notification.statistics.accepted, pushesTo(tokenOf(users[i]))]).toEqual(['completed', 1, 1]);
      }
      expect(notification.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, ids[i]));
    }
  });

  test('send_at in the past, or now, sends at once without scheduled_for', async () => {
    const app = await pipeline.newApplication();
    await app.register('past-ios', ios('sched-past-03', 'pat'));
    const res = await api()
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${app.server}`)
      .send(scheduled('pat', '2020-01-01T00:00:00+02:00'))
      .expect(202);
    expect(res.body.data.scheduled_for).toBeNull();
    expect((await app.settled(res.body.data.id)).statistics.accepted).toBe(1);
  });

  test('a ttl counts from send_at: a push due in 2 s with a 1 s ttl is not expired when it is made', async () => {
    const app = await pipeline.newApplication();
    await app.register('ttl-android', android('fcm-sched-ttl-04', 'tia'));
    const id = await app.send(scheduled('tia', inSeconds(2), { ttl: 1 }));
    const done = await app.settled(id, 10_000);
    expect(done.statistics).toMatchObject({ accepted: 1, failed: 0 });
  });

  test('any time ahead is scheduled, a year away included; beyond year 9999 in UTC, or without an offset, is 422 and nothing is stored', async () => {
    const app = await pipeline.newApplication();
    const nextYear = new Date(Date.now() + 366 * 86_400_000);
    const later = await api().post('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).send(scheduled('u', nextYear)).expect(202);
    expect(later.body.data).toMatchObject({ status: 'queued', scheduled_for: nextYear.toISOString() });
    const lastDay = await api()
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${app.server}`)
      .send(scheduled('u', '9999-12-31T23:59:59+00:00'))
      .expect(202);
    expect(lastDay.body.data.scheduled_for).toBe('9999-12-31T23:59:59.000Z');

    const pastYear9999 = '9999-12-31T23:00:00-05:00';
    const tooLate = await api().post('/api/v1/notifications').set('Authorization', `Bearer ${app.server}`).send(scheduled('u', pastYear9999)).expect(422);
    expect(tooLate.body.errors['options.send_at']).toEqual([
      `The options.send_at field is out of range: a date-time must name an instant from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z in UTC, and ${pastYear9999} does not.`,
    ]);
    const local = await api()
      .post('/api/v1/notifications')
      .set('Authorization', `Bearer ${app.server}`)
      .send(scheduled('u', '2030-01-01T10:00:00'))
      .expect(422);
    expect(Object.keys(local.body.errors)).toEqual(['options.send_at']);
    expect(await countNotifications(pipeline.harness.orm, app.id)).toBe(2);
  });
});

describe('cancellation', () => {
  test('a scheduled notification cancelled before its time ends cancelled and never pushes', async () => {
    const app = await pipeline.newApplication();
    await app.register('never-ios', ios('sched-never-05', 'nel'));
    const sendAt = inSeconds(1.5);
    const id = await app.send(scheduled('nel', sendAt));
    const res = await cancel(app, id).expect(200);
    expect(res.body.data).toMatchObject({ id, status: 'cancelled', processing_started_at: null });
    expect(res.body.data.completed_at).not.toBeNull();

    // Its time has passed, and the workers have looked for what was due by then.
    await lookedForDueJobsSince(sendAt);
    const after = await app.notification(id);
    expect(after).toMatchObject({ status: 'cancelled', processing_started_at: null, completed_at: res.body.data.completed_at });
    expect(after.statistics.installations).toBe(0);
    expect(pushesTo('sched-never-05')).toBe(0);
  });

  test('a cancelled scheduled notification that retention deleted before its time: its fanout job then completes doing nothing', async () => {
    const app = await pipeline.newApplication();
    await app.register('deleted-ios', ios('sched-deleted-06', 'del'));
    // Due in less than a second: the cancel leaves its job to run (a worker may be taking it).
    const id = await app.send(scheduled('del', inSeconds(0.9)));
    await cancel(app, id).expect(200);
    const db = pipeline.harness.orm.em.fork();
    await db.execute(`update notifications set completed_at = now() - interval '31 days' where id = ?`, [id]);
    expect(await deleteExpired(pipeline.harness.orm.em.fork(), { retentionDays: 30, batchSize: 1000, budgetMs: 10_000 })).toMatchObject({ notifications: 1 });

    const jobState = () => fanoutJobState(id);
    await waitFor(jobState, (state) => !['created', 'active'].includes(state ?? ''), 10_000);
    expect(await jobState()).toBe('completed');
    expect(await countNotifications(pipeline.harness.orm, app.id)).toBe(0);
    expect(pushesTo('sched-deleted-06')).toBe(0);
  });

  test('cancelling again answers the same notification; an ended one is 409; another application\'s is 404; it needs notifications:send', async () => {
    const app = await pipeline.newApplication();
    const later = await app.send(scheduled('nobody', inSeconds(3600)));
    const first = await cancel(app, later).expect(200);
    const again = await cancel(app, later).expect(200);
    expect(again.body.data).toEqual(first.body.data);

    const now = await app.send({ recipients: { user_ids: ['nobody'] }, notification: { title: 'Now' } });
    await app.settled(now);
    const ended = await cancel(app, now).expect(409);
    expect(ended.body).toEqual({
      message: 'The notification has already ended (completed); only a queued or processing notification can be cancelled.',
    });

    const other = await pipeline.newApplication();
    await cancel(other, later).expect(404);
    await cancel(app, '0196e5a0-0000-7000-8000-000000000000').expect(404);
    await cancel(app, later, app.client).expect(403);
  });

  test('a processing notification cancelled mid-fanout pushes nothing after the answer; what was pushed is counted, the rest skipped as cancelled', async () => {
    const app = await pipeline.newApplication();
    const installations = 80;
    await app.registerAll(
      Array.from({ length: installations }, (_, i) => {
        const token = `sched-mid-${String(i).padStart(3, '0')}`;
        return [`mid-${i}`, i % 2 === 0 ? ios(token, 'mia') : android(`fcm-${token}`, 'mia')];
      }),
    );
    // Each provider round trip of 5 pushes takes 150 ms: the fanout runs for seconds.
    pipeline.apns.setLatency(150);
    pipeline.fcm.setLatency(150);
    const sentBefore = () => pipeline.apns.received.length + pipeline.fcm.received.length;
    const before = sentBefore();
    const [skipsBefore, endsBefore] = [await cancelledSkips(), await cancelledEnds()];
    const id = await app.send({ recipients: { user_ids: ['mia'] }, notification: { title: 'Stop me' } });
    await waitFor(async () => (await app.notification(id)).statistics.accepted, (accepted) => accepted >= 5, 10_000);

    // Concurrent cancels: every one answers cancelled.
    const answers = await Promise.all([cancel(app, id), cancel(app, id), cancel(app, id)]);
    expect(answers.map((answer) => [answer.status, answer.body.data.status])).toEqual(Array(3).fill([200, 'cancelled']));
    const pushedAtAnswer = sentBefore() - before;
    await jobsEnded(id);
    expect(sentBefore() - before).toBe(pushedAtAnswer);

    const done = await app.notification(id);
    expect(done.status).toBe('cancelled');
    const { accepted, skipped, failed, installations: considered } = done.statistics;
    expect(considered).toBe(installations);
    expect(accepted).toBe(pushedAtAnswer);
    expect(accepted).toBeGreaterThanOrEqual(5);
    expect(accepted).toBeLessThan(installations);
    expect(failed).toBe(0);
    expect(skipped).toBe(installations - accepted);
    expect(done.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
    const rows = await app.deliveries(id, { state: 'skipped', limit: '100' });
    expect(rows).toHaveLength(skipped);
    expect(new Set(rows.map((row) => row.reason))).toEqual(new Set(['cancelled']));
    expect(await app.deliveries(id, { state: 'pending', limit: '100' })).toHaveLength(0);
    // Counted once, by the cancel that ended it.
    expect(await cancelledSkips()).toBe(skipsBefore + skipped);
    expect(await cancelledEnds()).toBe(endsBefore + 1);
  });

  describe('a cancel cut short after its first step (the status committed, nothing else) is finished by the next job of the notification', () => {
    const firstStepOnly = (id: string) => pipeline.harness.orm.em.fork().execute(`update notifications set status = 'cancelled' where id = ?`, [id]);

    test('a scheduled one: its fanout, at its time, ends it without a push', async () => {
      const app = await pipeline.newApplication();
      await app.register('cut-ios', ios('sched-cut-06', 'cy'));
      const id = await app.send(scheduled('cy', inSeconds(1)));
      await firstStepOnly(id);
      const done = await app.settled(id, 10_000);
      expect(done).toMatchObject({ status: 'cancelled', processing_started_at: null });
      expect(pushesTo('sched-cut-06')).toBe(0);
    });

    test('a processing one: its next deliver batch pushes nothing and ends it, the rest skipped as cancelled', async () => {
      const app = await pipeline.newApplication();
      // 20 batches of 10, 4 at a time, each two round trips of 150 ms: over a second of pushing.
      const installations = 200;
      await app.registerAll(Array.from({ length: installations }, (_, i) => [`cut-${i}`, android(`fcm-sched-cut-${String(i).padStart(3, '0')}`, 'cid')]));
      pipeline.fcm.setLatency(150);
      const before = pipeline.fcm.received.length;
      const [skipsBefore, endsBefore] = [await cancelledSkips(), await cancelledEnds()];
      const id = await app.send({ recipients: { user_ids: ['cid'] }, notification: { title: 'Cut short' } });
      await waitFor(async () => (await app.notification(id)).statistics.accepted, (accepted) => accepted >= 5, 10_000);
      await firstStepOnly(id);
      const done = await app.settled(id, 10_000);
      expect(done.status).toBe('cancelled');
      const { accepted, skipped } = done.statistics;
      expect(accepted).toBe(pipeline.fcm.received.length - before);
      expect(accepted).toBeLessThan(installations);
      expect(skipped).toBe(installations - accepted);
      expect(done.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
      expect(new Set((await app.deliveries(id, { state: 'skipped', limit: '100' })).map((row) => row.reason))).toEqual(new Set(['cancelled']));
      expect(await app.deliveries(id, { state: 'pending', limit: '100' })).toHaveLength(0);
      // Counted once, by the job that finished the cancel.
      expect(await cancelledSkips()).toBe(skipsBefore + skipped);
      expect(await cancelledEnds()).toBe(endsBefore + 1);
    });
  });
});

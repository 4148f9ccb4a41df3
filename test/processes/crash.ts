// Worker processes killed mid-fanout: nothing lost, nothing doubled, nothing left pending.
import { android, ios, startPipeline, type Pipeline, type PipelineApplication } from '../support/fanout.ts';
import { deliveryCounts } from '../support/deliveries.ts';
import { recountedStatistics } from '../support/deliveries.ts';
import { startHerald, type HeraldProcess } from '../support/processes.ts';
import { waitFor } from '../support/receiver.ts';

describe('crash', () => {
  let pipeline: Pipeline;
  let workerEnv: Record<string, string>;
  const workers: HeraldProcess[] = [];

  beforeAll(async () => {
    pipeline = await startPipeline({ workers: false });
    workerEnv = {
      ...pipeline.workerEnvironment(),
      HERALD_DELIVER_BATCH_SIZE: '25',
      // Outcomes recorded every 5 pushes: a kill re-sends at most 5 per batch in flight.
      HERALD_DELIVER_CHUNK_SIZE: '5',
      HERALD_WORKER_CONCURRENCY: '2',
    };
    // Slow pushes, so that a worker is killed with batches in flight.
    pipeline.apns.setLatency({ min: 20, max: 60 });
    pipeline.fcm.setLatency({ min: 20, max: 60 });
  }, 300_000);
  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop('SIGKILL')));
    await pipeline.close();
  });

  const startWorker = async () => {
    const worker = await startHerald(['work'], workerEnv, (line) => line.includes('workers started'));
    workers.push(worker);
    return worker;
  };

  async function bigNotification(app: PipelineApplication, prefix: string, users: number): Promise<string> {
    const userIds = Array.from({ length: users }, (_, i) => `${prefix}-${i}`);
    await app.registerAll(
      userIds.flatMap((user, i) => [
        [`${prefix}-ios-${i}`, ios(`${prefix}-a-${i}`, user)],
        [`${prefix}-android-${i}`, android(`${prefix}-f-${i}`, user)],
      ]),
    );
    return app.send({ recipients: { user_ids: userIds }, notification: { title: 'Crash test' } });
  }

  async function counts(notificationId: string) {
    const [row] = await deliveryCounts(pipeline.harness.orm.em.fork(), [notificationId]);
    return { total: row?.installations ?? 0, pending: row?.pending ?? 0, accepted: row?.accepted ?? 0 };
  }

  const pushesTo = (prefix: string) => [
    ...pipeline.apns.received.filter((push) => push.token.startsWith(`${prefix}-`)).map((push) => push.token),
    ...pipeline.fcm.received.filter((push) => push.token?.startsWith(`${prefix}-`)).map((push) => push.token!),
  ];

  test('a worker killed with SIGKILL mid-delivery: another picks its jobs up, every push is recorded once, nothing stays pending', async () => {
    const app = await pipeline.newApplication();
    // Both running before the kill, as in a deployment: the hand-back is timed from the kill, not
    // from a process start that takes the host's time.
    const [first, second] = [await startWorker(), await startWorker()];
    const id = await bigNotification(app, 'kill', 150);

    await waitFor(() => counts(id), (c) => c.accepted >= 40, 30_000);
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    await first.stop();
    const atKill = await counts(id);
    expect(atKill.pending).toBeGreaterThan(0);

    // The dead worker's lock session is gone at once: the survivor's sweeps hand its jobs back once
    // it has been missing 2 s (logged only when there were jobs to hand back), not after pg-boss's
    // 10 s heartbeat.
    const handBackLine = await waitFor(
      async () => second.logs.find((line) => line.includes('"msg":"jobs of a worker that died handed back"')),
      (line) => line !== undefined,
      30_000,
    );
    const handBack = JSON.parse(handBackLine!) as { jobs: number; time: string };
    expect(handBack.jobs).toBeGreaterThan(0);
    expect(Date.parse(handBack.time) - killedAt).toBeLessThan(6_000);
    const notification = await app.settled(id, 60_000);

    expect(notification.status).toBe('completed');
    expect(notification.statistics).toMatchObject({ users: 150, installations: 300, accepted: 300, failed: 0 });
    expect(await counts(id)).toEqual({ total: 300, pending: 0, accepted: 300 });
    // The counters moved with the rows through the kill and the re-sent chunks: a recount agrees.
    expect(notification.statistics).toEqual(await recountedStatistics(pipeline.harness.orm, id));
    // Every device got its push; only the chunk in flight of each batch running at the kill (2 × 5)
    // may have been sent twice.
    const pushes = pushesTo('kill');
    expect(new Set(pushes).size).toBe(300);
    expect(pushes.length - 300).toBeLessThanOrEqual(2 * 5);
  }, 120_000);

  test('a worker stopped with SIGTERM finishes its batches and exits; the next one completes the rest without a duplicate', async () => {
    const app = await pipeline.newApplication();
    const first = await startWorker();
    const id = await bigNotification(app, 'term', 150);

    await waitFor(() => counts(id), (c) => c.accepted >= 40, 30_000);
    const exitCode = new Promise<number | null>((resolve) => first.child.once('exit', (code) => resolve(code)));
    first.child.kill('SIGTERM');
    expect(await exitCode).toBe(0);

    await startWorker();
    const notification = await app.settled(id, 60_000);
    expect(notification.status).toBe('completed');
    expect(await counts(id)).toEqual({ total: 300, pending: 0, accepted: 300 });
    const pushes = pushesTo('term');
    expect(pushes).toHaveLength(300);
    expect(new Set(pushes).size).toBe(300);
  }, 120_000);

  describe('bounded shutdown', () => {
    const slowWorker = async () => {
      const worker = await startHerald(['work'], { ...workerEnv, HERALD_SHUTDOWN_GRACE_SECONDS: '1' }, (line) => line.includes('workers started'));
      workers.push(worker);
      return worker;
    };
    const exitOf = (worker: HeraldProcess) =>
      new Promise<{ code: number | null; at: number }>((resolve) => worker.child.once('exit', (code) => resolve({ code, at: Date.now() })));
    // A push of the notification has reached the provider, which holds its answer back.
    const inFlight = (prefix: string) => waitFor(async () => pushesTo(prefix).length, (pushed) => pushed > 0, 30_000);

    // The worker under test must be the only one, or another may take the batch it should hold.
    beforeEach(async () => {
      await Promise.all(workers.splice(0).map((worker) => worker.stop('SIGKILL')));
    });
    afterEach(() => {
      pipeline.apns.setLatency({ min: 20, max: 60 });
      pipeline.fcm.setLatency({ min: 20, max: 60 });
    });

    test('SIGTERM with a batch slower than the grace period: exit 3 soon after it, and another worker delivers the batch', async () => {
      const app = await pipeline.newApplication();
      pipeline.apns.setLatency(20_000);
      pipeline.fcm.setLatency(20_000);
      const worker = await slowWorker();
      const id = await bigNotification(app, 'grace', 10);
      await inFlight('grace');
      const exited = exitOf(worker);
      const signalledAt = Date.now();
      worker.child.kill('SIGTERM');
      const { code, at } = await exited;
      expect(code).toBe(3);
      // Grace 1 s, then the pools close: well before the 20 s the provider would have taken.
      expect(at - signalledAt).toBeLessThan(4000);
      expect(worker.logs.some((line) => line.includes('unfinished jobs handed back'))).toBe(true);

      pipeline.apns.setLatency(0);
      pipeline.fcm.setLatency(0);
      await startWorker();
      const notification = await app.settled(id, 60_000);
      expect(notification.statistics).toMatchObject({ installations: 20, accepted: 20, failed: 0 });
      expect(await counts(id)).toEqual({ total: 20, pending: 0, accepted: 20 });
    }, 90_000);

    test('a second SIGTERM exits at once (143), and the batch is still delivered by another worker', async () => {
      const app = await pipeline.newApplication();
      pipeline.apns.setLatency(20_000);
      pipeline.fcm.setLatency(20_000);
      const worker = await startHerald(['work'], { ...workerEnv, HERALD_SHUTDOWN_GRACE_SECONDS: '30' }, (line) => line.includes('workers started'));
      workers.push(worker);
      const id = await bigNotification(app, 'twice', 5);
      await inFlight('twice');
      const exited = exitOf(worker);
      worker.child.kill('SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 300));
      const secondAt = Date.now();
      worker.child.kill('SIGTERM');
      const { code, at } = await exited;
      expect(code).toBe(143);
      expect(at - secondAt).toBeLessThan(1000);

      pipeline.apns.setLatency(0);
      pipeline.fcm.setLatency(0);
      await startWorker();
      // The killed worker's job comes back once its heartbeat (10 s) lapses.
      const notification = await app.settled(id, 60_000);
      expect(notification.statistics).toMatchObject({ installations: 10, accepted: 10, failed: 0 });
    }, 90_000);
  });

  describe('a backlog of sends', () => {
    beforeEach(async () => {
      await Promise.all(workers.splice(0).map((worker) => worker.stop('SIGKILL')));
    });

    test('sends queued while no worker runs are fanned out in batches, not one fetch and transaction each', async () => {
      pipeline.apns.setLatency(0);
      pipeline.fcm.setLatency(0);
      const app = await pipeline.newApplication();
      const users = Array.from({ length: 60 }, (_, i) => `backlog-${i}`);
      await app.registerAll(users.map((user) => [`${user}-pixel`, android(`backlog-${user}`, user)]));
      const ids = [];
      for (const user of users) ids.push(await app.send({ recipients: { user_ids: [user] }, notification: { title: 'Backlog' } }));

      await startWorker();
      const done = await Promise.all(ids.map((id) => app.settled(id, 30_000)));
      expect(done.map((notification) => notification.statistics.accepted)).toEqual(users.map(() => 1));
      // now() is the transaction's start: notifications fanned out together share processing_started_at.
      // One at a time, that is 60 transactions; the backlog worker takes most of them in one.
      expect(new Set(done.map((notification) => notification.processing_started_at)).size).toBeLessThanOrEqual(10);
      expect(new Set(pushesTo('backlog')).size).toBe(60);
      expect(pushesTo('backlog')).toHaveLength(60);
    }, 90_000);
  });
});

// Priority lanes: the jobs of an `options.priority: high` notification (its fanout, its deliver
// batches and their retries) are queued with a higher pg-boss priority, so workers take them
// before normal ones already waiting.
import { android, ios, jobsOf, startPipeline, type Pipeline } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

const title = { title: 'Lanes' };

async function jobPriorities(pipeline: Pipeline, queue: 'fanout' | 'deliver', notificationId: string): Promise<number[]> {
  return (await jobsOf(pipeline, queue, [notificationId])).map((job) => job.priority);
}

describe('with no worker running', () => {
  let pipeline: Pipeline;
  beforeAll(async () => {
    pipeline = await startPipeline({ workers: false });
  });
  afterAll(() => pipeline.close());

  test('a high-priority send is fetched before the normal ones queued earlier', async () => {
    const app = await pipeline.newApplication();
    await app.register('lane-phone', ios('lane-01', 'lena'));
    const send = (priority?: 'normal' | 'high') =>
      app.send({ recipients: { user_ids: ['lena'] }, notification: title, ...(priority ? { options: { priority } } : {}) });
    const normal = [await send(), await send('normal'), await send()];
    const high = await send('high');

    const fetched: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const [job] = await pipeline.harness.boss.fetch<{ notificationId: string }>('fanout');
      fetched.push(job.data.notificationId);
    }
    expect(fetched).toEqual([high, ...normal]);
  });
});

describe('with workers', () => {
  let pipeline: Pipeline;
  beforeAll(async () => {
    pipeline = await startPipeline();
  });
  afterAll(() => pipeline.close());
  afterEach(() => pipeline.apns.setRules([]));

  test("a high-priority notification's deliver batches and their retries stay in its lane; a normal one's stay in the normal lane", async () => {
    pipeline.apns.setRules([{ prefix: 'busy-', reason: 'ServiceUnavailable', retryAfter: 1 }]);
    const app = await pipeline.newApplication();
    await app.register('busy-phone', ios('busy-01', 'max'));
    await app.register('max-pixel', android('fcm-max-01', 'max'));
    const high = await app.send({ recipients: { user_ids: ['max'] }, notification: title, options: { priority: 'high' } });
    const normal = await app.send({ recipients: { user_ids: ['max'] }, notification: title });
    // Both iOS pushes are refused once (a retry job each), then the provider recovers.
    await waitFor(() => pipeline.apns.received.filter((push) => push.token === 'busy-01').length, (refused) => refused >= 2, 10_000);
    pipeline.apns.setRules([]);
    expect((await app.settled(high)).status).toBe('completed');
    expect((await app.settled(normal)).status).toBe('completed');

    expect(await jobPriorities(pipeline, 'fanout', high)).toEqual([10]);
    expect(await jobPriorities(pipeline, 'fanout', normal)).toEqual([0]);
    // One batch per platform, then the iOS batch's retry.
    expect(await jobPriorities(pipeline, 'deliver', high)).toEqual([10, 10, 10]);
    expect(await jobPriorities(pipeline, 'deliver', normal)).toEqual([0, 0, 0]);
  });
});

describe('with every worker busy', () => {
  let pipeline: Pipeline;
  beforeAll(async () => {
    // Each push its own round trip, so that a deliver job of 4 pushes takes 4 × the latency.
    pipeline = await startPipeline({ chunkSize: 1, batchSize: 4 });
  });
  afterAll(() => pipeline.close());
  afterEach(() => pipeline.apns.setLatency(undefined));

  test("a high-priority send starts at once, without waiting for a worker to finish a normal batch", async () => {
    const app = await pipeline.newApplication();
    const users = Array.from({ length: 4 }, (_, index) => `busy-user-${index}`);
    await app.registerAll(users.map((user) => [`${user}-phone`, ios(`load-${user}`, user)]));
    await app.register('urgent-phone', ios('urgent-01', 'urgent'));
    // 8 deliver jobs of 4 pushes at 1 s each: every normal worker holds one for 4 s.
    pipeline.apns.setLatency(1000);
    const normal: string[] = [];
    for (let i = 0; i < 8; i += 1) normal.push(await app.send({ recipients: { user_ids: users }, notification: title }));
    await waitFor(() => pipeline.apns.received.some((push) => push.token.startsWith('load-')), Boolean, 10_000);

    // The simulator records a push when it arrives, before its latency.
    const sentAt = Date.now();
    await app.send({ recipients: { user_ids: ['urgent'] }, notification: title, options: { priority: 'high' } });
    await waitFor(() => pipeline.apns.received.some((push) => push.token === 'urgent-01'), Boolean, 10_000);
    const pushedAt = pipeline.apns.received.find((push) => push.token === 'urgent-01')?.at;
    expect(pushedAt).toBeDefined();
    // A busy worker would have been free only after its 4 s batch.
    expect(pushedAt! - sentAt).toBeLessThan(2000);
    // The backlog ends before the pipeline closes (a stop would wait for pushes held by the latency).
    pipeline.apns.setLatency(undefined);
    for (const id of normal) expect((await app.settled(id)).status).toBe('completed');
  });
});

describe('with a high-priority batch running', () => {
  let pipeline: Pipeline;
  beforeAll(async () => {
    pipeline = await startPipeline();
  });
  afterAll(() => pipeline.close());
  afterEach(() => pipeline.apns.setLatency(undefined));

  test('normal jobs wait to start while it runs in the process, for half a second at most each', async () => {
    const app = await pipeline.newApplication();
    await app.register('urgent-phone', ios('urgent-02', 'ursula'));
    await app.register('calm-pixel', android('fcm-calm-01', 'carl'));
    // The high-priority deliver job holds its push for 3 s (the simulator records it on arrival).
    pipeline.apns.setLatency(3000);
    const urgent = await app.send({ recipients: { user_ids: ['ursula'] }, notification: title, options: { priority: 'high' } });
    await waitFor(() => pipeline.apns.received.some((push) => push.token === 'urgent-02'), Boolean);

    const sentAt = Date.now();
    const calm = await app.send({ recipients: { user_ids: ['carl'] }, notification: title });
    const calmPush = await waitFor(() => pipeline.fcm.received.find((push) => push.token === 'fcm-calm-01'), Boolean);
    const pushedAt = calmPush!.at;
    // Its fanout and then its deliver job each waited their turn (500 ms at most): idle, the push
    // would be out within about 100 ms; held until the high-priority batch ended, after 3 s.
    expect(pushedAt - sentAt).toBeGreaterThanOrEqual(900);
    expect(pushedAt - sentAt).toBeLessThan(2500);
    pipeline.apns.setLatency(undefined);
    expect((await app.settled(urgent)).status).toBe('completed');
    expect((await app.settled(calm)).status).toBe('completed');
  });

  test('a normal batch of fanouts waits its turn between its transactions too', async () => {
    const app = await pipeline.newApplication();
    await app.register('urgent-phone-3', ios('urgent-03', 'uma'));
    // 6 × 500 users due together: a batch of the scheduled-fanout workers, in transactions of 1,000
    // users (none has an installation: each ends at once).
    const sendAt = new Date(Date.now() + 1500).toISOString();
    const ids = await Promise.all(
      Array.from({ length: 6 }, (_, n) =>
        app.send({ recipients: { user_ids: Array.from({ length: 500 }, (_, i) => `batch-${n}-${i}`) }, notification: title, options: { send_at: sendAt } }),
      ),
    );
    pipeline.apns.setLatency(3000);
    const urgent = await app.send({ recipients: { user_ids: ['uma'] }, notification: title, options: { priority: 'high' } });
    await waitFor(() => pipeline.apns.received.some((push) => push.token === 'urgent-03'), Boolean);
    const done = await Promise.all(ids.map((id) => app.settled(id, 10_000)));
    // now() is a transaction's start. Back to back they start within a few ms of each other; each
    // waited its turn while the high-priority batch ran (however the two workers split them).
    const starts = done.map((notification) => Date.parse(notification.processing_started_at!));
    expect(Math.max(...starts) - Math.min(...starts)).toBeGreaterThanOrEqual(400);
    pipeline.apns.setLatency(undefined);
    expect((await app.settled(urgent)).status).toBe('completed');
  });
});

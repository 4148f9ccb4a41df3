// Fairness between applications: every fanout and deliver job (retries included) has its
// application as its pg-boss group; a queue has one worker more than the concurrency, and one
// application's jobs may hold at most the concurrency of them (workers.ts fairShare). So one
// application's burst never holds another's send behind it, and an application alone still has
// as many workers as before.
import { fairShare } from '../src/worker/workers.ts';
import { android, ios, jobsOf, startPipeline, type Pipeline, type PipelineApplication, type QueuedJob } from './support/fanout.ts';
import { waitFor } from './support/receiver.ts';

const title = { title: 'Fair' };
/** Deliver jobs of one application a pipeline's worker runs at once (support/fanout.ts). */
const concurrency = 4;
/** Pushes per deliver job in the pipeline with workers. */
const batchSize = 4;

/** The most jobs running at the same time, from their start and end. */
function mostAtOnce(jobs: QueuedJob[]): number {
  const edges = jobs.flatMap((job) => [
    { at: Number(job.started), step: 1 },
    { at: Number(job.completed), step: -1 },
  ]);
  // An end and a start at the same instant do not overlap.
  edges.sort((a, b) => a.at - b.at || a.step - b.step);
  let running = 0;
  let most = 0;
  for (const edge of edges) {
    running += edge.step;
    most = Math.max(most, running);
  }
  return most;
}

/** `users` iOS users, each with one installation whose token starts with `prefix`. */
async function withUsers(app: PipelineApplication, prefix: string, users: number): Promise<string[]> {
  const ids = Array.from({ length: users }, (_, index) => `${prefix}user-${index}`);
  await app.registerAll(ids.map((user) => [`${user}-phone`, ios(`${prefix}${user}`, user)]));
  return ids;
}

/**
 * The deliver jobs of `notificationIds` once pg-boss has recorded each one's end: a notification
 * settles when its handler has recorded the outcomes, a moment before pg-boss marks the job completed.
 */
async function endedDeliverJobs(pipeline: Pipeline, notificationIds: string[]): Promise<QueuedJob[]> {
  return waitFor(() => jobsOf(pipeline, 'deliver', notificationIds), (jobs) => jobs.every((job) => job.completed !== null), 10_000);
}

describe('with the queue held (handlers that wait to be released)', () => {
  let pipeline: Pipeline;
  beforeAll(async () => {
    pipeline = await startPipeline({ workers: false });
  });
  afterAll(() => pipeline.close());

  const boss = () => pipeline.harness.boss;
  // What a test leaves queued or running is done before the next.
  afterEach(async () => {
    for (let [job] = await boss().fetch('fanout'); job; [job] = await boss().fetch('fanout')) await boss().complete('fanout', job.id);
  });

  /**
   * pg-boss workers on the fanout queue with the workers' fairness options and a handler that
   * records the job and holds it until released. Runs `check` once nothing more starts.
   */
  async function holding(expected: number, check: (started: string[]) => Promise<void>): Promise<void> {
    const started: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const id = await boss().work<{ notificationId: string }>('fanout', { pollingIntervalSeconds: 0.5, ...fairShare(concurrency) }, async ([job]) => {
      started.push(job.data.notificationId);
      await held;
    });
    try {
      await waitFor(() => started.length, (count) => count >= expected, 10_000);
      // Two more fetches of every worker holding no job: each had its chance, and nothing else started.
      await fetchedTwiceMore(id);
      await check(started);
    } finally {
      release();
      await boss().offWork('fanout', { id });
    }
  }

  /**
   * Waits until every worker of this work() not holding a job has fetched twice more: a fetch is
   * recorded when it returns, so the second began after this call.
   */
  async function fetchedTwiceMore(workId: string): Promise<void> {
    const workers = () => boss().getWipData().filter((worker) => worker.workId === workId);
    const before = new Map(workers().map((worker) => [worker.id, worker.lastFetchedOn]));
    const fetches = new Map<string, Set<number | null>>();
    await waitFor(workers, (now) => {
      for (const worker of now) fetches.set(worker.id, (fetches.get(worker.id) ?? new Set()).add(worker.lastFetchedOn));
      return now.every((worker) => worker.count > 0 || [...fetches.get(worker.id)!].filter((at) => at !== before.get(worker.id)).length >= 2);
    }, 10_000);
  }

  const queued = async (notificationIds: string[]) =>
    (
      await pipeline.harness.orm.em
        .fork()
        .execute<{ count: number }[]>(
          `select count(*)::int as count from ${pipeline.queueSchema}.job where name = 'fanout' and state = 'created' and data->>'notificationId' in (?)`,
          [notificationIds],
        )
    )[0].count;

  test("with one application's backlog holding its share of the workers, another application's job is started by the one worker more", async () => {
    const a = await pipeline.newApplication();
    const b = await pipeline.newApplication();
    await withUsers(a, 'held-a-', 1);
    await withUsers(b, 'held-b-', 1);
    const send = (app: PipelineApplication, user: string) => app.send({ recipients: { user_ids: [user] }, notification: title });
    const burst: string[] = [];
    for (let i = 0; i < 10; i += 1) burst.push(await send(a, 'held-a-user-0'));
    const single = await send(b, 'held-b-user-0');
    expect((await jobsOf(pipeline, 'fanout', [...burst, single])).map((job) => job.group_id)).toEqual([...burst.map(() => a.id), b.id]);

    await holding(concurrency + 1, async (started) => {
      // B's job, queued last, runs while six of A's wait.
      expect(started).toHaveLength(concurrency + 1);
      expect(started).toContain(single);
      expect(started.filter((id) => burst.includes(id))).toHaveLength(concurrency);
      expect(await queued(burst)).toBe(burst.length - concurrency);
    });
  });

  test('an application alone has as many workers as the concurrency, and the one more stays free', async () => {
    const a = await pipeline.newApplication();
    await withUsers(a, 'alone-a-', 1);
    const burst: string[] = [];
    for (let i = 0; i < 2 * concurrency; i += 1) burst.push(await a.send({ recipients: { user_ids: ['alone-a-user-0'] }, notification: title }));

    await holding(concurrency, async (started) => {
      expect(started).toHaveLength(concurrency);
      expect(await queued(burst)).toBe(burst.length - concurrency);
    });
  });
});

describe('with workers', () => {
  let pipeline: Pipeline;
  beforeAll(async () => {
    // Each push its own round trip, so that a deliver job of n pushes takes n × the latency.
    pipeline = await startPipeline({ chunkSize: 1, batchSize });
  });
  afterAll(() => pipeline.close());
  afterEach(() => {
    pipeline.apns.setLatency(undefined);
    pipeline.apns.setRules([]);
  });

  test("app B's send is pushed while app A's burst is still queued", async () => {
    const a = await pipeline.newApplication();
    const b = await pipeline.newApplication();
    const aUsers = await withUsers(a, 'burst-a-', 4);
    await withUsers(b, 'burst-b-', 1);
    pipeline.apns.setLatency(100);
    // 16 deliver jobs of 4 pushes (~0.4 s each) for 4 workers: about 1.6 s of backlog.
    const burst = await Promise.all(Array.from({ length: 16 }, () => a.send({ recipients: { user_ids: aUsers }, notification: title })));
    await waitFor(() => pipeline.apns.received.some((push) => push.token.startsWith('burst-a-')), Boolean, 10_000);
    const single = await b.send({ recipients: { user_ids: ['burst-b-user-0'] }, notification: title });

    expect((await b.settled(single)).status).toBe('completed');
    const [bJob] = await endedDeliverJobs(pipeline, [single]);
    for (const id of burst) expect((await a.settled(id)).status).toBe('completed');
    const aJobs = await endedDeliverJobs(pipeline, burst);
    expect(aJobs).toHaveLength(16);
    // B's only job was over before A's backlog was: some of A's jobs started after it.
    const startedAfterB = aJobs.filter((job) => Number(job.started) > Number(bJob.completed));
    expect(startedAfterB.length).toBeGreaterThan(0);
  });

  test('an application alone runs as many deliver jobs at once as there are workers', async () => {
    const waves = 6;
    const a = await pipeline.newApplication();
    // One fanout queues the whole backlog at once: 6 × 4 deliver jobs of 4 pushes (~0.4 s each).
    // Six waves, not fewer: a worker whose job pg-boss put back (two fetched at once, one too many
    // for the group) sleeps until the next job ends, so on a loaded machine a short backlog can end
    // before every worker has run alongside the others.
    const aUsers = await withUsers(a, 'alone-', waves * concurrency * batchSize);
    pipeline.apns.setLatency(100);
    const id = await a.send({ recipients: { user_ids: aUsers }, notification: title });
    expect((await a.settled(id)).status).toBe('completed');
    const jobs = await endedDeliverJobs(pipeline, [id]);
    expect(jobs).toHaveLength(waves * concurrency);
    // Every one of its workers (that the one more stays free is the held queue's test).
    expect(mostAtOnce(jobs)).toBeGreaterThanOrEqual(concurrency);
  });

  test('every job of a notification, retries included, is in its application group', async () => {
    pipeline.apns.setRules([{ prefix: 'group-busy-', reason: 'ServiceUnavailable', retryAfter: 1 }]);
    const app = await pipeline.newApplication();
    await app.register('group-phone', ios('group-busy-01', 'gus'));
    await app.register('group-pixel', android('group-fcm-01', 'gus'));
    const id = await app.send({ recipients: { user_ids: ['gus'] }, notification: title });
    await waitFor(() => pipeline.apns.received.some((push) => push.token === 'group-busy-01'), Boolean, 10_000);
    pipeline.apns.setRules([]);
    expect((await app.settled(id)).status).toBe('completed');

    expect((await jobsOf(pipeline, 'fanout', [id])).map((job) => job.group_id)).toEqual([app.id]);
    // One batch per platform, then the iOS batch's retry.
    expect((await jobsOf(pipeline, 'deliver', [id])).map((job) => job.group_id)).toEqual([app.id, app.id, app.id]);
  });
});

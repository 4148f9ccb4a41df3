// What a worker does with the jobs a database outage cut short, and how a deliver job is retried,
// on a queue schema of its own with no worker consuming it: jobs are claimed by hand.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { openStatementPool } from '../src/db/pools.ts';
import { createLogger } from '../src/logging/logger.ts';
import { startLeases, type Leases } from '../src/worker/leases.ts';
import { queues } from '../src/worker/queue.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { waitFor } from './support/receiver.ts';
import { createDatabase } from './support/seed.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

let harness: Harness;
let leases: Leases;
beforeAll(async () => {
  harness = await startHarness({ queueSchema: `leases_${randomBytes(4).toString('hex')}` });
  leases = await startLeases({ url: harness.url, boss: harness.boss, queueSchema: harness.queueSchema, logger: harness.logger });
});
// Each test claims its own jobs: none left over by another may be fetched instead.
beforeEach(() => harness.boss.deleteAllJobs(queues.deliver));
afterAll(async () => {
  await leases.stop();
  await harness.close();
});

type JobRow = { state: string; retry_count: number; runs_in: number };

async function job(id: string): Promise<JobRow> {
  const [row] = await harness.orm.em.fork().execute<JobRow[]>(
    `select state::text, retry_count, extract(epoch from start_after - now())::float8 as runs_in
       from ${harness.queueSchema}.job where id = ?`,
    [id],
  );
  return row;
}

/** Queues a deliver job and claims it, as a worker's fetch would: it is then `active`. */
async function claimedDeliverJob(): Promise<string> {
  const id = (await harness.boss.send(queues.deliver, { notificationId: 'n', deliveryIds: [] }))!;
  const [claimed] = await harness.boss.fetch(queues.deliver);
  expect(claimed.id).toBe(id);
  return id;
}

test('after an outage, the jobs a worker no longer runs are retried at once, leased or not; the ones it still runs are left alone', async () => {
  const leasedGone = await claimedDeliverJob();
  const leasedRunning = await claimedDeliverJob();
  const neverLeased = await claimedDeliverJob();
  const retriedAndRunning = await claimedDeliverJob();
  await leases.take([leasedGone], queues.deliver);
  await leases.take([leasedRunning], queues.deliver);

  const handedBack = await leases.handBackOrphans(
    new Set([leasedRunning, retriedAndRunning]),
    new Map([
      [neverLeased, queues.deliver],
      [retriedAndRunning, queues.deliver],
    ]),
  );

  expect(handedBack).toBe(2);
  for (const id of [leasedGone, neverLeased]) {
    const row = await job(id);
    expect(row.state).toBe('retry');
    // Pulled forward: the queue's retry delay (1 s) is for a job that failed, not one handed back.
    expect(row.runs_in).toBeLessThanOrEqual(0.1);
  }
  expect((await job(leasedRunning)).state).toBe('active');
  expect((await job(retriedAndRunning)).state).toBe('active');
});

test('a deliver job that fails again and again is retried a second later each time, never backing off', async () => {
  const id = await claimedDeliverJob();
  for (let failure = 1; failure <= 3; failure += 1) {
    await harness.boss.fail(queues.deliver, id, { message: 'cut short' });
    const row = await job(id);
    // pg-boss counts a retry when it is claimed again.
    expect([row.state, row.retry_count]).toEqual(['retry', failure - 1]);
    // pg-boss's backoff would wait 2-4 s after the second failure and 4-8 s after the third.
    expect(row.runs_in).toBeGreaterThan(0.5);
    expect(row.runs_in).toBeLessThanOrEqual(1.1);
    await harness.boss.update(queues.deliver, undefined, { id, startAfter: new Date() });
    const [claimed] = await harness.boss.fetch(queues.deliver);
    expect(claimed.id).toBe(id);
  }
});

test('a statement pool survives the database cutting a connection it holds between two statements', async () => {
  const { db, close } = openStatementPool(harness.url, 2);
  const admin = new pg.Client({ connectionString: harness.url });
  await admin.connect();
  const uncaught: unknown[] = [];
  const record = (error: unknown) => void uncaught.push(error);
  process.on('uncaughtException', record);
  try {
    await db.connection().execute(async (connection) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(connection);
      await admin.query('select pg_terminate_backend($1)', [rows[0].pid]);
      await sleep(300);
    });
    expect(uncaught).toEqual([]);
    const { rows } = await sql<{ answer: number }>`select 1 as answer`.execute(db);
    expect(rows).toEqual([{ answer: 1 }]);
  } finally {
    process.off('uncaughtException', record);
    await admin.end();
    await close();
  }
});

test('a lease sweep that fails for another reason than an outage says so in the log', async () => {
  // A database without Herald's tables: the sweep's statement fails there (undefined table).
  const bare = await createDatabase(harness.url, `leases_bare_${randomBytes(4).toString('hex')}`);
  const lines: { msg: string; err?: { message: string } }[] = [];
  const logger = createLogger('warn', { write: (line: string) => void lines.push(JSON.parse(line)) });
  const sweeping = await startLeases({ url: bare.url, boss: harness.boss, queueSchema: harness.queueSchema, logger });
  try {
    const [line] = await waitFor(
      () => lines.filter((found) => found.msg.startsWith('job lease sweep failed')),
      (found) => found.length > 0,
      5_000,
    );
    expect(line.err?.message).toMatch(/job_leases/);
  } finally {
    await sweeping.stop();
    await bare.drop();
  }
});

test('a worker stops within its grace when a stall left its lock session hung: the session is not waited for', async () => {
  const proxy = await startTcpProxy(harness.url);
  const stalled = await startLeases({ url: proxy.url, boss: harness.boss, queueSchema: harness.queueSchema, logger: harness.logger });
  try {
    proxy.blackhole();
    const started = Date.now();
    await stalled.stop();
    // The sweep in flight, if any, may wait out its statement; the lock's goodbye is never answered.
    expect(Date.now() - started).toBeLessThan(3_000);
  } finally {
    await proxy.close();
  }
});

// Every database call is bounded (src/db/bounds.ts): a stalled database (connections open, nothing
// answered) behind a TCP proxy, a table lock held past the lock bound, and a database that refuses
// connections each give the API a 503 with Retry-After within its bound, never a hang or a 500;
// readiness answers within 2 s; a connection whose statement was never answered is closed, not
// lent out again. The bounds are short here so that each test takes seconds.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import request from 'supertest';
import type { DatabaseBounds } from '../src/db/bounds.ts';
import { watchDatabase } from '../src/db/outage.ts';
import { openStatementPool } from '../src/db/pools.ts';
import { PreparingClient } from '../src/db/preparing-client.ts';
import { ping } from '../src/db/sql/infrastructure.ts';
import { isDatabaseUnavailable } from '../src/db/unavailable.ts';
import { createLogger } from '../src/logging/logger.ts';
import { startBoss } from '../src/worker/queue.ts';
import { databaseUrl, startHarness } from './support/harness.ts';
import { waitFor } from './support/receiver.ts';
import { createDatabase } from './support/seed.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

const bounds: DatabaseBounds = { connectMs: 500, statementMs: 500, lockMs: 300, idleInTransactionMs: 0 };
/** The most a request may take past these bounds: a connection, a statement and the client's grace, with room for a busy host. */
const requestBoundMs = 2_500;
const readinessBoundMs = 2_000;

const bearer = (token: string) => `Bearer ${token}`;
const send = { recipients: { user_ids: ['u-1'] }, notification: { title: 'Hi' } };
const adminUrl = () => Object.assign(new URL(databaseUrl()), { pathname: '/postgres' }).toString();

type Line = { level: number; msg: string; status?: number };
const capture = () => {
  const lines: Line[] = [];
  return { lines, logger: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }) };
};

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = Date.now();
  const value = await work();
  return [value, Date.now() - started];
}

test('a stalled database: every request is a 503 with Retry-After within the bound, /readyz 503 within 2 s, and service resumes once it answers', async () => {
  const proxy = await startTcpProxy(databaseUrl());
  const { lines, logger } = capture();
  const behind = await startHarness({ databaseUrl: proxy.url, logger, bounds });
  try {
    const token = await (await behind.newApplication('stall')).token();
    expect((await request(behind.app).get('/api/v1/notifications').set('Authorization', bearer(token))).status).toBe(200);
    proxy.blackhole();
    for (const call of [
      () => request(behind.app).get('/api/v1/notifications').set('Authorization', bearer(token)),
      () => request(behind.app).post('/api/v1/notifications').set('Authorization', bearer(token)).send(send),
      () => request(behind.app).get('/api/v1/installations/stalled').set('Authorization', bearer(token)),
    ]) {
      const [res, ms] = await timed(async () => await call());
      expect([res.status, res.headers['retry-after'], res.body]).toEqual([503, '5', { message: 'Service Unavailable' }]);
      expect(ms).toBeLessThan(requestBoundMs);
    }
    const [ready, readyMs] = await timed(async () => await request(behind.app).get('/readyz'));
    expect(ready.status).toBe(503);
    expect(readyMs).toBeLessThan(readinessBoundMs);

    // However many requests it refused, one line said the outage.
    const outageLines = () => lines.filter((line) => line.msg.startsWith('database')).map(({ msg }) => msg);
    expect(outageLines()).toEqual(['database unreachable: the API answers 503 until it answers again']);
    await proxy.restore();
    // Connections the stall left hung (the proxy keeps them so) are each given up once, at the bound,
    // and closed: a client retrying after Retry-After soon finds new ones.
    const answered = (path: string, body?: object) => async () => {
      const call = body ? request(behind.app).post(path).set('Idempotency-Key', 'after-the-stall').send(body) : request(behind.app).get(path);
      return (await call.set('Authorization', bearer(token))).status;
    };
    expect(await waitFor(answered('/api/v1/notifications'), (status) => status !== 503, 10_000)).toBe(200);
    expect(await waitFor(answered('/api/v1/notifications', send), (status) => status !== 503, 10_000)).toBe(202);
    await waitFor(() => outageLines().at(-1), (last) => last === 'database reachable again', 10_000);
    expect(lines.filter((line) => line.level >= 50)).toEqual([]);
  } finally {
    await proxy.restore();
    await behind.close();
    await proxy.close();
  }
}, 30_000);

test('a statement never answered is given up at its bound, and its connection closed rather than lent out again', async () => {
  const proxy = await startTcpProxy(databaseUrl());
  const pool = openStatementPool(proxy.url, 1, bounds);
  try {
    await ping(pool.db);
    proxy.blackhole();
    const [failure, ms] = await timed(() => ping(pool.db).then(() => null, (error: unknown) => error));
    expect((failure as Error).message).toBe('Query read timeout');
    expect(isDatabaseUnavailable(failure)).toBe(true);
    expect(ms).toBeLessThan(requestBoundMs);
    await proxy.restore();
    // The pool's one connection is still hung inside the proxy: only a new one can answer.
    await ping(pool.db);
  } finally {
    await pool.close();
    await proxy.close();
  }
});

test('a statement pool closed while a statement is still opening its connection: close() returns once the statement has run, and one asked for after it is refused', async () => {
  // The probe's and the leases' pools are closed at shutdown, when a probe (readiness, the outage
  // watch) may be opening a connection. Kysely's driver forgets its pool when destroyed; a
  // connection it had asked for and gets afterwards was never handed back, and the pool's end()
  // waited for it forever.
  for (let attempt = 0; attempt < 5; attempt++) {
    const pool = openStatementPool(databaseUrl(), 2);
    const statement = ping(pool.db).then(
      () => 'answered',
      () => 'failed',
    );
    // The statement has asked the pool for a connection, which is still being opened.
    await new Promise((resolve) => setImmediate(resolve));
    const closing = pool.close().then(() => 'closed');
    // One that asks once the close has begun is refused: the close waits only for those before it.
    const late = ping(pool.db).then(
      () => 'answered',
      (error: Error) => error.message,
    );
    expect(await Promise.race([closing, sleep(5_000, 'still closing', { ref: false })])).toBe('closed');
    // It had asked for its connection before the close: it gets it, and runs.
    expect(await statement).toBe('answered');
    expect(await late).toBe('the statement pool is closed');
  }
});

describe('on a database of its own', () => {
  const name = `herald_bounds_${process.pid}_${randomBytes(3).toString('hex')}`;
  let database: Awaited<ReturnType<typeof createDatabase>>;
  const admin = async (text: string) => {
    const client = new pg.Client({ connectionString: adminUrl() });
    await client.connect();
    try {
      return await client.query(text);
    } finally {
      await client.end();
    }
  };
  beforeAll(async () => {
    database = await createDatabase(adminUrl(), name);
  });
  afterAll(async () => {
    await admin(`alter database "${name}" allow_connections true`);
    await database.drop();
  });

  test("a lock held past the API's lock bound: a send is a 503 with Retry-After within the bound, and /readyz stays 200", async () => {
    const { lines, logger } = capture();
    const harness = await startHarness({ databaseUrl: database.url, logger, bounds: { ...bounds, statementMs: 2_000 } });
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      const token = await (await harness.newApplication('locked')).token();
      await holder.query('begin');
      await holder.query('lock table notifications');
      const [sent, ms] = await timed(async () => await request(harness.app).post('/api/v1/notifications').set('Authorization', bearer(token)).send(send));
      expect([sent.status, sent.headers['retry-after']]).toEqual([503, '5']);
      expect(ms).toBeLessThan(requestBoundMs);
      expect((await request(harness.app).get('/readyz')).status).toBe(200);
      // Not an outage: the request's line names the lock; nothing else is said.
      expect(lines.filter((line) => line.msg.startsWith('database unreachable'))).toEqual([]);
      expect(lines.filter((line) => line.msg === 'database statement ended at its bound')).toEqual([
        expect.objectContaining({ level: 40, cause: 'canceling statement due to lock timeout' }),
      ]);
      await holder.query('rollback');
      expect((await request(harness.app).post('/api/v1/notifications').set('Authorization', bearer(token)).send(send)).status).toBe(202);
    } finally {
      await holder.end();
      await harness.close();
    }
  });

  test('a database not accepting connections (55000): each request is a 503, and a worker logs the outage once, not each failed poll', async () => {
    const api = capture();
    const harness = await startHarness({ databaseUrl: database.url, logger: api.logger, bounds });
    const worker = capture();
    const outage = watchDatabase({ probe: () => ping(harness.orm.em.fork()), logger: worker.logger, roles: { api: false, worker: true } });
    const boss = await startBoss(database.url, worker.logger, { worker: true, schema: harness.queueSchema, outage, bounds });
    let queueErrors = 0;
    boss.on('error', () => void (queueErrors += 1));
    await boss.createQueue('bounds-probe');
    await boss.work('bounds-probe', { pollingIntervalSeconds: 0.5 }, async () => undefined);
    try {
      const token = await (await harness.newApplication('refusing')).token();
      await admin(`alter database "${name}" allow_connections false`);
      await admin(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}'`);
      const refused = await new PreparingClient({ connectionString: database.url }).connect().then(() => null, (error: unknown) => error);
      expect((refused as { cause?: { code?: string } }).cause?.code).toBe('55000');
      expect(isDatabaseUnavailable(refused)).toBe(true);
      for (let attempt = 0; attempt < 3; attempt++) {
        const res = await request(harness.app).get('/api/v1/notifications').set('Authorization', bearer(token));
        expect([res.status, res.headers['retry-after']]).toEqual([503, '5']);
      }
      await waitFor(() => queueErrors, (count) => count >= 3, 15_000);
      expect(worker.lines.filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([]);
      expect(worker.lines.filter((line) => line.msg.startsWith('database unreachable'))).toHaveLength(1);
      expect(api.lines.filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([]);
    } finally {
      await admin(`alter database "${name}" allow_connections true`);
      outage.stop();
      await boss.stop({ graceful: false });
      await harness.close();
    }
  }, 30_000);
});

test("a statement never answered is unavailable in pg-boss's report of a worker's failure too, which copies its fields and adds to its message", () => {
  const timedOut = new Error('Query read timeout');
  const reported = { ...timedOut, message: `${timedOut.message} (Queue: deliver, Worker: w-1)`, stack: timedOut.stack, queue: 'deliver' };
  expect(isDatabaseUnavailable(reported)).toBe(true);
});

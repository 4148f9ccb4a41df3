// The outage watch as workers live it, against a real Postgres behind a TCP proxy that the test
// cuts (or silences) and restores: one report starts it, the probe backs off to at most a second,
// the workers resume within about a second of the database answering again, and the pools'
// connections from before the outage are dropped rather than left hung.
import { setTimeout as sleep } from 'node:timers/promises';
import { watchDatabase } from '../src/db/outage.ts';
import { openStatementPool } from '../src/db/pools.ts';
import { PreparingClient } from '../src/db/preparing-client.ts';
import { ping } from '../src/db/sql/infrastructure.ts';
import { run, type Db } from '../src/db/sql/execute.ts';
import { sql } from 'kysely';
import { ConnectionFailed, isDatabaseUnavailable, isRetiredConnection } from '../src/db/unavailable.ts';
import { createLogger } from '../src/logging/logger.ts';
import { databaseUrl } from './support/harness.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

test('a database down for 4.5 s is probed at least once a second, and the workers resume within about a second of its return', async () => {
  const proxy = await startTcpProxy(databaseUrl());
  const { db, close } = openStatementPool(proxy.url, 1);
  const probes: number[] = [];
  let resumedAt: number | null = null;
  let pauses = 0;
  const watch = watchDatabase({
    probe: async () => {
      probes.push(Date.now());
      await ping(db);
    },
    logger: createLogger('silent'),
    roles: { api: false, worker: true },
    onDown: () => void (pauses += 1),
    onUp: () => void (resumedAt = Date.now()),
  });
  try {
    await ping(db);
    await proxy.cut();
    const refused = await ping(db).then(
      () => null,
      (error: unknown) => error,
    );
    expect(watch.report(refused)).toBe(true);
    expect(watch.report(refused)).toBe(true);
    expect([watch.down, pauses]).toEqual([true, 1]);

    await sleep(4_500);
    const restoredAt = Date.now();
    await proxy.restore();
    while (resumedAt === null && Date.now() - restoredAt < 5_000) await sleep(20);

    expect(watch.down).toBe(false);
    expect(resumedAt! - restoredAt).toBeLessThan(1_300);
    const gaps = probes.slice(1).map((at, index) => at - probes[index]);
    // 250 ms, 500 ms, then 1 s between probes (a 2 s cap would leave a 2 s gap by now).
    expect(gaps.length).toBeGreaterThanOrEqual(5);
    expect(Math.max(...gaps)).toBeLessThan(1_300);
  } finally {
    watch.stop();
    await close();
    await proxy.close();
  }
});

test("a stall's hung connections are dropped when the database answers again: a statement waiting on one fails at once, without starting another outage, and the pool answers on new ones", async () => {
  const proxy = await startTcpProxy(databaseUrl());
  // Statements may wait 30 s: only the retirement can end the one that waits on the stall. A
  // connection may take 2 s (on a busy host, the first ones through the proxy take more than the
  // probe's 500 ms); the probe's fail fast while the link is cut.
  const bounds = { connectMs: 2_000, statementMs: 30_000, lockMs: 0, idleInTransactionMs: 0 };
  const pool = openStatementPool(proxy.url, 2, bounds);
  const probePool = openStatementPool(proxy.url, 1, { ...bounds, connectMs: 500, statementMs: 300 });
  const session = new PreparingClient({ connectionString: proxy.url });
  let resumedAt: number | null = null;
  let pauses = 0;
  // A pool of another database (the same server, not behind the proxy) is not the outage's.
  const elsewhere = openStatementPool(databaseUrl(), 1, bounds);
  const watch = watchDatabase({
    probe: () => ping(probePool.db),
    database: proxy.url,
    logger: createLogger('silent'),
    roles: { api: false, worker: true },
    onDown: () => void (pauses += 1),
    onUp: () => void (resumedAt = Date.now()),
  });
  try {
    await session.connect();
    // Two pool connections, both idle once answered.
    await Promise.all([ping(pool.db), ping(pool.db), ping(elsewhere.db)]);
    const elsewhereBusy = sleepOn(elsewhere.db, 2);
    proxy.blackhole();
    const waiting = ping(pool.db).then(
      () => null,
      (error: unknown) => error,
    );
    expect(watch.report(new ConnectionFailed(new Error('timeout expired')))).toBe(true);
    await sleep(1_000);
    await proxy.restore();
    while (resumedAt === null) await sleep(20);

    const failure = await waiting;
    expect(Date.now() - resumedAt).toBeLessThan(1_000);
    expect([isDatabaseUnavailable(failure), isRetiredConnection(failure)]).toEqual([true, true]);
    // Retried as an outage's failure, but the outage is over: no second pause.
    expect(watch.report(failure)).toBe(true);
    expect([watch.down, pauses]).toEqual([false, 1]);
    // Both connections from before the stall are gone: the next statements, two at once, are
    // answered on new ones within a second instead of waiting 30 s on hung ones.
    const started = Date.now();
    await Promise.all([ping(pool.db), ping(pool.db)]);
    expect(Date.now() - started).toBeLessThan(1_000);
    // A session (the job leases' lock) is never dropped from outside: its locks last as long as it.
    await expect(Promise.race([session.query('select 1'), sleep(300).then(() => 'still hung')])).resolves.toBe('still hung');
    await expect(elsewhereBusy).resolves.toBeUndefined();
  } finally {
    watch.stop();
    await pool.close();
    await probePool.close();
    await elsewhere.close();
    await proxy.close();
    await session.end().catch(() => undefined);
  }
});

/** A statement that takes `seconds`, on its own connection of the pool. */
async function sleepOn(db: Db, seconds: number): Promise<void> {
  await run(db, sql`select pg_sleep(${seconds})`);
}

// The outage watch as workers live it, against a real Postgres behind a TCP proxy that the test
// cuts and restores: one report starts it, the probe backs off to at most a second, and the
// workers resume within about a second of the database answering again.
import { setTimeout as sleep } from 'node:timers/promises';
import { watchDatabase } from '../src/db/outage.ts';
import { openStatementPool } from '../src/db/pools.ts';
import { ping } from '../src/db/sql/infrastructure.ts';
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

// The scheduled-send benchmark (`make bench-schedule`). On a fresh database that is dropped at the
// end whatever happens, `herald start` (its own process, the production defaults) pushing to the
// simulators (their own process), BENCH_NOTIFICATIONS users with an iOS and an Android installation
// each:
//   burst (for comparison): that many notifications, one user each, sent at once without send_at: how
//     fast the workers start fanouts that are all due, measured as notifications started per second;
//   scheduled: as many, all with the same `options.send_at` a whole second BENCH_LEAD_SECONDS ahead
//     (sent before it): how long after that second each one started (processing_started_at), pushed
//     its first push, and ended. The target: every one started within 1 s of its send_at.
// It prints both, and the scheduled start rate against the burst's. It exits 0 whatever the figures
// are (a measurement, not a test); non-zero only when the run failed (a send refused, a notification
// not ended, a push missing).
//
// Environment (all optional):
//   DATABASE_URL          admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_NOTIFICATIONS   notifications per phase (1000)
//   BENCH_LEAD_SECONDS    how far ahead the scheduled ones are due when their sending begins (20)
//   BENCH_JSON            write the figures to this file instead of bench/results/schedule-<UTC time>.json
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createDatabase, seedApplication, userId } from '../test/support/seed.ts';
import {
  createCleanups,
  fixed,
  freePort,
  herald,
  heraldEnvironment,
  integer,
  launch,
  machineLine,
  percentile,
  positiveIntegerFromEnv,
  receivedPushes,
  resetSimulators,
  root,
  runBenchmark,
  startSimulatorsProcess,
  waitForHttp,
  writeResults,
} from './support.ts';

const env = process.env;
const adminUrl = env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const settings = {
  notifications: positiveIntegerFromEnv('BENCH_NOTIFICATIONS', 1000),
  leadSeconds: positiveIntegerFromEnv('BENCH_LEAD_SECONDS', 20),
  /** Sends in flight at once while a phase is sent. */
  sendConcurrency: 16,
  targetStartSeconds: 1,
};
const cleanups = createCleanups();
const log = (line: string) => process.stdout.write(`${line}\n`);

type Stage = { pool: pg.Pool; base: string; token: string; sims: Awaited<ReturnType<typeof startSimulatorsProcess>>; alive: () => boolean };

async function setUp(): Promise<Stage> {
  const database = `herald_bench_schedule_${randomBytes(4).toString('hex')}`;
  log(`Herald scheduled-send benchmark, ${new Date().toISOString()}`);
  log(machineLine(database, adminUrl));
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'herald-bench-'));
  cleanups.add('temporary folder', async () => rmSync(tmp, { recursive: true, force: true }));
  const { url, drop } = await createDatabase(adminUrl, database);
  cleanups.add('database', drop);
  const sims = await startSimulatorsProcess(path.join(tmp, 'simulators'));
  cleanups.add('simulators', () => sims.process.stop());
  const credentialsKey = randomBytes(32);
  const seeded = await seedApplication(url, { name: 'Schedule benchmark', credentialsKey, keys: sims.keys, users: settings.notifications });
  log(`registered ${integer(seeded.installations)} installations (${integer(settings.notifications)} users × iOS + Android)`);

  const port = await freePort();
  const heraldEnv = heraldEnvironment({ databaseUrl: url, port, dataDir: path.join(tmp, 'herald'), ...sims, credentialsKey });
  const server = launch('herald start', herald, ['start', '--no-simulate'], { cwd: root, env: heraldEnv });
  cleanups.add('herald', () => server.stop());
  const alive = () => !server.exited();
  await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, alive);
  log(`herald: process ${server.pid} on port ${port}`);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  cleanups.add('pool', () => pool.end());
  return { pool, base: `http://127.0.0.1:${port}`, token: seeded.serverToken, sims, alive };
}

/** Sends notification `index` (to user `index`), `sendConcurrency` at a time; answers the ids in order. */
async function sendAll(stage: Stage, phase: string, sendAt: Date | null): Promise<string[]> {
  const ids: string[] = new Array(settings.notifications);
  let next = 0;
  const sender = async () => {
    while (next < settings.notifications) {
      const index = next++;
      const res = await fetch(`${stage.base}/api/v1/notifications`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stage.token}`, 'content-type': 'application/json', 'idempotency-key': `${phase}-${index}` },
        body: JSON.stringify({
          recipients: { user_ids: [userId(index + 1)] },
          notification: { title: 'Scheduled', body: `Notification ${index}` },
          ...(sendAt ? { options: { send_at: sendAt.toISOString() } } : {}),
        }),
      });
      const body = (await res.json()) as { data: { id: string; scheduled_for: string | null } };
      if (res.status !== 202) throw new Error(`${phase}: send ${index} answered ${res.status} ${JSON.stringify(body)}`);
      if (sendAt && body.data.scheduled_for !== sendAt.toISOString()) throw new Error(`${phase}: send ${index} is not scheduled: ${JSON.stringify(body.data)}`);
      ids[index] = body.data.id;
    }
  };
  await Promise.all(Array.from({ length: settings.sendConcurrency }, sender));
  return ids;
}

type Timing = { id: string; startedAt: number; completedAt: number; createdAt: number; accepted: number };

async function waitEnded(stage: Stage, ids: string[], timeoutMs: number): Promise<Timing[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await stage.pool.query<{ id: string; started: string; completed: string | null; created: string; accepted: number }>(
      `select id, extract(epoch from processing_started_at) * 1000 as started, extract(epoch from completed_at) * 1000 as completed,
              extract(epoch from created_at) * 1000 as created, accepted_count as accepted
         from notifications where id = any($1::uuid[])`,
      [ids],
    );
    const ended = rows.filter((row) => row.completed !== null);
    if (ended.length === ids.length) {
      return rows.map((row) => ({ id: row.id, startedAt: Number(row.started), completedAt: Number(row.completed), createdAt: Number(row.created), accepted: row.accepted }));
    }
    if (!stage.alive()) throw new Error('herald exited');
    if (Date.now() > deadline) throw new Error(`${ids.length - ended.length} notifications did not end within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** Each notification's first push, from what the simulators received. */
async function firstPushes(stage: Stage, ids: string[]): Promise<Map<string, number>> {
  const wanted = new Set(ids);
  const first = new Map<string, number>();
  for (const push of await receivedPushes(stage.sims)) {
    if (!push.notificationId || !wanted.has(push.notificationId)) continue;
    first.set(push.notificationId, Math.min(first.get(push.notificationId) ?? Infinity, push.at));
  }
  if (first.size !== ids.length) throw new Error(`${ids.length - first.size} notifications have no push at the simulators`);
  return first;
}

const seconds = (ms: number) => `${fixed(ms / 1000, 2)} s`;
const spread = (values: number[]) => `p50 ${seconds(percentile(values, 50))}, p99 ${seconds(percentile(values, 99))}, worst ${seconds(Math.max(...values))}`;

async function run(): Promise<number> {
  const stage = await setUp();
  // Not measured: provider connections, JIT, statement caches.
  const warm = await sendAll(stage, 'warmup', null);
  await waitEnded(stage, warm, 120_000);
  await resetSimulators(stage.sims);

  const sentAt = Date.now();
  const burst = await sendAll(stage, 'burst', null);
  const sendingMs = Date.now() - sentAt;
  const burstTimes = await waitEnded(stage, burst, 120_000);
  const burstStartMs = Math.max(...burstTimes.map((t) => t.startedAt)) - sentAt;
  const burstRate = settings.notifications / (burstStartMs / 1000);
  log(
    `burst (the same sent at once, without send_at): ${integer(settings.notifications)} sent at once in ${seconds(sendingMs)}, all started ${seconds(burstStartMs)} after ` +
      `the first send: ${integer(burstRate)} fanouts started/s`,
  );
  await resetSimulators(stage.sims);

  const due = new Date(Math.ceil((Date.now() + settings.leadSeconds * 1000) / 1000) * 1000);
  const scheduled = await sendAll(stage, 'scheduled', due);
  const leftMs = due.getTime() - Date.now();
  if (leftMs <= 0) throw new Error(`sending the scheduled notifications took longer than the lead (${settings.leadSeconds} s)`);
  log(`scheduled: ${integer(settings.notifications)} for ${due.toISOString()}, all queued ${seconds(leftMs)} before it`);
  const times = await waitEnded(stage, scheduled, leftMs + 120_000);
  const pushes = await firstPushes(stage, scheduled);
  const started = times.map((t) => t.startedAt - due.getTime());
  const pushed = times.map((t) => pushes.get(t.id)! - due.getTime());
  const ended = times.map((t) => t.completedAt - due.getTime());
  if (times.some((t) => t.accepted !== 2)) throw new Error('a scheduled notification did not push to both of its installations');
  if (Math.min(...started) < 0) throw new Error('a scheduled notification started before its send_at');
  const worst = Math.max(...started);
  const scheduledRate = settings.notifications / Math.max(worst / 1000, 0.001);
  log(`  started after send_at:    ${spread(started)}   (target: worst ≤ ${settings.targetStartSeconds} s: ${worst <= settings.targetStartSeconds * 1000 ? 'met' : 'missed'})`);
  log(`  first push after send_at: ${spread(pushed)}`);
  log(`  ended after send_at:      ${spread(ended)}`);
  log(`  started ${integer(scheduledRate)}/s from send_at: ${fixed(scheduledRate / burstRate, 2)} × the burst's rate`);
  const figures = (values: number[]) => ({ p50: percentile(values, 50), p99: percentile(values, 99), max: Math.max(...values) });
  writeResults('schedule', {
    settings,
    burst: { sendingMs, allStartedMs: burstStartMs, startedPerSecond: burstRate },
    scheduled: {
      dueAt: due.toISOString(),
      queuedAheadMs: leftMs,
      startedAfterSendAtMs: figures(started),
      firstPushAfterSendAtMs: figures(pushed),
      endedAfterSendAtMs: figures(ended),
      startedPerSecond: scheduledRate,
      rateOverBurst: scheduledRate / burstRate,
    },
    verdicts: { worstStartMs: { value: worst, target: settings.targetStartSeconds * 1000, pass: worst <= settings.targetStartSeconds * 1000 } },
  });
  return 0;
}

await runBenchmark('bench-schedule', run, cleanups);

// The retention benchmark (`make bench-retention`). On a fresh database that is dropped at the end
// whatever happens: 2 million delivery rows of finished notifications past the retention (with
// events and expired idempotency keys), plus recent ones that must stay. Then sends at a steady rate
// (POST /api/v1/notifications through Herald's real app, listening on a port: token, validation,
// rate limit, Idempotency-Key claim, notification and fanout job in one transaction) for the whole
// deletion, with retention running as the maintenance job runs it (runMaintenance, the production
// batch size) in runs of a few seconds' budget, each followed by as long without it:
//   baseline: the sends while nothing deletes (the ceiling: what sends cost on this machine now),
//             a lead-in before the first run and the pause after each run;
//   deletion: the sends while a run deletes.
// Alternating the two in one run makes whatever else the machine does weigh on both alike. A
// budget-limited run carrying on where the last one stopped is how a backlog is worked off in
// production too (every 15 minutes, with a 60 s budget).
// It prints rows deleted, the deletion's duration and rows/s, each statement's duration, and send
// latency (p50/p99 from the moment each send was due, so a stalled send is not hidden) during the
// deletion against the baseline. It exits 0 whatever the figures are (a measurement, not a test);
// non-zero only when the run itself failed (a send refused, a recent row deleted, an old one left).
//
// The API, the load and retention share this process (as in `herald start`); retention has its own
// connection pool, as a worker process would.
//
// Environment (all optional):
//   DATABASE_URL              admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_DELIVERIES          old delivery rows to delete (2000000)
//   BENCH_PER_NOTIFICATION    deliveries per notification: 500 users × iOS + Android (1000)
//   BENCH_RECENT_DELIVERIES   delivery rows inside the retention, which must stay (200000)
//   BENCH_SEND_RATE           sends per second, throughout (20)
//   BENCH_WINDOW_SECONDS      each retention run's budget, and the pause after it (5)
//   BENCH_LEAD_SECONDS        baseline before the first run (10)
//   BENCH_BATCH_SIZE          rows per deleting statement (the production value, retentionBatchSize)
//   BENCH_JSON                write the figures to this file instead of bench/results/retention-<UTC time>.json
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { migrate, openOrm, type Orm } from '../src/db/orm.ts';
import { createApplication, createToken } from '../src/domain/applications.ts';
import type { RetentionBatch } from '../src/domain/retention.ts';
import { retentionBatchSize, runMaintenance } from '../src/worker/maintenance.ts';
import { createLogger } from '../src/logging/logger.ts';
import {
  bulkLoad,
  cpuSeconds,
  createBenchDatabase,
  createCleanups,
  type FinishedNotifications,
  fixed,
  integer,
  machineCpu,
  machineLine,
  openLoop,
  type Paced,
  percentile,
  positiveIntegerFromEnv,
  runBenchmark,
  seedFinishedNotifications,
  startBenchApi,
  writeResults,
} from './support.ts';

const env = process.env;
const settings = {
  deliveries: positiveIntegerFromEnv('BENCH_DELIVERIES', 2_000_000),
  perNotification: positiveIntegerFromEnv('BENCH_PER_NOTIFICATION', 1000),
  recentDeliveries: positiveIntegerFromEnv('BENCH_RECENT_DELIVERIES', 200_000),
  sendRate: positiveIntegerFromEnv('BENCH_SEND_RATE', 20),
  windowSeconds: positiveIntegerFromEnv('BENCH_WINDOW_SECONDS', 5),
  leadSeconds: positiveIntegerFromEnv('BENCH_LEAD_SECONDS', 10),
  batchSize: positiveIntegerFromEnv('BENCH_BATCH_SIZE', retentionBatchSize),
  retentionDays: 30,
};

const log = (line = '') => process.stdout.write(`${line}\n`);
const silent = createLogger('silent');

// Everything the run opened, closed in reverse order whatever happens.
const cleanups = createCleanups();

type Seeded = { old: FinishedNotifications; recent: { notifications: number; deliveries: number } };

/** Old notifications past the retention with their expired keys, and recent ones that must stay. */
async function seed(url: string, applicationId: string): Promise<Seeded> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await bulkLoad(
      client,
      ['deliveries', 'delivery_events'],
      async () => {
        const notifications = (deliveries: number) => Math.ceil(deliveries / settings.perNotification);
        const common = { applicationId, perNotification: settings.perNotification };
        const old = await seedFinishedNotifications(client, { ...common, count: notifications(settings.deliveries), ageDays: settings.retentionDays + 10, withKeys: true });
        const recent = await seedFinishedNotifications(client, { ...common, count: notifications(settings.recentDeliveries), ageDays: 1, withKeys: false });
        return { old, recent: { notifications: recent.notifications, deliveries: recent.deliveries } };
      },
      log,
    );
  } finally {
    await client.end();
  }
}

type Phase = 'lead' | 'pause' | 'deleting';
type Sent = Paced<Phase>;

type Cpu = { bench: number; postgres: Map<number, number>; machine: { busy: number; total: number } };
/**
 * CPU seconds so far of this process, of each Postgres process working for the benchmark's
 * database (its connections and autovacuum workers: other users of the server are "others"), and
 * of the whole machine.
 */
async function cpuNow(monitor: pg.Client): Promise<Cpu> {
  const { rows } = await monitor.query<{ pid: number }>('select pid from pg_stat_activity where datname = current_database()');
  return {
    bench: cpuSeconds(process.pid),
    postgres: new Map(rows.map(({ pid }) => [pid, cpuSeconds(pid)])),
    machine: machineCpu(),
  };
}
type Cores = { seconds: number; bench: number; postgres: number; busy: number };
/** Adds the CPU used between two snapshots to a phase's total (CPU seconds, and wall seconds). */
function addCpu(total: Cores, before: Cpu, after: Cpu, seconds: number) {
  const machineTotal = after.machine.total - before.machine.total;
  total.seconds += seconds;
  total.bench += after.bench - before.bench;
  // A connection opened meanwhile counts from zero; one closed meanwhile is missed (pools keep theirs).
  for (const [pid, used] of after.postgres) total.postgres += used - (before.postgres.get(pid) ?? 0);
  total.busy += machineTotal > 0 ? ((after.machine.busy - before.machine.busy) / machineTotal) * os.availableParallelism() * seconds : 0;
}
const cores = (total: Cores) => ({
  bench: total.bench / total.seconds,
  postgres: total.postgres / total.seconds,
  others: Math.max(0, (total.busy - total.bench - total.postgres) / total.seconds),
});

async function databaseSize(orm: Orm): Promise<string> {
  const [row] = await orm.em.fork().execute<{ size: string }[]>('select pg_size_pretty(pg_database_size(current_database())) as size');
  return row.size;
}

/** The API's ORM on the migrated database, with an application and a token that may send. */
async function openApiDatabase(url: string): Promise<{ apiOrm: Orm; applicationId: string; token: string }> {
  const apiOrm = await openOrm(url, 10);
  cleanups.add('api orm', () => apiOrm.close());
  await migrate(apiOrm);
  const em = apiOrm.em.fork();
  const application = await createApplication(em, 'Retention benchmark');
  const token = (await createToken(em, { applicationId: application.id, name: 'bench', abilities: ['*'] })).plaintext;
  return { apiOrm, applicationId: application.id, token };
}

async function seedAndDescribe(url: string, apiOrm: Orm, applicationId: string): Promise<Seeded> {
  const seedStarted = performance.now();
  const seeded = await seed(url, applicationId);
  log(
    `seeded in ${fixed((performance.now() - seedStarted) / 1000, 1)} s: ${integer(seeded.old.notifications)} notifications ` +
      `${settings.retentionDays + 10} days old with ${integer(seeded.old.deliveries)} deliveries, ${integer(seeded.old.events)} events, ` +
      `${integer(seeded.old.keys)} expired keys; ${integer(seeded.recent.notifications)} recent ones with ` +
      `${integer(seeded.recent.deliveries)} deliveries (to keep); database ${await databaseSize(apiOrm)}`,
  );
  return seeded;
}

type Send = (key: string) => Promise<string | null>;

/** The API (startBenchApi) and a send through it; the send answers null when it got its 202. */
async function startApi(url: string, apiOrm: Orm, token: string): Promise<Send> {
  const base = await startBenchApi(url, apiOrm, cleanups, 4);
  const body = JSON.stringify({
    recipients: { user_ids: Array.from({ length: 10 }, (_, index) => `user-${index + 1}`) },
    notification: { title: 'Order shipped', body: 'Your order is on its way' },
    data: { order_id: 1234, kind: 'shipping' },
    options: { priority: 'high', ttl: 3600 },
  });
  return async (key) => {
    const response = await fetch(`${base}/api/v1/notifications`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
      body,
    });
    const text = await response.text();
    return response.status === 202 ? null : `${response.status} ${text.slice(0, 200)}`;
  };
}

/** Not measured: the validator's compile, connections, JIT. */
async function warmUp(send: Send, runId: string): Promise<void> {
  for (let index = 0; index < 50; index++) {
    const problem = await send(`warmup-${runId}-${index}`);
    if (problem) throw new Error(`warm-up send refused: ${problem}`);
  }
}

type Removed = { notifications: number; deliveries: number; events: number; idempotencyKeys: number };
type Deletion = {
  sent: Sent[];
  batches: RetentionBatch[];
  removed: Removed;
  runs: number;
  deletingSeconds: number;
  wallSeconds: number;
  cpu: Record<'baseline' | 'deleting', Cores>;
};

/** The lead-in, then retention runs, each followed by a pause, until it is done; open-loop sends throughout. */
async function deleteUnderLoad(url: string, workerOrm: Orm, send: Send, runId: string): Promise<Deletion> {
  log(
    `sends: ${settings.sendRate}/s, open loop, throughout; retention: ${integer(settings.batchSize)} rows per statement (as in production), ` +
      `runs of ${settings.windowSeconds} s each followed by ${settings.windowSeconds} s without, after a ${settings.leadSeconds} s lead-in`,
  );
  const monitor = new pg.Client({ connectionString: url });
  await monitor.connect();
  cleanups.add('monitor connection', () => monitor.end());
  let phase: Phase = 'lead';
  const cpu: Record<'baseline' | 'deleting', Cores> = {
    baseline: { seconds: 0, bench: 0, postgres: 0, busy: 0 },
    deleting: { seconds: 0, bench: 0, postgres: 0, busy: 0 },
  };
  const timedPhase = async (name: Phase, body: () => Promise<void>) => {
    phase = name;
    const before = await cpuNow(monitor);
    const started = performance.now();
    await body();
    const seconds = (performance.now() - started) / 1000;
    addCpu(cpu[name === 'deleting' ? 'deleting' : 'baseline'], before, await cpuNow(monitor), seconds);
    return seconds;
  };
  const load = openLoop(settings.sendRate, (index) => send(`send-${runId}-${index}`), () => phase);

  const batches: RetentionBatch[] = [];
  const removed: Removed = { notifications: 0, deliveries: 0, events: 0, idempotencyKeys: 0 };
  let runs = 0;
  let deletingSeconds = 0;
  let wallStarted: number;
  let wallSeconds = 0;
  try {
    await timedPhase('lead', () => sleep(settings.leadSeconds * 1000));
    wallStarted = performance.now();
    for (let done = false; !done; ) {
      deletingSeconds += await timedPhase('deleting', async () => {
        runs += 1;
        const result = await runMaintenance(workerOrm, silent, {
          retentionDays: settings.retentionDays,
          batchSize: settings.batchSize,
          budgetMs: settings.windowSeconds * 1000,
          onBatch: (batch) => batches.push(batch),
        });
        removed.notifications += result.notifications;
        removed.deliveries += result.deliveries;
        removed.events += result.events;
        removed.idempotencyKeys += result.idempotencyKeys;
        done = result.done;
      });
      if (done) wallSeconds = (performance.now() - wallStarted) / 1000;
      await timedPhase('pause', () => sleep(settings.windowSeconds * 1000));
    }
  } finally {
    await load.stop();
  }
  if (load.refused.length > 0) throw new Error(`${load.refused.length} sends refused, e.g. ${load.refused[0]}`);
  return { sent: load.sent, batches, removed, runs, deletingSeconds, wallSeconds, cpu };
}

/** Everything old is gone, everything recent is there. */
async function checkRetained(workerOrm: Orm, seeded: Seeded): Promise<void> {
  const [left] = await workerOrm.em
    .fork()
    .execute<{ old_notifications: number; old_deliveries: number; old_events: number; recent_deliveries: number }[]>(
      `select (select count(*) from notifications where created_at < now() - make_interval(days => ?))::int as old_notifications,
              (select count(*) from deliveries where created_at < now() - make_interval(days => ?))::int as old_deliveries,
              (select count(*) from delivery_events where occurred_at < now() - make_interval(days => ?))::int as old_events,
              (select count(*) from deliveries where created_at >= now() - make_interval(days => ?))::int as recent_deliveries`,
      [settings.retentionDays, settings.retentionDays, settings.retentionDays, settings.retentionDays],
    );
  if (left.old_notifications + left.old_deliveries + left.old_events > 0 || left.recent_deliveries !== seeded.recent.deliveries) {
    throw new Error(`after retention: ${JSON.stringify(left)}; expected nothing old and ${seeded.recent.deliveries} recent deliveries`);
  }
}

function summarize(deletion: Deletion) {
  const { removed } = deletion;
  const latencies = (...phases: Phase[]) => deletion.sent.filter((sent) => phases.includes(sent.phase)).map((sent) => sent.ms);
  const baseline = latencies('lead', 'pause');
  const during = latencies('deleting');
  return {
    baseline,
    lead: latencies('lead'),
    during,
    rows: removed.notifications + removed.deliveries + removed.events + removed.idempotencyKeys,
    statementMs: deletion.batches.filter((batch) => batch.rows > 0).map((batch) => batch.ms),
    ratio: percentile(during, 99) / percentile(baseline, 99),
    baselineCores: cores(deletion.cpu.baseline),
    deletingCores: cores(deletion.cpu.deleting),
  };
}

function report(deletion: Deletion): void {
  const { removed, deletingSeconds, wallSeconds, runs } = deletion;
  const { baseline, lead, during, rows, statementMs, ratio, baselineCores, deletingCores } = summarize(deletion);
  const p = percentile;
  const row = (label: string, ...cells: string[]) => log(`  ${label.padEnd(46)}${cells.map((cell) => cell.padStart(11)).join('')}`);
  const latencyRow = (label: string, values: number[]) =>
    row(label, fixed(p(values, 50), 1), fixed(p(values, 99), 1), fixed(Math.max(...values), 1), integer(values.length));

  log();
  log('Summary');
  row('rows deleted', integer(rows));
  row('  notifications / deliveries / events / keys', integer(removed.notifications), integer(removed.deliveries), integer(removed.events), integer(removed.idempotencyKeys));
  row('deletion duration (s): retention running', fixed(deletingSeconds, 1));
  row(`  first run start → last run end (with pauses)`, fixed(wallSeconds, 1));
  row('rows/s while running', integer(rows / deletingSeconds));
  row('  runs / deleting statements', integer(runs), integer(statementMs.length));
  row('statement duration (ms)', 'p50', 'p99', 'max');
  row(`  at most ${integer(settings.batchSize)} rows each`, fixed(p(statementMs, 50), 1), fixed(p(statementMs, 99), 1), fixed(Math.max(...statementMs), 1));
  row('send latency (ms), from when due', 'p50', 'p99', 'max', 'sends');
  latencyRow('  baseline: nothing deleting (lead-in + pauses)', baseline);
  latencyRow(`    of which the lead-in alone`, lead);
  latencyRow('  during deletion', during);
  row('  ratio during / baseline', `p50 ${fixed(p(during, 50) / p(baseline, 50), 2)}`, `p99 ${fixed(ratio, 2)}`);
  // The pauses follow a run: autovacuum of the emptied pages may still be working in them.
  row('  ratio during / lead-in alone', `p50 ${fixed(p(during, 50) / p(lead, 50), 2)}`, `p99 ${fixed(p(during, 99) / p(lead, 99), 2)}`);
  row('cores used', 'this proc.', 'its PG', 'others');
  row('  baseline', fixed(baselineCores.bench, 2), fixed(baselineCores.postgres, 2), fixed(baselineCores.others, 2));
  row('  during deletion', fixed(deletingCores.bench, 2), fixed(deletingCores.postgres, 2), fixed(deletingCores.others, 2));
  const others = Math.max(baselineCores.others, deletingCores.others);
  if (others > 0.3) log(`  NOTE: other processes used up to ${fixed(others, 2)} cores meanwhile: the figures are noisier than on a quiet machine.`);
}

function writeFigures(seeded: Seeded, deletion: Deletion): void {
  const { removed, deletingSeconds, wallSeconds, runs } = deletion;
  const { baseline, lead, during, rows, statementMs, ratio, baselineCores, deletingCores } = summarize(deletion);
  const p = percentile;
  const figures = {
    settings,
    seeded,
    removed,
    rows,
    deletingSeconds,
    wallSeconds,
    rowsPerSecond: rows / deletingSeconds,
    runs,
    statements: { count: statementMs.length, p50: p(statementMs, 50), p99: p(statementMs, 99), max: Math.max(...statementMs) },
    sends: {
      baseline: { p50: p(baseline, 50), p99: p(baseline, 99), count: baseline.length },
      lead: { p50: p(lead, 50), p99: p(lead, 99), count: lead.length },
      during: { p50: p(during, 50), p99: p(during, 99), count: during.length },
      ratioP99: ratio,
    },
    cores: { baseline: baselineCores, deleting: deletingCores },
  };
  writeResults('retention', figures);
}

async function run(): Promise<number> {
  const adminUrl = env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 17);
  const database = `herald_bench_retention_${stamp}`;

  log(`Herald retention benchmark, ${new Date().toISOString()}`);
  log(machineLine(database, adminUrl));

  const url = await createBenchDatabase(adminUrl, database, cleanups);
  const { apiOrm, applicationId, token } = await openApiDatabase(url);
  const seeded = await seedAndDescribe(url, apiOrm, applicationId);
  const send = await startApi(url, apiOrm, token);
  const runId = randomBytes(4).toString('hex');
  await warmUp(send, runId);

  // Retention as the maintenance job runs it, with its own pool (a worker process's).
  const workerOrm = await openOrm(url, 2);
  cleanups.add('worker orm', () => workerOrm.close());
  const deletion = await deleteUnderLoad(url, workerOrm, send, runId);
  await checkRetained(workerOrm, seeded);
  report(deletion);
  writeFigures(seeded, deletion);
  return 0;
}

await runBenchmark('bench-retention', run, cleanups);

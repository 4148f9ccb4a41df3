// What the benchmarks (fanout, retention, api, chaos, soak) share besides their scenarios: child
// processes, the simulators in their own process and their /__sim control endpoints, cleanup in
// reverse order, CPU and memory figures from /proc, small statistics, an open-loop load, and bulk
// rows of finished notifications. Databases to run on: test/support/seed.ts.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import type { Orm } from '../src/db/orm.ts';
import { openDatabaseProbe, watchDatabase } from '../src/db/outage.ts';
import { openPipelinedPool } from '../src/db/pipelined-pool.ts';
import { tokenCacheMs } from '../src/domain/applications.ts';
import { createWebhookOutbox } from '../src/domain/webhook-outbox.ts';
import { createApp } from '../src/http/app.ts';
import { loadDocument } from '../src/http/document.ts';
import { openSendLimiter } from '../src/http/send-limiter.ts';
import { createLogger } from '../src/logging/logger.ts';
import { defaultQueueSchema } from '../src/service/config.ts';
import { fanoutQueue, startBoss, tagSummaryQueue, webhookEnqueuer } from '../src/worker/queue.ts';
import { simulatorKeys, type SimulatorKeys } from '../src/cli/simulate.ts';
// Ports as the tests take them.
export { freePort } from '../test/support/ports.ts';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const herald = path.join(root, 'bin', 'herald');

export type Launched = {
  name: string;
  child: ChildProcess;
  pid: number;
  /** The last lines it wrote (stdout and stderr), for the report of a failed run. */
  lines: string[];
  /** Lines that look like pino warnings or errors (level ≥ 40). */
  problems: string[];
  /** Resolves with the first stdout line matching `match`, rejects when the process exits first. */
  waitForLine(match: (line: string) => boolean, timeoutMs: number): Promise<string>;
  /** Calls `listener` with each stdout line from now on, until the returned function is called. */
  onLine(listener: (line: string) => void): () => void;
  exited(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
};

/**
 * `logFile`: every line it writes is also appended there (the evidence of a chaos run). `ipc`: a
 * Node process (directly or through a script that execs Node) gets a message channel (`child.send`).
 */
export function launch(
  name: string,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; logFile?: string; ipc?: boolean },
): Launched {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe', ...(options.ipc ? ['ipc' as const] : [])] });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  const log = options.logFile ? createWriteStream(options.logFile, { flags: 'a' }) : null;
  const lines: string[] = [];
  const problems: string[] = [];
  const waiters = new Set<{ match: (line: string) => boolean; resolve: (line: string) => void }>();
  const listeners = new Set<(line: string) => void>();
  const onLine = (line: string, stdout: boolean) => {
    log?.write(`${line}\n`);
    lines.push(line);
    if (lines.length > 300) lines.shift();
    if (/^\{.*"level":(4|5|6)\d/.test(line) && problems.length < 1000) problems.push(line);
    if (!stdout) return;
    for (const listener of listeners) listener(line);
    for (const waiter of waiters) {
      if (waiter.match(line)) {
        waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  };
  createInterface({ input: child.stdout! }).on('line', (line) => onLine(line, true));
  createInterface({ input: child.stderr! }).on('line', (line) => onLine(line, false));
  let done = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      done = true;
      log?.end(`-- ${name} (pid ${child.pid}) exited: ${code ?? signal} at ${new Date().toISOString()}\n`);
      resolve();
    }),
  );
  return {
    name,
    child,
    pid: child.pid,
    lines,
    problems,
    exited: () => done,
    waitForLine(match, timeoutMs) {
      return new Promise<string>((resolve, reject) => {
        const waiter = { match, resolve: (line: string) => (clearTimeout(timer), resolve(line)) };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`${name} printed nothing expected within ${timeoutMs} ms:\n${lines.join('\n')}`));
        }, timeoutMs);
        waiters.add(waiter);
        void exit.then(() => {
          if (!waiters.delete(waiter)) return;
          clearTimeout(timer);
          reject(new Error(`${name} exited (${child.exitCode ?? child.signalCode}):\n${lines.join('\n')}`));
        });
      });
    },
    onLine(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async stop(graceMs = 30_000) {
      if (done) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
    },
  };
}

/** Polls `url` until it answers 200. */
export async function waitForHttp(url: string, timeoutMs: number, alive: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!alive()) throw new Error(`${url}: the process exited`);
    try {
      const response = await fetch(url);
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(50);
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
}

/** A request to a simulator's /__sim endpoints (HTTPS, HTTP/1.1, trusting its certificate). */
export function simulatorControl(base: string, ca: string, method: 'GET' | 'DELETE' | 'PUT', path: string, body?: unknown): Promise<string> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) };
    const request = httpsRequest(new URL(path, base), { method, ca, headers, agent: false, timeout: 60_000 }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if ((response.statusCode ?? 0) >= 300) reject(new Error(`${method} ${base}${path}: ${response.statusCode} ${body}`));
        else resolve(body);
      });
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`${method} ${base}${path} timed out`)));
    request.on('error', reject);
    request.end(payload);
  });
}

export type SimulatorsProcess = { process: Launched; apns: string; fcm: string; webPush: string; ca: string; caFile: string; keys: SimulatorKeys };

/**
 * `herald simulate` as its own process on ephemeral ports (the JSON line it prints names them), so
 * that it outlives any Herald process a run kills, and its /__sim endpoints tell what it received.
 * The caller stops it. `record: false` keeps counters only.
 */
export async function startSimulatorsProcess(
  dataDir: string,
  options: { record?: boolean; env?: NodeJS.ProcessEnv; logFile?: string } = {},
): Promise<SimulatorsProcess> {
  const caFile = path.join(dataDir, 'ca.pem');
  const args = ['simulate', '--apns-port', '0', '--fcm-port', '0', '--webpush-port', '0', '--ca-file', caFile, ...(options.record === false ? ['--no-record'] : [])];
  const env = options.env ?? process.env;
  const child = launch('herald simulate', herald, args, {
    cwd: root,
    env: { PATH: env.PATH, HOME: env.HOME, HERALD_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    logFile: options.logFile,
  });
  try {
    const line = await child.waitForLine((text) => text.startsWith('{'), 30_000);
    const printed = JSON.parse(line) as { apns: string; fcm: string; webPush: string; caFile: string; keysDir: string };
    // The keys `simulate` just created in the fresh data folder: the credentials the simulators accept.
    const keys = simulatorKeys(printed.keysDir);
    return { process: child, apns: printed.apns, fcm: printed.fcm, webPush: printed.webPush, ca: readFileSync(printed.caFile, 'utf8'), caFile: printed.caFile, keys };
  } catch (error) {
    await child.stop(5_000);
    throw error;
  }
}

/** Things to close at the end of a run, closed in reverse order whatever happens; run() is idempotent. */
export function createCleanups(report: (line: string) => void = (line) => process.stderr.write(`${line}\n`)) {
  const list: { name: string; run: () => Promise<void> }[] = [];
  let running: Promise<void> | null = null;
  return {
    add(name: string, run: () => Promise<void>) {
      list.push({ name, run });
    },
    run(): Promise<void> {
      running ??= (async () => {
        for (const { name, run } of list.reverse()) {
          try {
            await run();
          } catch (error) {
            report(`cleanup (${name}) failed: ${(error as Error).message}`);
          }
        }
      })();
      return running;
    },
  };
}

export type Cleanups = ReturnType<typeof createCleanups>;

/** A fresh database named `database` on the server of `adminUrl`, dropped by `cleanups`; answers its URL. */
export async function createBenchDatabase(adminUrl: string, database: string, cleanups: Cleanups): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database "${database}"`);
  } finally {
    await admin.end();
  }
  cleanups.add('database', async () => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(`drop database if exists "${database}" with (force)`);
    } finally {
      await client.end();
    }
  });
  return Object.assign(new URL(adminUrl), { pathname: `/${database}` }).toString();
}

/**
 * The API as `herald serve` composes it (service.ts), for `orm`'s database, on a port of its own,
 * closed by `cleanups`; answers its base URL. `pools`: the connections of the send and rate-limit pools.
 */
export async function startBenchApi(url: string, orm: Orm, cleanups: Cleanups, pools: number): Promise<string> {
  const silent = createLogger('silent');
  const probe = openDatabaseProbe(url);
  cleanups.add('database probe', () => probe.close());
  const outage = watchDatabase({ probe: probe.probe, database: url, logger: silent, roles: { api: true, worker: false } });
  cleanups.add('outage watch', async () => outage.stop());
  const boss = await startBoss(url, silent, { worker: false, schema: defaultQueueSchema, outage });
  cleanups.add('job queue', () => boss.stop({ graceful: false }));
  const sendLimiter = openSendLimiter(url, pools);
  cleanups.add('rate-limit pool', () => sendLimiter.close());
  const sends = openPipelinedPool(url, pools);
  cleanups.add('send pool', () => sends.close());
  const app = createApp({
    orm,
    sends,
    fanouts: fanoutQueue(boss),
    tagSummaries: tagSummaryQueue(boss),
    webhooks: createWebhookOutbox(webhookEnqueuer(boss)),
    logger: silent,
    document: loadDocument(),
    readiness: probe.probe,
    bodyLimit: '1mb',
    validateResponses: false,
    sendLimiter,
    outage,
    defaultSendPolicy: { quota: 1_000_000_000, windowSeconds: 60 },
    tokenCacheMs,
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const listening = app.listen(0, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(listening)));
  });
  cleanups.add('api server', () => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A positive whole number from the environment, or `fallback` when the variable is unset. */
export function positiveIntegerFromEnv(name: string, fallback: number): number {
  const value = process.env[name] ? Number(process.env[name]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

/** What bin/herald sets unless it is set already. */
const binHeraldSettings = ['HERALD_NODE_OPTIONS', 'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_'];

/**
 * The environment of a Herald process on `databaseUrl` that pushes to the simulators, logging at
 * `info` as docker-compose.yml runs it: a line per request is part of what a deployment pays.
 */
export function heraldEnvironment(options: {
  databaseUrl: string;
  port: number;
  dataDir: string;
  apns: string;
  fcm: string;
  caFile: string;
  credentialsKey: Buffer;
  /** The Web Push simulator: subscriptions on its host are accepted, and reached on this machine. */
  webPush?: string;
}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: options.databaseUrl,
    HOST: '127.0.0.1',
    PORT: String(options.port),
    LOG_LEVEL: 'info',
    HERALD_DATA_DIR: options.dataDir,
    HERALD_APNS_ENDPOINT: options.apns,
    HERALD_FCM_ENDPOINT: options.fcm,
    HERALD_PROVIDER_CA_FILE: options.caFile,
    HERALD_CREDENTIALS_KEY: options.credentialsKey.toString('base64'),
    HERALD_SEND_QUOTA: '1000000',
    ...(options.webPush ? { HERALD_WEBPUSH_HOSTS: new URL(options.webPush).host, HERALD_WEBPUSH_ALLOW_PRIVATE: 'true' } : {}),
    // bin/herald's Node flags (set, even empty, they replace its own) and malloc settings, to compare them.
    ...Object.fromEntries(binHeraldSettings.filter((name) => process.env[name] !== undefined).map((name) => [name, process.env[name]])),
  };
}

/**
 * A benchmark's main: runs it, cleans up whatever happens (a failure, a stray error, SIGINT or
 * SIGTERM), and exits with its code (1 on a failure, 130 on a signal).
 */
export async function runBenchmark(name: string, run: () => Promise<number>, cleanups: { run(): Promise<void> }): Promise<never> {
  let interrupted = false;
  for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
    process.on(event, (error) => {
      process.stderr.write(`\n${name}: ${event}: ${(error as Error)?.stack ?? error}\n`);
      void cleanups.run().then(() => process.exit(1));
    });
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (interrupted) return;
      interrupted = true;
      process.stderr.write(`\n${signal}: cleaning up\n`);
      void cleanups.run().then(() => process.exit(130));
    });
  }
  let exitCode: number;
  try {
    exitCode = await run();
  } catch (error) {
    process.stderr.write(`\n${name}: the run failed: ${(error as Error).stack ?? error}\n`);
    exitCode = 1;
  } finally {
    await cleanups.run();
  }
  process.exit(exitCode);
}

/** One push a simulator received, with the ids Herald put in it. */
export type ReceivedPush = { provider: 'apns' | 'fcm'; deliveryId: string | undefined; notificationId: string | undefined; status: number; at: number };

/** Everything both simulators received since their last clear (they must be recording). */
export async function receivedPushes(sims: SimulatorsProcess): Promise<ReceivedPush[]> {
  const [apns, fcm] = await Promise.all(
    [sims.apns, sims.fcm].map(async (base) => JSON.parse(await simulatorControl(base, sims.ca, 'GET', '/__sim/received'))),
  );
  if (apns.counters.unrecorded > 0 || fcm.counters.unrecorded > 0) throw new Error('the simulators stopped recording (record limit reached)');
  type Apns = { payload?: { herald?: { delivery_id?: string; notification_id?: string } }; status: number; at: number };
  type Fcm = { message?: { data?: { herald_delivery_id?: string; herald_notification_id?: string } }; status: number; at: number };
  return [
    ...(apns.received as Apns[]).map((push) => ({
      provider: 'apns' as const,
      deliveryId: push.payload?.herald?.delivery_id,
      notificationId: push.payload?.herald?.notification_id,
      status: push.status,
      at: push.at,
    })),
    ...(fcm.received as Fcm[]).map((push) => ({
      provider: 'fcm' as const,
      deliveryId: push.message?.data?.herald_delivery_id,
      notificationId: push.message?.data?.herald_notification_id,
      status: push.status,
      at: push.at,
    })),
  ];
}

/** Forgets what the simulators received and sets their latency (null: answer at once). */
export async function resetSimulators(sims: SimulatorsProcess, latency: number | { min: number; max: number } | null = null): Promise<void> {
  await Promise.all(
    [sims.apns, sims.fcm].map(async (base) => {
      await simulatorControl(base, sims.ca, 'DELETE', '/__sim/received');
      await simulatorControl(base, sims.ca, 'PUT', '/__sim/rules', { rules: [], latency });
    }),
  );
}

const clockTicks = 100;

/** CPU seconds (user + system) a process has used so far, all its threads; 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/**
 * CPU seconds a process's main thread has used so far: for Node, the event loop, where all its
 * JavaScript runs; the rest of its CPU is its other threads' (V8's garbage-collection helpers,
 * mostly, and libuv's pool).
 */
export function mainThreadCpuSeconds(pid: number): number {
  return statCpuSeconds(`/proc/${pid}/task/${pid}/stat`);
}

function statCpuSeconds(file: string): number {
  try {
    const stat = readFileSync(file, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state is field 3, utime 14, stime 15 (1-based, man proc).
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  } catch {
    return 0;
  }
}

/** CPU seconds so far of each process named `name` (e.g. Postgres' backends), by pid. */
export function cpuSecondsByProcess(name: string): Map<number, number> {
  const seconds = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) seconds.set(Number(entry), cpuSeconds(Number(entry)));
    } catch {
      // gone meanwhile
    }
  }
  return seconds;
}

/**
 * CPU seconds such processes used between two readings, process by process: one that ended
 * meanwhile (a pool closing an idle connection) takes its whole total out of a plain sum, which
 * could then go down, below zero even; here it only leaves out its share since the first reading.
 */
export function cpuSecondsBetween(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, seconds] of after) total += seconds - (before.get(pid) ?? 0);
  return total;
}

/** Busy and total CPU seconds of the whole machine so far (all cores), from /proc/stat. */
/** The 1, 5 and 15 minute load averages, as a report prints them. */
export const loadAverage = (): string => os.loadavg().map((load) => load.toFixed(2)).join(' ');

/** The first line of a benchmark's report: the machine, its load, Node, and the database used. */
export function machineLine(database: string, adminUrl: string): string {
  return `machine: ${os.availableParallelism()} CPUs, load average ${loadAverage()}; Node ${process.version}; database ${database} on ${new URL(adminUrl).host}`;
}

export function machineCpu(): { busy: number; total: number } {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const ticks = values.map(Number);
  const total = ticks.reduce((sum, value) => sum + value, 0);
  // idle and iowait
  const idle = ticks[3] + (ticks[4] ?? 0);
  return { busy: (total - idle) / clockTicks, total: total / clockTicks };
}

/** What a run started from, read when a benchmark loads: the code it ran and the machine it found. */
const started = { at: new Date(), loadAverage: os.loadavg(), cpu: machineCpu(), commit: gitCommit() };

/** The commit checked out, and whether the tree differs from it (earlier results aside), so a figure names its code. */
function gitCommit(): { sha: string | null; dirty: boolean | null; changedFiles: number; changed: string[] } {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const sha = git('rev-parse', 'HEAD').trim();
    const changed = git('status', '--porcelain', '--', '.', ':(exclude)bench/results').split('\n').filter(Boolean).map((line) => line.slice(3));
    return { sha, dirty: changed.length > 0, changedFiles: changed.length, changed: changed.slice(0, 50) };
  } catch {
    return { sha: null, dirty: null, changedFiles: 0, changed: [] };
  }
}

/**
 * Writes a run's figures as JSON, to `BENCH_JSON` when it is set, else to
 * bench/results/<bench>-<UTC start time>.json: runs over time are kept as data beside the code,
 * and a figure a document quotes names the file it came from. The file also records the commit
 * and the machine (its CPUs, the load when the run started and ended, how busy it was meanwhile).
 * Returns the path written.
 */
export function writeResults(bench: string, figures: Record<string, unknown>): string {
  const stamp = started.at.toISOString().slice(0, 19).replaceAll(':', '-');
  const file = process.env.BENCH_JSON || path.join(root, 'bench', 'results', `${bench}-${stamp}Z.json`);
  const cpu = machineCpu();
  const elapsed = cpu.total - started.cpu.total;
  const result = {
    bench,
    startedAt: started.at.toISOString(),
    endedAt: new Date().toISOString(),
    commit: started.commit,
    machine: {
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model ?? null,
      memoryMb: Math.round(os.totalmem() / 2 ** 20),
      node: process.version,
      loadAverageAtStart: started.loadAverage,
      loadAverageAtEnd: os.loadavg(),
      // Cores busy on average over the run, every process counted: the benchmark's own and others'.
      busyCores: elapsed > 0 ? ((cpu.busy - started.cpu.busy) / elapsed) * os.availableParallelism() : null,
    },
    ...figures,
  };
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`figures written to ${path.relative(process.cwd(), file) || file}\n`);
  return file;
}

/** A /proc/<pid>/status field in kB (VmHWM: peak resident set size). */
/** What a process started through bin/herald runs: the compiled build or the TypeScript (it picks the build only while fresh). */
export function heraldEntry(pid: number): string {
  try {
    const main = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').find((arg) => arg.endsWith('cli/main.js') || arg.endsWith('cli/main.ts'));
    return main?.endsWith('.js') ? 'the compiled build' : main ? 'the TypeScript source' : 'an unknown entry';
  } catch {
    return 'an unknown entry';
  }
}

export function statusKb(pid: number, field: string): number | null {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/** Nearest-rank percentile of unsorted values. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** A latency's figures as the benchmarks print and record them. */
export function spread(values: number[]): { p50: number; p99: number; max: number; count: number } {
  return { p50: percentile(values, 50), p99: percentile(values, 99), max: Math.max(...values), count: values.length };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

export const integer = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : 'n/a');
export const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');

/**
 * What an open loop measured of one request: from when it was due (its phase then) to when it was
 * answered, and how late the loop itself sent it (part of `ms`).
 */
export type Paced<P extends string> = { index: number; phase: P; ms: number; lateMs: number };

/**
 * Open loop: a request is due every 1/rate s whether or not the previous ones have been answered,
 * and its latency counts from when it was due, so a stall shows in full (no coordinated omission).
 * A request belongs to the phase it was due in. `send` answers null when it got what it expected,
 * else what went wrong.
 */
export function openLoop<P extends string>(rate: number, send: (index: number) => Promise<string | null>, phase: () => P) {
  const interval = 1000 / rate;
  const sent: Paced<P>[] = [];
  const refused: string[] = [];
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  const loop = (async () => {
    let due = performance.now();
    for (let index = 0; !stopping; index++) {
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const dueAt = due;
      const dueIn = phase();
      // A timer may fire a fraction of a millisecond early: that is not being late.
      const lateMs = Math.max(0, performance.now() - dueAt);
      due += interval;
      const request: Promise<void> = send(index)
        .then((problem) => {
          if (problem) refused.push(problem);
          else sent.push({ index, phase: dueIn, ms: performance.now() - dueAt, lateMs });
        })
        .catch((error: Error) => {
          refused.push(error.message);
        })
        .finally(() => inFlight.delete(request));
      inFlight.add(request);
    }
    await Promise.all(inFlight);
  })();
  return {
    sent,
    refused,
    async stop() {
      stopping = true;
      await loop;
    },
  };
}

/** SQL for an id ordered by time like Herald's UUIDv7: the first 6 bytes are `at` in milliseconds, the rest random. */
export const timeOrderedId = (at: string) =>
  `encode(substring(int8send((extract(epoch from ${at}) * 1000)::bigint) from 3) || substring(uuid_send(gen_random_uuid()) from 7), 'hex')::uuid`;

/**
 * Runs `fill` (set-based inserts on `client`) far faster than row by row: foreign-key triggers
 * off while it runs when the role may do that (the rows must be consistent by construction), and
 * the secondary indexes of `tables` dropped before and built once the rows are in, exactly as the
 * migrations define them. Then statistics and the visibility map are brought up to date, as after
 * days of traffic.
 */
export async function bulkLoad<T>(client: pg.Client, tables: string[], fill: () => Promise<T>, note: (line: string) => void): Promise<T> {
  try {
    await client.query(`set session_replication_role = replica`);
  } catch {
    note('note: not allowed to turn foreign-key triggers off while seeding; seeding takes longer');
  }
  const { rows: indexes } = await client.query<{ table: string; index: string; definition: string; constraint: string | null; constraintDefinition: string | null }>(
    `select i.indrelid::regclass::text as table, i.indexrelid::regclass::text as index, pg_get_indexdef(i.indexrelid) as definition,
            c.conname as constraint, pg_get_constraintdef(c.oid) as "constraintDefinition"
       from pg_index i left join pg_constraint c on c.conindid = i.indexrelid and c.contype = 'u'
      where i.indrelid = any($1::regclass[]) and not i.indisprimary`,
    [tables],
  );
  for (const index of indexes) {
    await client.query(index.constraint ? `alter table ${index.table} drop constraint "${index.constraint}"` : `drop index ${index.index}`);
  }
  const filled = await fill();
  for (const index of indexes) {
    await client.query(index.constraint ? `alter table ${index.table} add constraint "${index.constraint}" ${index.constraintDefinition}` : index.definition);
  }
  await client.query('reset session_replication_role');
  // The load ran without the installations' triggers: what they keep is computed again.
  if (tables.includes('installations')) await client.query('select audience_rebuild()');
  await client.query('vacuum analyze');
  return filled;
}

export type FinishedNotifications = { notifications: number; deliveries: number; events: number; keys: number };

/**
 * `count` completed notifications of `perNotification` deliveries each (half iOS, half Android,
 * all accepted, to installations that need not exist, one in ten with a `received` event),
 * `ageDays` old and a second apart, with their idempotency keys when `withKeys`. Time-ordered ids.
 */
export async function seedFinishedNotifications(
  client: pg.Client,
  options: { applicationId: string; count: number; perNotification: number; ageDays: number; withKeys: boolean },
): Promise<FinishedNotifications> {
  const users = Array.from({ length: Math.ceil(options.perNotification / 2) }, (_, index) => `user-${index + 1}`);
  const { rows } = await client.query<{ id: string }>(
    `insert into notifications (id, application_id, status, title, body, data, options, user_ids, created_at, processing_started_at, completed_at)
     select ${timeOrderedId('at')}, $1, 'completed', 'Order shipped', 'Your order is on its way', '{"order_id": 1234}',
            '{"ttl": 3600}', $2::text[], at, at, at + interval '2 seconds'
       from (select now() - make_interval(days => $3) - make_interval(secs => n) as at from generate_series(1, $4) n) s
     returning id`,
    [options.applicationId, users, options.ageDays, options.count],
  );
  const ids = rows.map((row) => row.id);
  const { rows: counts } = await client.query<{ deliveries: number; events: number }>(
    `with d as (
       insert into deliveries (id, application_id, notification_id, client_installation_id, user_id, platform, state, attempts,
                               provider_message_id, created_at, last_attempt_at, completed_at)
       select ${timeOrderedId('n.created_at')}, n.application_id, n.id, 'installation-' || i, 'user-' || ((i + 1) / 2),
              case when i % 2 = 0 then 'ios' else 'android' end, 'accepted', 1, gen_random_uuid()::text,
              n.created_at, n.created_at, n.created_at + interval '1 second'
         from notifications n, generate_series(1, $2) i
        where n.id = any($1::uuid[])
       returning id, application_id, client_installation_id, created_at
     ), e as (
       insert into delivery_events (id, application_id, event_id, delivery_id, client_installation_id, type, occurred_at, received_at)
       select ${timeOrderedId('created_at')}, application_id, gen_random_uuid(), id, client_installation_id, 'received',
              created_at + interval '3 seconds', created_at + interval '4 seconds'
         from d where right(client_installation_id, 1) = '0'
       returning 1
     )
     select (select count(*) from d)::int as deliveries, (select count(*) from e)::int as events`,
    [ids, options.perNotification],
  );
  let keys = 0;
  if (options.withKeys) {
    const inserted = await client.query(
      `insert into idempotency_keys (id, application_id, key, request_hash, notification_id, created_at)
       select ${timeOrderedId('created_at')}, application_id, 'order-' || id, 'hash', id, created_at
         from notifications where id = any($1::uuid[])`,
      [ids],
    );
    keys = inserted.rowCount ?? 0;
  }
  return { notifications: ids.length, ...counts[0], keys };
}

const prefillDevice = { app_version: '1.0.0', os_version: '17.1', model: 'iPhone15,2', locale: 'en-US', timezone: 'Europe/Paris' };

/** `--prefill`, the one argument a benchmark takes: the other application's rows to write first, or null. */
export function prefillFromArguments(): { installations: number; deliveries: number } | null {
  const { values } = parseArgs({ options: { prefill: { type: 'boolean', default: false } } });
  if (!values.prefill) return null;
  return {
    installations: positiveIntegerFromEnv('BENCH_PREFILL_INSTALLATIONS', 1_000_000),
    deliveries: positiveIntegerFromEnv('BENCH_PREFILL_DELIVERIES', 2_000_000),
  };
}

export type Prefilled = { installations: number; old: FinishedNotifications; seconds: number; size: string };

/**
 * Another application's data, as a busy installation of Herald holds it: its installations, and
 * its finished notifications 20 days old (inside the default 30-day retention, so nothing deletes
 * them meanwhile) with 1,000 deliveries each, one in ten with an event.
 */
export async function prefillOther(
  url: string,
  counts: { installations: number; deliveries: number },
  log: (line: string) => void,
): Promise<Prefilled> {
  const started = performance.now();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const {
      rows: [application],
    } = await client.query<{ id: string }>(`insert into applications (id, name, created_at) values (${timeOrderedId('now()')}, 'Prefill', now()) returning id`);
    const filled = await bulkLoad(
      client,
      ['installations', 'deliveries', 'delivery_events'],
      async () => {
        const inserted = await client.query(
          `insert into installations
             (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
              registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
           select ${timeOrderedId('s.at')}, $1, 'installation-' || s.n, case when s.n % 2 = 0 then 'ios' else 'android' end,
                  md5(s.n::text) || md5((-s.n)::text), 'active', 'authorized', 'user-' || ((s.n + 1) / 2), $2::jsonb, s.at, s.at, s.at, s.at
             from (select n, now() - make_interval(days => 20) + make_interval(secs => n) as at from generate_series(1, $3) n) s`,
          [application.id, JSON.stringify(prefillDevice), counts.installations],
        );
        const perNotification = 1000;
        const old = await seedFinishedNotifications(client, {
          applicationId: application.id,
          count: Math.ceil(counts.deliveries / perNotification),
          perNotification,
          ageDays: 20,
          withKeys: false,
        });
        return { installations: inserted.rowCount ?? 0, old };
      },
      log,
    );
    const {
      rows: [{ size }],
    } = await client.query<{ size: string }>('select pg_size_pretty(pg_database_size(current_database())) as size');
    return { ...filled, seconds: (performance.now() - started) / 1000, size };
  } finally {
    await client.end();
  }
}

// What the benchmarks (fanout, chaos, soak) share besides their scenarios: child processes, the
// simulators in their own process and their /__sim control endpoints, cleanup in reverse order,
// CPU and memory figures from /proc, and small statistics. Databases to run on: test/support/seed.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { simulatorKeys, type SimulatorKeys } from '../src/cli/simulate.ts';

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
  exited(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
};

/** `logFile`: every line it writes is also appended there (the evidence of a chaos run). */
export function launch(
  name: string,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; logFile?: string },
): Launched {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  const log = options.logFile ? createWriteStream(options.logFile, { flags: 'a' }) : null;
  const lines: string[] = [];
  const problems: string[] = [];
  const waiters = new Set<{ match: (line: string) => boolean; resolve: (line: string) => void }>();
  const onLine = (line: string, stdout: boolean) => {
    log?.write(`${line}\n`);
    lines.push(line);
    if (lines.length > 300) lines.shift();
    if (/^\{.*"level":(4|5|6)\d/.test(line) && problems.length < 1000) problems.push(line);
    if (!stdout) return;
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
    async stop(graceMs = 30_000) {
      if (done) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
    },
  };
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
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

export type SimulatorsProcess = { process: Launched; apns: string; fcm: string; ca: string; caFile: string; keys: SimulatorKeys };

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
  const args = ['simulate', '--apns-port', '0', '--fcm-port', '0', '--ca-file', caFile, ...(options.record === false ? ['--no-record'] : [])];
  const env = options.env ?? process.env;
  const child = launch('herald simulate', herald, args, {
    cwd: root,
    env: { PATH: env.PATH, HOME: env.HOME, HERALD_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    logFile: options.logFile,
  });
  try {
    const line = await child.waitForLine((text) => text.startsWith('{'), 30_000);
    const printed = JSON.parse(line) as { apns: string; fcm: string; caFile: string; keysDir: string };
    // The keys `simulate` just created in the fresh data folder: the credentials the simulators accept.
    const keys = simulatorKeys(printed.keysDir);
    return { process: child, apns: printed.apns, fcm: printed.fcm, ca: readFileSync(printed.caFile, 'utf8'), caFile: printed.caFile, keys };
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

/** A positive whole number from the environment, or `fallback` when the variable is unset. */
export function positiveIntegerFromEnv(name: string, fallback: number): number {
  const value = process.env[name] ? Number(process.env[name]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

/** The environment of a Herald process on `databaseUrl` that pushes to the simulators. */
export function heraldEnvironment(options: {
  databaseUrl: string;
  port: number;
  dataDir: string;
  apns: string;
  fcm: string;
  caFile: string;
  credentialsKey: Buffer;
  logLevel?: string;
}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: options.databaseUrl,
    HOST: '127.0.0.1',
    PORT: String(options.port),
    LOG_LEVEL: options.logLevel ?? 'warn',
    HERALD_DATA_DIR: options.dataDir,
    HERALD_APNS_ENDPOINT: options.apns,
    HERALD_FCM_ENDPOINT: options.fcm,
    HERALD_PROVIDER_CA_FILE: options.caFile,
    HERALD_CREDENTIALS_KEY: options.credentialsKey.toString('base64'),
    HERALD_SEND_QUOTA: '1000000',
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

/** CPU seconds (user + system) a process has used so far; 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state is field 3, utime 14, stime 15 (1-based, man proc).
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  } catch {
    return 0;
  }
}

/** CPU seconds of every process named `name` (e.g. all Postgres backends of the server). */
export function cpuSecondsOfAll(name: string): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) total += cpuSeconds(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** Busy and total CPU seconds of the whole machine so far (all cores), from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const [, ...values] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const ticks = values.map(Number);
  const total = ticks.reduce((sum, value) => sum + value, 0);
  // idle and iowait
  const idle = ticks[3] + (ticks[4] ?? 0);
  return { busy: (total - idle) / clockTicks, total: total / clockTicks };
}

/** A /proc/<pid>/status field in kB (VmHWM: peak resident set size). */
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

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

export const integer = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : 'n/a');
export const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');

// Several Herald processes on one embedded Postgres (the README's "run as many as you like"): only
// the process that started the cluster stops it, whichever order they stop in; a process whose
// database went away serves 503, logs the outage once, and recovers by itself when it is back.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './support/ports.ts';
import { startHerald, type HeraldProcess } from './support/processes.ts';

const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-embedded-'));
// Postgres runs as its own OS user when we are root: it must be able to enter the folder.
chmodSync(dataDir, 0o755);
const env = {
  DATABASE_URL: '',
  HERALD_DATA_DIR: dataDir,
  HERALD_EMBEDDED_PG_PORT: String(await freePort()),
  HERALD_SHUTDOWN_GRACE_SECONDS: '1',
};
const started: HeraldProcess[] = [];

const serve = async () => {
  const herald = await startHerald(['serve'], env);
  started.push(herald);
  return herald;
};
const healthPort = await freePort();
const work = async () => {
  const herald = await startHerald(['work'], { ...env, HERALD_WORKER_HEALTH_PORT: String(healthPort) }, (line) => line.includes('worker health listening'));
  started.push(herald);
  return herald;
};
/** The worker's own health port (for a container health check). */
const workerHealth = async (path: string) => {
  try {
    return (await fetch(`http://127.0.0.1:${healthPort}${path}`)).status;
  } catch {
    return 0;
  }
};
const readyz = async (herald: HeraldProcess) => {
  try {
    return (await fetch(`http://127.0.0.1:${herald.port}/readyz`)).status;
  } catch {
    return 0;
  }
};
const stop = async (herald: HeraldProcess) => {
  const code = new Promise<number | null>((resolve) => herald.child.once('exit', (exitCode) => resolve(exitCode)));
  await herald.stop('SIGTERM');
  return code;
};
async function eventually(probe: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (!(await probe())) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return Date.now() - started;
}

afterAll(async () => {
  await Promise.all(started.map((herald) => herald.stop('SIGKILL')));
  rmSync(dataDir, { recursive: true, force: true });
});

test('a process that attached to the running Postgres leaves it running when it stops', async () => {
  const starter = await serve();
  expect(starter.logs.some((line) => line.includes('embedded Postgres started'))).toBe(true);
  const attached = await serve();
  expect(attached.logs.some((line) => line.includes('using the embedded Postgres already running'))).toBe(true);
  const worker = await work();

  expect(await stop(attached)).toBe(0);
  expect(await stop(worker)).toBe(0);
  expect(await readyz(starter)).toBe(200);
  expect(await stop(starter)).toBe(0);
}, 120_000);

test('when the starter stops first, the others answer 503, log the outage once, and recover when a new starter brings it back', async () => {
  const starter = await serve();
  const attached = await serve();
  const worker = await work();
  expect(await readyz(attached)).toBe(200);

  expect([await workerHealth('/healthz'), await workerHealth('/readyz')]).toEqual([200, 200]);

  expect(await stop(starter)).toBe(0);
  await eventually(async () => (await readyz(attached)) === 503, 10_000);
  await eventually(async () => worker.logs.some((line) => line.includes('database unreachable')), 10_000);
  expect([await workerHealth('/healthz'), await workerHealth('/readyz')]).toEqual([200, 503]);
  // Several seconds of outage: the worker still logs it once, not once per poll.
  await new Promise((resolve) => setTimeout(resolve, 3000));

  const again = await serve();
  const recoveredInMs = await eventually(async () => (await readyz(attached)) === 200, 10_000);
  expect(recoveredInMs).toBeLessThan(5000);
  await eventually(async () => worker.logs.some((line) => line.includes('database reachable again')), 5000);
  expect(await workerHealth('/readyz')).toBe(200);
  expect(worker.logs.filter((line) => line.includes('database unreachable'))).toHaveLength(1);
  expect(worker.logs.filter((line) => /"level":50/.test(line))).toEqual([]);
  // The API answered its readiness checks 503 throughout, and logged the outage once too.
  await eventually(async () => attached.logs.some((line) => line.includes('database reachable again')), 5000);
  expect(attached.logs.filter((line) => line.includes('database unreachable: the API answers 503'))).toHaveLength(1);
  expect(attached.logs.filter((line) => /"level":50/.test(line))).toEqual([]);

  expect(await stop(worker)).toBe(0);
  expect(await stop(attached)).toBe(0);
  expect(await stop(again)).toBe(0);
}, 120_000);

test('a SIGTERM during start-up is honoured once start-up is done: the Postgres it started is stopped, not orphaned', async () => {
  const herald = await startHerald(['serve'], env, (line) => line.includes('embedded Postgres started'));
  started.push(herald);
  expect(await stop(herald)).toBe(0);
  // Its cluster is gone: the next process starts one of its own rather than attaching.
  const next = await serve();
  expect(next.logs.some((line) => line.includes('embedded Postgres started'))).toBe(true);
  expect(await stop(next)).toBe(0);
}, 120_000);

describe('a herald start that fails leaves nothing running', () => {
  const ownDir = mkdtempSync(path.join(tmpdir(), 'herald-failed-start-'));
  chmodSync(ownDir, 0o755);
  const failing = async (extra: Record<string, string>) => {
    const startEnv = { ...env, HERALD_DATA_DIR: ownDir, HERALD_EMBEDDED_PG_PORT: String(await freePort()), ...extra };
    return (await startHerald(['start'], startEnv, () => false).catch((error: Error) => error)) as Error;
  };
  /** Whether a postmaster still runs on the data folder (its pid file names a live process). */
  const postgresRunning = () => {
    const pidFile = path.join(ownDir, 'pgdata', 'postmaster.pid');
    if (!existsSync(pidFile)) return false;
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 0);
      return true;
    } catch {
      return false;
    }
  };
  afterAll(() => rmSync(ownDir, { recursive: true, force: true }));

  test('its port taken: it says so and starts nothing, no embedded Postgres', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const failure = await failing({ PORT: String(port) });
      expect(failure.message).toMatch(/exited with 1/);
      expect(failure.message).toContain(`Port ${port} on 127.0.0.1 is in use: nothing was started. Stop what uses it, or set PORT (or --port) to another port.`);
      expect(failure.message).not.toContain('embedded Postgres started');
      expect(postgresRunning()).toBe(false);
    } finally {
      taken.close();
    }
  }, 60_000);

  test('refused after its embedded Postgres started (a key that opens no stored credential): that Postgres is stopped', async () => {
    // A first start stores the demo application's credentials with the data folder's key.
    const first = await startHerald(['start'], { ...env, HERALD_DATA_DIR: ownDir, HERALD_EMBEDDED_PG_PORT: String(await freePort()) }, (line) =>
      line.includes('These tokens are shown once'),
    );
    await first.stop();
    expect(postgresRunning()).toBe(false);
    const failure = await failing({ HERALD_CREDENTIALS_KEY: randomBytes(32).toString('base64') });
    expect(failure.message).toMatch(/exited with 1/);
    expect(failure.message).toContain('embedded Postgres started');
    expect(failure.message).toContain('HERALD_CREDENTIALS_KEY opens none of the');
    expect(postgresRunning()).toBe(false);
  }, 120_000);
});

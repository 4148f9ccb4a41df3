// The compiled build (`make build`: build/, what bin/herald runs while it is fresh, and what the
// Docker image runs) works as deployed, and bin/herald never runs a stale one.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import pg from 'pg';
import { createDatabase } from './support/seed.ts';
import { databaseUrl } from './support/harness.ts';
import { startHerald } from './support/processes.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..');
const builtMain = path.join(root, 'build', 'cli', 'main.js');
// Three CLI processes and a server, each opening the database.
jest.setTimeout(60_000);

describe('the compiled build', () => {
  let database: { url: string; drop(): Promise<void> };
  const env = (): Record<string, string> => ({ PATH: process.env.PATH ?? '', DATABASE_URL: database.url, LOG_LEVEL: 'warn', HERALD_CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64') });
  const herald = async (...args: string[]) => (await run(process.execPath, [builtMain, ...args], { env: env() })).stdout;

  beforeAll(async () => {
    if (!existsSync(path.join(root, 'build', '.built'))) throw new Error('No compiled build: run `make build` (make unit does).');
    database = await createDatabase(databaseUrl(), `herald_build_${process.pid}_${Date.now()}`);
  });
  afterAll(() => database?.drop());

  test('migrates a fresh database with its own compiled migrations and serves the API, the document and the dashboard', async () => {
    await herald('migrate');
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const applied = await client.query<{ name: string }>('select name from mikro_orm_migrations order by name').finally(() => client.end());
    const sources = readdirSync(path.join(root, 'src', 'db', 'migrations')).filter((name) => name.endsWith('.ts'));
    expect(applied.rows.map((row) => row.name)).toEqual(sources.map((name) => name.replace(/\.ts$/, '')).sort());

    const appId = /Created application (\S+)/.exec(await herald('apps', 'create', '--name', 'Built'))?.[1];
    const token = /^(hrld_\S+)$/m.exec(await herald('tokens', 'create', '--app', appId!, '--name', 'built', '--abilities', '*'))?.[1];
    expect(token).toBeDefined();

    const server = await startHerald(['serve'], { ...env(), LOG_LEVEL: 'info' }, undefined, builtMain);
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const put = await fetch(`${base}/api/v1/installations/built-1`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ platform: 'android', provider: { identifier: 'fcm-built-1' }, user_id: 'user-1' }),
      });
      expect(put.status).toBe(201);
      expect((await put.json()).data).toMatchObject({ installation_id: 'built-1', platform: 'android', user_id: 'user-1' });
      const document = await fetch(`${base}/openapi.json`);
      expect(document.status).toBe(200);
      expect((await document.json()).openapi).toMatch(/^3\./);
      const dashboard = await fetch(`${base}/dashboard/`);
      expect(dashboard.status).toBe(200);
      expect(dashboard.headers.get('content-type')).toMatch(/^text\/html/);
    } finally {
      await server.stop();
    }
  });
});

describe('bin/herald', () => {
  // A copy of the scripts in a folder of their own, with an entry point of each kind that says which it is.
  let folder: string;
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(folder, file)), { recursive: true });
    writeFileSync(path.join(folder, file), text);
  };
  const ranEntry = async () => (await run(path.join(folder, 'bin', 'herald'), [], { env: { PATH: process.env.PATH } })).stdout.trim();
  const age = (file: string, secondsAgo: number) => {
    const at = new Date(Date.now() - secondsAgo * 1000);
    utimesSync(path.join(folder, file), at, at);
  };

  beforeEach(() => {
    folder = mkdtempSync(path.join(os.tmpdir(), 'herald-bin-'));
    mkdirSync(path.join(folder, 'bin'));
    for (const script of ['herald', 'herald-node']) copyFileSync(path.join(root, 'bin', script), path.join(folder, 'bin', script));
    mkdirSync(path.join(folder, 'node_modules', '.bin'), { recursive: true });
    symlinkSync(process.execPath, path.join(folder, 'node_modules', '.bin', 'node'));
    write('src/cli/main.ts', "console.log('source');\n");
    write('src/domain/rules.ts', '');
    write('build/cli/main.js', "console.log('build');\n");
    for (const file of ['src/cli/main.ts', 'src/domain/rules.ts', 'src/cli', 'src/domain', 'src']) age(file, 60);
    // Built a while ago: a change the test makes next is newer by more than the file system's clock
    // step (a few ms), within which it could carry the build's own time and not count as newer.
    write('build/.built', '');
    age('build/.built', 2);
  });
  afterEach(() => rmSync(folder, { recursive: true, force: true }));

  test('runs the build while no source is newer than it', async () => {
    expect(await ranEntry()).toBe('build');
  });

  test('runs the source once a file under src/ is newer than the build', async () => {
    write('src/domain/rules.ts', 'export {};\n');
    expect(await ranEntry()).toBe('source');
  });

  test('runs the source once a file under src/ was deleted after the build', async () => {
    rmSync(path.join(folder, 'src', 'domain', 'rules.ts'));
    expect(await ranEntry()).toBe('source');
  });

  test('runs the source when there is no build', async () => {
    rmSync(path.join(folder, 'build', '.built'));
    expect(await ranEntry()).toBe('source');
  });

  test("starts Node with Herald's heap settings unless HERALD_NODE_OPTIONS replaces them", async () => {
    write('build/cli/main.js', 'console.log(JSON.stringify(process.execArgv));\n');
    const flags = async (env: Record<string, string>) =>
      JSON.parse((await run(path.join(folder, 'bin', 'herald'), [], { env: { PATH: process.env.PATH, ...env } })).stdout);
    expect(await flags({})).toEqual(['--max-semi-space-size=16', '--heap-growing-percent=50']);
    expect(await flags({ HERALD_NODE_OPTIONS: '--max-semi-space-size=32' })).toEqual(['--max-semi-space-size=32']);
    expect(await flags({ HERALD_NODE_OPTIONS: '' })).toEqual([]);
  });

  test("sets malloc's arenas and mmap threshold unless they are set", async () => {
    write('build/cli/main.js', 'console.log(JSON.stringify([process.env.MALLOC_ARENA_MAX, process.env.MALLOC_MMAP_THRESHOLD_]));\n');
    const settings = async (env: Record<string, string>) =>
      JSON.parse((await run(path.join(folder, 'bin', 'herald'), [], { env: { PATH: process.env.PATH, ...env } })).stdout);
    expect(await settings({})).toEqual(['2', '131072']);
    expect(await settings({ MALLOC_ARENA_MAX: '4', MALLOC_MMAP_THRESHOLD_: '262144' })).toEqual(['4', '262144']);
  });
});

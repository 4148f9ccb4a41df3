// The fanout's statements, one at a time (`make bench-statements`): for each statement of a
// bench-fanout-sized fanout and its deliver batches (20 notifications × 500 users, one iOS and one
// Android installation each), the CPU it costs per delivery in Postgres (the backend's scheduler
// statistics) and in this process (the client's share: building the statement, the socket,
// reading the answer), so that a change to one statement can be measured without the noise of
// the whole pipeline (the pushes, the simulators, the other processes on the cores). On a fresh
// database on DATABASE_URL's server, with fresh statistics (`analyze` after the seed), dropped at
// the end; each iteration runs in a transaction that is rolled back, so every one starts from the
// same tables. The server must run on this machine (the backend's CPU is read from /proc). Prints
// the median of the iterations after the first (which warms the caches); exits 0 whatever the
// figures are. The host's speed still moves from run to run: compare alternating runs.
//
// Environment (all optional):
//   DATABASE_URL          admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_ITERATIONS      fanouts measured, after one to warm up (5)
//   BENCH_NOTIFICATIONS   notifications fanned out together (20)
//   BENCH_RECIPIENTS      users per notification, distinct across notifications (500)
//   HERALD_DELIVER_BATCH_SIZE  pushes per deliver batch, as Herald reads it (its default)
import { readFileSync } from 'node:fs';
import { sql, type Kysely } from 'kysely';
import { migrate, openOrm } from '../src/db/orm.ts';
import { newId } from '../src/db/ids.ts';
import { openStatementPool } from '../src/db/pools.ts';
import { insertDeliveries, readBatch, recordResults, targetInstallations, type NewDelivery } from '../src/db/sql/deliveries.ts';
import { startProcessing } from '../src/db/sql/notifications.ts';
import { createApplication } from '../src/domain/applications.ts';
import { loadConfig } from '../src/service/config.ts';
import { createCleanups, fixed, integer, machineLine, median, positiveIntegerFromEnv, runBenchmark } from './support.ts';
import { androidToken, createDatabase, iosToken, userId } from '../test/support/seed.ts';

const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const settings = {
  iterations: positiveIntegerFromEnv('BENCH_ITERATIONS', 5),
  notifications: positiveIntegerFromEnv('BENCH_NOTIFICATIONS', 20),
  recipients: positiveIntegerFromEnv('BENCH_RECIPIENTS', 500),
  batchSize: loadConfig(process.env).HERALD_DELIVER_BATCH_SIZE,
};
const statements = ['start processing', 'target installations', 'insert deliveries', 'read batches', 'record outcomes'] as const;
type Statement = (typeof statements)[number];

const cleanups = createCleanups();
const log = (line = '') => process.stdout.write(`${line}\n`);

/** The database, migrated, with one application, its users' installations and queued notifications. */
async function seed(url: string, db: Kysely<unknown>): Promise<{ applicationId: string; notificationIds: string[] }> {
  const orm = await openOrm(url, 2);
  let applicationId: string;
  try {
    await migrate(orm);
    applicationId = (await createApplication(orm.em.fork(), 'Statements benchmark')).id;
  } finally {
    await orm.close();
  }
  const users = Array.from({ length: settings.notifications * settings.recipients }, (_, i) => i + 1);
  await sql`
    insert into installations (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id,
                               device, registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
    select gen_random_uuid(), ${applicationId}, p.platform || '-' || u.user_id, p.platform,
           case when p.platform = 'ios' then u.ios else u.android end, 'active', 'authorized', u.user_id, '{}', now(), now(), now(), now()
      from unnest(${users.map(userId)}::text[], ${users.map(iosToken)}::text[], ${users.map(androidToken)}::text[]) as u(user_id, ios, android),
           (values ('ios'), ('android')) as p(platform)`.execute(db);
  const notificationIds: string[] = [];
  for (let n = 0; n < settings.notifications; n++) {
    const id = newId();
    notificationIds.push(id);
    const recipients = users.slice(n * settings.recipients, (n + 1) * settings.recipients).map(userId);
    await sql`
      insert into notifications (id, application_id, status, title, body, data, options, user_ids, created_at)
      values (${id}, ${applicationId}, 'queued', 'Benchmark', 'One of many', '{}', '{"ttl": 3600}', ${recipients}::text[], now())`.execute(db);
  }
  await sql`analyze`.execute(db);
  return { applicationId, notificationIds };
}

/**
 * Microseconds of CPU the backend `pid` has used, from its scheduler statistics (nanoseconds), not
 * support.ts' cpuSeconds: that counts clock ticks (10 ms), coarser than the cheapest statements
 * here, and a backend is one thread, whose own statistics are all of its CPU.
 */
function backendCpuMicros(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
}

/**
 * One fanout's statements and its deliver batches' (per platform, of the configured size), on one
 * connection, rolled back. Every delivery is pending: the rules that skip some (domain/fanout.ts)
 * run in Node and cost Postgres nothing.
 */
async function fanOnce(db: Kysely<unknown>, applicationId: string, notificationIds: string[]): Promise<{ deliveries: number; cpu: Map<Statement, number>; client: Map<Statement, number> }> {
  return db.connection().execute(async (connection) => {
    const [{ pid }] = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(connection)).rows;
    const cpu = new Map<Statement, number>();
    const client = new Map<Statement, number>();
    let mark = backendCpuMicros(pid);
    let clientMark = process.cpuUsage();
    const measured = async <T>(statement: Statement, run: () => Promise<T>): Promise<T> => {
      const result = await run();
      const now = backendCpuMicros(pid);
      const used = process.cpuUsage(clientMark);
      cpu.set(statement, now - mark);
      client.set(statement, used.user + used.system);
      mark = now;
      clientMark = process.cpuUsage();
      return result;
    };
    await sql`begin`.execute(connection);
    try {
      await measured('start processing', () => startProcessing(connection, notificationIds));
      const candidates = await measured('target installations', () => targetInstallations(connection, notificationIds));
      const deliveries: NewDelivery[] = candidates.map((candidate) => ({
        ...candidate,
        applicationId,
        deliveryId: newId(),
        state: 'pending',
        reason: null,
        locale: null,
        truncation: null,
      }));
      await measured('insert deliveries', () => insertDeliveries(connection, deliveries));
      // Deliver batches as the fanout makes them: per platform, in the order of the fanout.
      const batches = ['ios', 'android'].flatMap((platform) => {
        const ids = deliveries.filter((delivery) => delivery.platform === platform).map((delivery) => delivery.deliveryId);
        return Array.from({ length: Math.ceil(ids.length / settings.batchSize) }, (_, i) => ids.slice(i * settings.batchSize, (i + 1) * settings.batchSize));
      });
      await measured('read batches', async () => {
        for (const [i, deliveryIds] of batches.entries()) {
          await readBatch(connection, { applicationId, provider: i < batches.length / 2 ? 'apns' : 'fcm', deliveryIds });
        }
      });
      await measured('record outcomes', async () => {
        for (const deliveryIds of batches) {
          const results = deliveryIds.map((deliveryId) => ({ deliveryId, state: 'accepted' as const, reason: null, providerMessageId: deliveryId }));
          await recordResults(connection, results, false);
        }
      });
      return { deliveries: deliveries.length, cpu, client };
    } finally {
      await sql`rollback`.execute(connection);
    }
  });
}

async function run(): Promise<number> {
  const database = `herald_bench_statements_${Date.now()}`;
  const { url, drop } = await createDatabase(adminUrl, database);
  cleanups.add('database', drop);
  log(machineLine(database, adminUrl));
  const pool = openStatementPool(url, 1);
  cleanups.add('statement pool', () => pool.close());
  const { applicationId, notificationIds } = await seed(url, pool.db);
  const runs: Awaited<ReturnType<typeof fanOnce>>[] = [];
  for (let i = 0; i <= settings.iterations; i++) runs.push(await fanOnce(pool.db, applicationId, notificationIds));
  const measured = runs.slice(1);
  const deliveries = measured[0].deliveries;
  log(
    `${settings.notifications} notifications × ${settings.recipients} users fanned out together: ${integer(deliveries)} deliveries, ` +
      `deliver batches of ${settings.batchSize}; median of ${measured.length} iterations after one to warm up`,
  );
  log(`${'statement'.padEnd(24)}${'CPU µs a delivery: Postgres'.padStart(28)}${'client'.padStart(10)}   Postgres in each iteration`);
  const totals = { server: 0, client: 0 };
  for (const statement of statements) {
    const server = measured.map((one) => (one.cpu.get(statement) ?? 0) / deliveries);
    const client = median(measured.map((one) => (one.client.get(statement) ?? 0) / deliveries));
    totals.server += median(server);
    totals.client += client;
    log(
      `${statement.padEnd(24)}${fixed(median(server), 2).padStart(28)}${fixed(client, 2).padStart(10)}   ` +
        server.map((value) => fixed(value, 1)).join(' / '),
    );
  }
  log(`${'all'.padEnd(24)}${fixed(totals.server, 2).padStart(28)}${fixed(totals.client, 2).padStart(10)}`);
  return 0;
}

await runBenchmark('bench/statements', run, cleanups);

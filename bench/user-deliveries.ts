// The user-deliveries benchmark (`make bench-user-deliveries`): how long a page of
// GET /api/v1/deliveries?user_id=… takes with 10 million deliveries in the table (target: p99 ≤ 50 ms).
// On a fresh database that is dropped at the end whatever happens: finished notifications of 1,000
// deliveries each (500 users × iOS + Android, as bench-retention and bench-fanout's --prefill seed
// them), so every user has 2 deliveries in each of 10,000 notifications, one per heap page or so:
// a long history, spread over the whole table. Then:
//   - the index the list needs, dropped and built again, once as the migration builds it and once
//     with CREATE INDEX CONCURRENTLY (docs/OPERATIONS.md, "Upgrading"), each timed;
//   - pages through Herald's real app on a port (token, validation, the statement, the view), one
//     request at a time, each for another user: the first page (limit 25, the default, and 100),
//     a page half way through the user's history (a cursor), and a user with no deliveries.
// It prints p50, p99 and the slowest answer of each, from the request to the last byte, and the
// statement's plan. It exits 0 whatever the figures are (a measurement, not a test); non-zero only
// when the run itself failed (a refused request, a page of the wrong size).
//
// Environment (all optional):
//   DATABASE_URL              admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_DELIVERIES          deliveries in the table (10000000)
//   BENCH_REQUESTS            requests per kind of page (300)
//   BENCH_JSON                write the figures to this file instead of bench/results/user-deliveries-<UTC time>.json
import pg from 'pg';
import { migrate, openOrm } from '../src/db/orm.ts';
import { createApplication, createToken } from '../src/domain/applications.ts';
import { encodeCursor } from '../src/domain/cursor.ts';
import {
  bulkLoad,
  createBenchDatabase,
  createCleanups,
  fixed,
  integer,
  machineLine,
  positiveIntegerFromEnv,
  runBenchmark,
  seedFinishedNotifications,
  spread,
  startBenchApi,
  writeResults,
} from './support.ts';

const settings = {
  deliveries: positiveIntegerFromEnv('BENCH_DELIVERIES', 10_000_000),
  requests: positiveIntegerFromEnv('BENCH_REQUESTS', 300),
  perNotification: 1000,
};
const users = settings.perNotification / 2;
const index = 'deliveries_application_id_user_id_id_index';
const indexColumns = 'deliveries (application_id, user_id, id)';

const log = (line = '') => process.stdout.write(`${line}\n`);
const cleanups = createCleanups();

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return (performance.now() - started) / 1000;
}

/** The deliveries, and the index built both ways on them. */
async function seed(client: pg.Client, applicationId: string) {
  const seconds = await timed(() =>
    bulkLoad(
      client,
      ['deliveries', 'delivery_events'],
      () =>
        seedFinishedNotifications(client, {
          applicationId,
          count: Math.ceil(settings.deliveries / settings.perNotification),
          perNotification: settings.perNotification,
          ageDays: 20,
          withKeys: false,
        }),
      log,
    ),
  );
  const {
    rows: [counted],
  } = await client.query<{ deliveries: number; size: string }>(
    `select (select count(*) from deliveries)::int as deliveries, pg_size_pretty(pg_total_relation_size('deliveries')) as size`,
  );
  log(`seeded in ${fixed(seconds, 1)} s: ${integer(counted.deliveries)} deliveries (table and indexes ${counted.size})`);
  await client.query(`drop index ${index}`);
  const plainSeconds = await timed(() => client.query(`create index ${index} on ${indexColumns}`));
  await client.query(`drop index ${index}`);
  const concurrentSeconds = await timed(() => client.query(`create index concurrently ${index} on ${indexColumns}`));
  const {
    rows: [built],
  } = await client.query<{ size: string }>(`select pg_size_pretty(pg_relation_size($1::regclass)) as size`, [index]);
  await client.query('analyze deliveries');
  log(`the index (${built.size}): built in ${fixed(plainSeconds, 1)} s as the migration builds it, ${fixed(concurrentSeconds, 1)} s concurrently`);
  return { deliveries: counted.deliveries, tableSize: counted.size, indexSize: built.size, plainSeconds, concurrentSeconds };
}

/** The API on the migrated database, with an application and a token that may read; answers where. */
async function startApi(url: string): Promise<{ base: string; token: string; applicationId: string }> {
  const orm = await openOrm(url, 10);
  cleanups.add('api orm', () => orm.close());
  await migrate(orm);
  const em = orm.em.fork();
  const application = await createApplication(em, 'User deliveries benchmark');
  const token = (await createToken(em, { applicationId: application.id, name: 'bench', abilities: ['notifications:read'] })).plaintext;
  return { base: await startBenchApi(url, orm, cleanups, 2), token, applicationId: application.id };
}

type Page = { userId: string; limit?: number; cursor?: string };

/** One request's time in ms, its page checked for size. */
async function page(base: string, token: string, query: Page, expected: number): Promise<number> {
  const params = new URLSearchParams({ user_id: query.userId, ...(query.limit ? { limit: String(query.limit) } : {}), ...(query.cursor ? { cursor: query.cursor } : {}) });
  const started = performance.now();
  const response = await fetch(`${base}/api/v1/deliveries?${params}`, { headers: { authorization: `Bearer ${token}` } });
  const body = (await response.json()) as { data?: unknown[] };
  const ms = performance.now() - started;
  if (response.status !== 200 || body.data?.length !== expected) {
    throw new Error(`GET /api/v1/deliveries?${params}: ${response.status}, ${body.data?.length ?? 'no'} rows (expected ${expected})`);
  }
  return ms;
}

/** For each user, the cursor half way through their history: a page there reads rows the first pages never touch. */
async function middleCursors(client: pg.Client, applicationId: string): Promise<string[]> {
  const cursors: string[] = [];
  for (let user = 1; user <= users; user++) {
    const { rows } = await client.query<{ id: string }>(
      `select id from deliveries where application_id = $1 and user_id = $2 order by id desc offset (select count(*) / 2 from deliveries where application_id = $1 and user_id = $2) limit 1`,
      [applicationId, `user-${user}`],
    );
    cursors.push(encodeCursor(rows[0].id));
  }
  return cursors;
}

async function run(): Promise<number> {
  const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 17);
  const database = `herald_bench_user_deliveries_${stamp}`;
  log(`Herald user-deliveries benchmark, ${new Date().toISOString()}`);
  log(machineLine(database, adminUrl));

  const url = await createBenchDatabase(adminUrl, database, cleanups);
  const { base, token, applicationId } = await startApi(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanups.add('seeding session', () => client.end());
  const seeded = await seed(client, applicationId);
  const cursors = await middleCursors(client, applicationId);
  const { rows: planRows } = await client.query<{ 'QUERY PLAN': string }>(
    `explain (analyze, buffers)
     select d.*, n.title from (select * from deliveries where application_id = $1 and user_id = 'user-1' order by id desc limit 26) d
       left join notifications n on n.id = d.notification_id order by d.id desc`,
    [applicationId],
  );
  const plan = planRows.map((row) => row['QUERY PLAN']).join('\n');
  log('the first page (limit 25) of user-1, as Postgres ran it:');
  log(plan.replace(/^/gm, '  '));

  const userOf = (i: number) => `user-${(i % users) + 1}`;
  // Not measured: the validator's compile, connections, the token's first read.
  for (let i = 0; i < 20; i++) await page(base, token, { userId: userOf(i) }, 25);
  const kinds: { name: string; query: (i: number) => Page; expected: number }[] = [
    { name: 'first page, limit 25', query: (i) => ({ userId: userOf(i) }), expected: 25 },
    { name: 'first page, limit 100', query: (i) => ({ userId: userOf(i), limit: 100 }), expected: 100 },
    { name: 'half way through, limit 25', query: (i) => ({ userId: userOf(i), cursor: cursors[i % users] }), expected: 25 },
    { name: 'a user with none', query: (i) => ({ userId: `nobody-${i}` }), expected: 0 },
  ];
  const figures: Record<string, ReturnType<typeof spread>> = {};
  for (const kind of kinds) {
    const times: number[] = [];
    for (let i = 0; i < settings.requests; i++) times.push(await page(base, token, kind.query(i + 1000), kind.expected));
    figures[kind.name] = spread(times);
    log(`${kind.name}: p50 ${fixed(figures[kind.name].p50, 1)} ms, p99 ${fixed(figures[kind.name].p99, 1)} ms, max ${fixed(figures[kind.name].max, 1)} ms (${integer(times.length)} requests)`);
  }
  const worst = Math.max(...Object.values(figures).map((figure) => figure.p99));
  log(`slowest p99: ${fixed(worst, 1)} ms (target ≤ 50 ms)`);
  writeResults('user-deliveries', { settings, seeded, pages: figures, plan });
  return 0;
}

await runBenchmark('bench-user-deliveries', run, cleanups);

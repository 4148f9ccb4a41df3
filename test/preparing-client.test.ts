// Every pool's connections prepare each statement once: what PreparingClient names and what it
// leaves to run as sent, on a connection of the real Postgres; pg-boss's fetch through it, and
// Herald's own statements through the ORM's pool and a statement pool.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { openOrm } from '../src/db/orm.ts';
import { PreparingClient } from '../src/db/preparing-client.ts';
import { openStatementPool } from '../src/db/pools.ts';
import { findToken } from '../src/db/sql/tokens.ts';
import { createLogger } from '../src/logging/logger.ts';
import { queues, startBoss } from '../src/worker/queue.ts';
import { databaseUrl } from './support/harness.ts';

let client: PreparingClient;
beforeAll(async () => {
  client = new PreparingClient({ connectionString: databaseUrl() });
  await client.connect();
});
afterAll(() => client.end());

const prepared = async (): Promise<{ statement: string; generic: number; custom: number }[]> =>
  (
    await client.query<{ statement: string; generic: string; custom: string }>(
      `select statement, generic_plans as generic, custom_plans as custom from pg_prepared_statements where statement like '%-- marked%' and statement not like '%pg_prepared_statements%'`,
    )
  ).rows.map((row) => ({ statement: row.statement, generic: Number(row.generic), custom: Number(row.custom) }));

test('a statement of one data statement, with or without parameters, is prepared once on its connection and run again by name', async () => {
  for (let run = 0; run < 3; run++) {
    expect((await client.query('select 1 as one -- marked, no parameters')).rows).toEqual([{ one: 1 }]);
    expect((await client.query('select $1::int + 1 as two -- marked, one parameter', [run])).rows).toEqual([{ two: run + 1 }]);
  }
  const statements = await prepared();
  expect(statements.map((row) => row.statement).sort()).toEqual(['select $1::int + 1 as two -- marked, one parameter', 'select 1 as one -- marked, no parameters']);
  // Parsed once, planned on each run: the plan's kind is the session's plan_cache_mode.
  for (const row of statements) expect(row.generic + row.custom).toBe(3);
});

test('texts of several statements and transaction control run as they are, unprepared', async () => {
  await client.query('begin');
  await client.query('create temporary table marked_scratch (n int); insert into marked_scratch values (1), (2) -- marked');
  expect((await client.query('select count(*)::int as n from marked_scratch')).rows).toEqual([{ n: 2 }]);
  await client.query('rollback');
  expect((await prepared()).map((row) => row.statement)).not.toContain(expect.stringContaining('marked_scratch values'));
});

test("pg-boss's connections prepare its fetch, with a generic plan", async () => {
  const boss = await startBoss(databaseUrl(), createLogger('silent'), { worker: false, schema: `prepared_${randomBytes(4).toString('hex')}` });
  try {
    await boss.send(queues.deliver, { applicationId: 'a', platform: 'ios', deliveryIds: [] });
    // One after another on an idle pool: the same connection each time (pg's pool reuses the last released).
    for (let fetch = 0; fetch < 3; fetch++) await boss.fetch(queues.deliver);
    const { rows } = await boss
      .getDb()
      .executeSql(`select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements where statement like '%FOR UPDATE OF j SKIP LOCKED%' and statement not like '%pg_prepared_statements%'`);
    expect(rows).toEqual([{ generic: 3, custom: 0 }]);
  } finally {
    await boss.stop({ close: true, graceful: false });
  }
});

test("pg-boss's sessions plan generically, keeping the startup options DATABASE_URL gives", async () => {
  const url = new URL(databaseUrl());
  // Not statement_timeout: Herald's own bound (HERALD_DB_*_TIMEOUT_SECONDS) sets that one.
  url.searchParams.set('options', '-c work_mem=12345kB');
  const boss = await startBoss(url.toString(), createLogger('silent'), { worker: false, schema: `prepared_${randomBytes(4).toString('hex')}` });
  try {
    const { rows } = await boss.getDb().executeSql(`select current_setting('plan_cache_mode') as plans, current_setting('work_mem') as memory`);
    expect(rows).toEqual([{ plans: 'force_generic_plan', memory: '12345kB' }]);
  } finally {
    await boss.stop({ close: true, graceful: false });
  }
});

// How the token read (db/sql/tokens.ts findToken) is prepared on the connection that runs this.
const tokenReadPrepared = sql.raw<{ generic: number; custom: number; plans: string }>(
  `select generic_plans::int as generic, custom_plans::int as custom, current_setting('plan_cache_mode') as plans
     from pg_prepared_statements where statement like '%from api_tokens t join applications a%' and statement not like '%pg_prepared_statements%'`,
);

// Postgres' default plan choice: custom plans for the first five runs, then a generic one only
// where it costs no more. Every pool of Herald's but pg-boss's is the ORM's or one openListenedPool
// opens (the sends', the leases', the statement pools).
test.each([
  [
    "the ORM's",
    async () => {
      const orm = await openOrm(databaseUrl(), 1);
      const em = orm.em.fork();
      return { db: em, kysely: em.getKysely(), close: () => orm.close() };
    },
  ],
  [
    "a statement pool's",
    async () => {
      const pool = openStatementPool(databaseUrl(), 1);
      return { db: pool.db, kysely: pool.db, close: () => pool.close() };
    },
  ],
])("%s connections prepare Herald's statements, planned as Postgres chooses", async (_pool, open) => {
  const { db, kysely, close } = await open();
  try {
    for (let run = 0; run < 3; run++) expect(await findToken(db, `unknown-${run}`)).toBeUndefined();
    expect((await tokenReadPrepared.execute(kysely)).rows).toEqual([{ generic: 0, custom: 3, plans: 'auto' }]);
  } finally {
    await close();
  }
});

// A send's transaction (db/pipelined-pool.ts) on the real Postgres: its statements leave together
// (counted as turns of the conversation, through the tests' TCP proxy), it commits or rolls back
// as the work decides, and a work that gives up with statements in flight leaves nothing behind.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { openPipelinedPool, type PipelinedPool } from '../src/db/pipelined-pool.ts';
import { databaseUrl } from './support/harness.ts';
import { startTcpProxy } from './support/tcp-proxy.ts';

const table = `pipelined_${randomBytes(4).toString('hex')}`;
let admin: pg.Client;
beforeAll(async () => {
  admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  await admin.query(`create table ${table} (id int primary key, note text not null)`);
});
afterAll(async () => {
  await admin.query(`drop table ${table}`);
  await admin.end();
});
beforeEach(() => admin.query(`truncate ${table}`));

const ids = async () => (await admin.query<{ id: number }>(`select id from ${table} order by id`)).rows.map((row) => row.id);
const insert = (id: number) => sql<{ id: number }>`insert into ${sql.table(table)} (id, note) values (${id}, 'x') returning id`;

describe('on one connection', () => {
  let pool: PipelinedPool;
  beforeEach(() => {
    pool = openPipelinedPool(databaseUrl(), 1);
  });
  afterEach(() => pool.close());

  test('statements written without awaiting each other all commit, each with its own answer', async () => {
    const answers = await pool.transaction(async (session) => {
      const sent = [1, 2, 3].map((id) => session.rows(insert(id)));
      const library = session.executeSql(`select count(*)::int as n from ${table}`);
      return { commit: true, value: [...(await Promise.all(sent)).map((rows) => rows[0].id), (await library).rows[0]] };
    });
    expect(answers).toEqual([1, 2, 3, { n: 3 }]);
    expect(await ids()).toEqual([1, 2, 3]);
  });

  test('a work that decides to roll back returns its value and writes nothing', async () => {
    const value = await pool.transaction(async (session) => {
      await session.rows(insert(1));
      return { commit: false, value: 'replayed' };
    });
    expect(value).toBe('replayed');
    expect(await ids()).toEqual([]);
  });

  test('a work that throws with its statements still in flight rolls them back, and the connection serves the next transaction', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      await expect(
        pool.transaction(async (session) => {
          // Still running when the work gives up: their answers (and errors) arrive after it threw.
          void session.rows(sql`select pg_sleep(0.2)`);
          void session.rows(insert(1));
          void session.rows(insert(1));
          throw new Error('refused');
        }),
      ).rejects.toThrow('refused');
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(unhandled).toEqual([]);
      expect(await ids()).toEqual([]);
      await pool.transaction(async (session) => ({ commit: true, value: await session.rows(insert(2)) }));
      expect(await ids()).toEqual([2]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });

  test('a statement issued after the work gave up is never sent: it cannot run outside the transaction, on a connection handed on', async () => {
    let late: Promise<unknown> | undefined;
    await expect(
      pool.transaction(async (session) => {
        // As pg-boss's insert comes after its own lookup of the queue: issued once the work has thrown.
        setTimeout(() => (late = session.rows(insert(9))), 20);
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(late).rejects.toThrow('The transaction has ended');
    await pool.transaction(async (session) => ({ commit: true, value: await session.rows(insert(2)) }));
    expect(await ids()).toEqual([2]);
  });

  test('after a failed statement the ones behind it fail as the aborted transaction, and nothing is written', async () => {
    let behind: unknown;
    await expect(
      pool.transaction(async (session) => {
        const first = session.rows(insert(1));
        const duplicate = session.rows(insert(1));
        const after = session.rows(insert(2));
        after.catch((error: unknown) => (behind = error));
        await first;
        await duplicate;
        return { commit: true, value: null };
      }),
    ).rejects.toMatchObject({ code: '23505' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(behind).toMatchObject({ code: '25P02' });
    expect(await ids()).toEqual([]);
  });

  test('a connection the database ended is replaced: the next transaction runs on a new one', async () => {
    await expect(
      pool.transaction(async (session) => {
        await session.rows(sql`select pg_terminate_backend(pg_backend_pid())`);
        return { commit: true, value: null };
      }),
    ).rejects.toThrow();
    await pool.transaction(async (session) => ({ commit: true, value: await session.rows(insert(3)) }));
    expect(await ids()).toEqual([3]);
  });
});

test('a transaction of three statements is two round trips: BEGIN and the statements together, then COMMIT', async () => {
  const proxy = await startTcpProxy(databaseUrl());
  const pool = openPipelinedPool(proxy.url, 1);
  try {
    const work = (first: number) =>
      pool.transaction(async (session) => {
        const sent = [first, first + 1, first + 2].map((id) => session.rows(insert(id)));
        await Promise.all(sent);
        return { commit: true, value: null };
      });
    // The first opens the connection (its start-up takes turns of its own); the second reuses it.
    await work(1);
    const before = proxy.turns();
    await work(4);
    expect(proxy.turns() - before).toBe(2);
    expect(await ids()).toEqual([1, 2, 3, 4, 5, 6]);
  } finally {
    await pool.close();
    await proxy.close();
  }
});

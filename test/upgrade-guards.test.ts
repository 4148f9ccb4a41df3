// What Herald relies on beyond a library's documented API, each with a test that fails when an
// upgrade changes it underneath:
// - pg: PreparingClient overrides pg.Client#query; pg.Pool (its `Client` option), MikroORM (its
//   `driverOptions.Client`) and pg-boss (which passes a `Client` it does not document on to its
//   pg.Pool) must still run every statement through that method.
// - firebase-admin: Herald writes FCM's JSON itself (src/providers/fcm-message.ts) from messages in
//   firebase-admin's field names, as firebase-admin converted them; test/providers/fcm-message.test.ts
//   compares the two byte for byte through firebase-admin's public API.
// - web-push: generateRequestDetails given `vapidDetails: null` (a falsy value its code documents as
//   "no signing", which its types omit) and Herald's own Authorization header signs nothing itself
//   and sends that header (src/providers/web-push.ts reuses one VAPID header for hours).
import { createECDH, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { openOrm } from '../src/db/orm.ts';
import { openStatementPool } from '../src/db/pools.ts';
import { createLogger } from '../src/logging/logger.ts';
import { startBoss } from '../src/worker/queue.ts';
import webpush from 'web-push';
import { databaseUrl } from './support/harness.ts';

/** A statement no other test runs, and the check that it is prepared on the connection that asks. */
function marked(): { statement: string; preparedCheck: string } {
  const mark = randomBytes(6).toString('hex');
  return {
    statement: `select 1 as one -- guard ${mark}`,
    preparedCheck: `select count(*)::int as prepared from pg_prepared_statements where statement = 'select 1 as one -- guard ${mark}'`,
  };
}

describe("pg: every pool's statements reach PreparingClient#query", () => {
  test('a pg.Pool given it as its Client (a statement pool, through Kysely)', async () => {
    const pool = openStatementPool(databaseUrl(), 1);
    try {
      const { statement, preparedCheck } = marked();
      await sql.raw(statement).execute(pool.db);
      expect((await sql.raw<{ prepared: number }>(preparedCheck).execute(pool.db)).rows).toEqual([{ prepared: 1 }]);
    } finally {
      await pool.close();
    }
  });

  test("MikroORM's pool, given it in driverOptions", async () => {
    const orm = await openOrm(databaseUrl(), 1);
    try {
      const { statement, preparedCheck } = marked();
      const connection = orm.em.fork().getConnection();
      await connection.execute(statement);
      expect(await connection.execute(preparedCheck)).toEqual([{ prepared: 1 }]);
    } finally {
      await orm.close();
    }
  });

  test("pg-boss's pool, which is passed it through options pg-boss does not name", async () => {
    const boss = await startBoss(databaseUrl(), createLogger('silent'), { worker: false, schema: `guard_${randomBytes(4).toString('hex')}` });
    try {
      const { statement, preparedCheck } = marked();
      const db = boss.getDb();
      // One after another on an idle pool: the same connection each time (pg's pool reuses the last released).
      await db.executeSql(statement);
      expect((await db.executeSql(preparedCheck)).rows).toEqual([{ prepared: 1 }]);
    } finally {
      await boss.stop({ close: true, graceful: false });
    }
  });
});

test("web-push: with vapidDetails null, generateRequestDetails sends Herald's Authorization and signs nothing", () => {
  const receiver = createECDH('prime256v1');
  receiver.generateKeys();
  const keys = { p256dh: receiver.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') };
  const details = webpush.generateRequestDetails({ endpoint: 'https://updates.push.services.mozilla.com/wpush/v2/x', keys }, '{"title":"Hi"}', {
    TTL: 60,
    vapidDetails: null as unknown as undefined,
    headers: { Authorization: 'vapid t=kept.jwt.value, k=BKEY' },
  });
  expect(details.headers).toMatchObject({ Authorization: 'vapid t=kept.jwt.value, k=BKEY', TTL: 60, 'Content-Encoding': 'aes128gcm' });
  expect(details.headers).not.toHaveProperty('Crypto-Key');
});

// A database of one's own for a test or a benchmark that runs Herald as processes: created on a
// server, migrated, with an application that has the simulators' credentials, its tokens, and
// users with one iOS and one Android installation each.
import pg from 'pg';
import type { SimulatorKeys } from '../../src/cli/simulate.ts';
import { migrate, openOrm } from '../../src/db/orm.ts';
import { createApplication, createToken } from '../../src/domain/applications.ts';
import { setApnsCredentials, setFcmCredentials, setWebPushCredentials } from '../../src/domain/credentials.ts';
import { clientAbilities } from '../../src/domain/tokens.ts';
import { startBoss } from '../../src/worker/queue.ts';
import { defaultQueueSchema } from '../../src/service/config.ts';
import { createLogger } from '../../src/logging/logger.ts';

/** A fresh database `name` on the server of `adminUrl`; drop() removes it, whoever is still connected. */
export async function createDatabase(adminUrl: string, name: string): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`create database "${name}"`);
  return {
    url: Object.assign(new URL(adminUrl), { pathname: `/${name}` }).toString(),
    drop: () => admin(`drop database if exists "${name}" with (force)`),
  };
}

export const userId = (n: number) => `user-${n}`;
export const iosToken = (n: number) => `${n.toString(16).padStart(8, '0')}${'a1'.repeat(28)}`;
export const androidToken = (n: number) => `fcm-${n}:APA91b${'x'.repeat(120)}`;

export type Seeded = { applicationId: string; serverToken: string; clientToken: string; installations: number };

/**
 * One subscription's keys for every seeded browser: a benchmark's pushes are encrypted each with a
 * key of their own whatever the subscription's, and the simulator, which did not issue them, does
 * not decrypt them.
 */
export const seededWebKeys = { p256dh: 'BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4', auth: 'BTBZMqHH6r4Tts7J_aSIgg' };
export const webEndpoint = (webPush: string, n: number) => `${webPush}/push/web-${n}`;

async function insertWebInstallations(client: pg.Client, applicationId: string, webPush: string, users: number[]): Promise<number> {
  const device = JSON.stringify({ app_version: null, os_version: null, model: null, locale: 'en-US', timezone: 'UTC' });
  const inserted = await client.query(
    `insert into installations
       (id, application_id, installation_id, platform, provider_identifier, push_keys, status, permission, user_id, device,
        registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
     select gen_random_uuid(), $1, 'web-' || u.n, 'web', u.endpoint, $2::jsonb, 'active', 'authorized', u.user_id, $3::jsonb, now(), now(), now(), now()
       from unnest($4::int[], $5::text[], $6::text[]) as u(n, endpoint, user_id)`,
    [applicationId, JSON.stringify({ ...seededWebKeys, expirationTime: null }), device, users, users.map((n) => webEndpoint(webPush, n)), users.map(userId)],
  );
  return inserted.rowCount ?? 0;
}

/**
 * A migrated database with the job queue's schema installed (before several processes race to do
 * it), one application with the simulators' credentials, a server token (all abilities) and an app
 * token, and `users` users (user-1 …) with one iOS and one Android installation each, authorized.
 */
export async function seedApplication(
  url: string,
  options: {
    name: string;
    credentialsKey: Buffer;
    keys: SimulatorKeys;
    users: number;
    queueSchema?: string;
    /** The Web Push simulator's URL: each user also gets a web installation there, and the application the VAPID key pair. */
    webPush?: string;
  },
): Promise<Seeded> {
  const orm = await openOrm(url, 2);
  let seeded: Omit<Seeded, 'installations'>;
  try {
    await migrate(orm);
    const em = orm.em.fork();
    const application = await createApplication(em, options.name);
    await setApnsCredentials(em, application.id, options.keys.apns, options.credentialsKey);
    await setFcmCredentials(em, application.id, options.keys.fcm, options.credentialsKey);
    const { webpush } = options.keys;
    if (options.webPush) await setWebPushCredentials(em, application.id, { subject: webpush.subject, keys: webpush, force: false }, options.credentialsKey);
    seeded = {
      applicationId: application.id,
      serverToken: (await createToken(em, { applicationId: application.id, name: 'server', abilities: ['*'] })).plaintext,
      clientToken: (await createToken(em, { applicationId: application.id, name: 'app', abilities: clientAbilities })).plaintext,
    };
  } finally {
    await orm.close();
  }
  const boss = await startBoss(url, createLogger('silent'), { worker: false, schema: options.queueSchema ?? defaultQueueSchema });
  await boss.stop({ graceful: false });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // How devices register is not what is measured here: one statement, then fresh statistics.
    const users = Array.from({ length: options.users }, (_, index) => index + 1);
    const device = JSON.stringify({ app_version: '1.0.0', os_version: null, model: null, locale: 'en-US', timezone: 'UTC' });
    const inserted = await client.query(
      `insert into installations
         (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
          registered_at, last_seen_at, identifier_updated_at, permission_updated_at)
       select gen_random_uuid(), $1, i.platform || '-' || i.n, i.platform, i.token, 'active', 'authorized', i.user_id, $2::jsonb,
              now(), now(), now(), now()
         from (select n, 'ios' as platform, ios_token as token, user_id from unnest($3::int[], $4::text[], $5::text[]) as u(n, ios_token, user_id)
               union all
               select n, 'android', android_token, user_id from unnest($3::int[], $6::text[], $5::text[]) as u(n, android_token, user_id)) i`,
      [seeded.applicationId, device, users, users.map(iosToken), users.map(userId), users.map(androidToken)],
    );
    const web = options.webPush ? await insertWebInstallations(client, seeded.applicationId, options.webPush, users) : 0;
    await client.query('analyze installations');
    return { ...seeded, installations: (inserted.rowCount ?? 0) + web };
  } finally {
    await client.end();
  }
}

// The million installations of one application that bench/audience-count.ts and bench/tags.ts
// read, in one generate_series statement: half iOS, half Android; 2 % permission denied, 3 % not
// determined; 5 % without a user, the others spread over 700,000 users; tags `plan` (free 50 %,
// trial 40 %, pro 10 %), `country` (10 values) and `beta` on 5 %; 8 locales; last seen spread over
// 90 days; 0.5 % sharing another installation's push identifier.
import pg from 'pg';
import { migrate, openOrm, type Orm } from '../src/db/orm.ts';
import { createApplication, createToken } from '../src/domain/applications.ts';
import { type Cleanups, createBenchDatabase, fixed, integer, machineLine, startBenchApi } from './support.ts';

/**
 * `count` installations of the application in one statement. Push identifiers look like the real
 * ones (64 hex digits on iOS, ~150 characters on Android); every 200th installation from the 7th
 * shares the identifier of the one two before it (same platform), as a reinstall that kept its token.
 */
export async function prefillInstallations(client: pg.Client, applicationId: string, count: number): Promise<void> {
  await client.query(
    `insert into installations (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id,
                                device, tags, registered_at, last_seen_at, identifier_updated_at, permission_updated_at, identifier_shared)
     select gen_random_uuid(), $1, 'installation-' || n, platform,
            case when platform = 'ios' then md5(t::text) || md5((t + 1)::text)
                 else 'f' || left(md5(t::text), 21) || ':APA91b' || md5((t + 2)::text) || md5((t + 3)::text) || md5((t + 4)::text) end,
            'active',
            case when n % 50 = 0 then 'denied' when n % 33 = 0 then 'not_determined' else 'authorized' end,
            case when n % 20 = 3 then null else 'user-' || (n % 700000) end,
            jsonb_build_object('app_version', '3.2.0', 'os_version', null, 'model', null, 'timezone', null,
                               'locale', (array['en_US', 'de_DE', 'fr-FR', 'es_ES', 'pt_BR', 'en-GB', 'it_IT', 'nl_NL'])[1 + n % 8]),
            jsonb_build_object('plan', case when n % 10 = 1 then 'pro' when n % 10 < 5 then 'trial' else 'free' end,
                               'country', (array['us', 'de', 'fr', 'es', 'it', 'gb', 'br', 'in', 'jp', 'nl'])[1 + (n / 7) % 10])
              || case when n % 20 = 0 then '{"beta": "yes"}'::jsonb else '{}'::jsonb end,
            now() - interval '200 days', seen, seen, seen,
            n % 200 in (5, 7) -- both holders of a shared identifier, as registrations mark them
       from generate_series(1::bigint, $2::bigint) n,
            lateral (select case when n % 2 = 0 then 'ios' else 'android' end as platform,
                            case when n % 200 = 7 then n - 2 else n end as t,
                            now() - make_interval(secs => (n * 7919) % (90 * 86400)) as seen) v`,
    [applicationId, count],
  );
}

/** A bench's database of one application with `installations` prefilled, and Herald's app on a port. */
export type PrefilledBench = {
  orm: Orm;
  applicationId: string;
  /** A token with every ability. */
  token: string;
  /** The app's base URL. */
  api: string;
  prefill: { installations: number; seconds: number; vacuumAnalyzeSeconds: number; how: string };
};

/**
 * A fresh database (dropped by `cleanups`), migrated, one application and a token, `installations`
 * prefilled then vacuumed and analyzed (both timed and printed), and Herald's app on a port.
 */
export async function prefilledBench(options: { adminUrl: string; database: string; application: string; installations: number; cleanups: Cleanups }): Promise<PrefilledBench> {
  const { adminUrl, database, cleanups, installations } = options;
  const url = await createBenchDatabase(adminUrl, database, cleanups);
  process.stdout.write(`${machineLine(database, adminUrl)}\n`);
  const orm = await openOrm(url, 4);
  cleanups.add('orm', () => orm.close());
  await migrate(orm);
  const application = await createApplication(orm.em.fork(), options.application);
  const { plaintext: token } = await createToken(orm.em.fork(), { applicationId: application.id, name: 'bench', abilities: ['*'] });

  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanups.add('prefill client', () => client.end());
  let started = performance.now();
  await prefillInstallations(client, application.id, installations);
  const seconds = (performance.now() - started) / 1000;
  started = performance.now();
  // audience_members too: the audience count reads it by index-only scans, which need its
  // visibility map set, as autovacuum sets it on a running server.
  await client.query('vacuum analyze installations, audience_members');
  const vacuumAnalyzeSeconds = (performance.now() - started) / 1000;
  process.stdout.write(
    `prefill: ${integer(installations)} installations in ${fixed(seconds, 1)} s (generate_series, indexes in place), vacuum analyze ${fixed(vacuumAnalyzeSeconds, 1)} s\n`,
  );
  const api = await startBenchApi(url, orm, cleanups, 2);
  return { orm, applicationId: application.id, token, api, prefill: { installations, seconds, vacuumAnalyzeSeconds, how: 'one generate_series insert' } };
}

// (a') in bench/fanout.ts: the floor of a durable fanout. The ceiling's adapters and pushes, plus
// the least that any push service which records each delivery must write, in plain SQL on a table
// of the deliveries' shape (its columns, indexes and fillfactor): per notification, one read of its
// users' installations and one insert of its deliveries, pending, before any of its pushes; per
// chunk of pushes, one update of their outcomes once the provider answered. No queue, no
// transaction, no lease, no rule, no counter, no statistics: what Herald spends beyond this is
// its own, and what this spends beyond the ceiling is what writing every delivery costs.
import pg from 'pg';
import { newId } from '../src/db/ids.ts';
import type { PushContent } from '../src/domain/payloads.ts';
import type { Push, PushProvider } from '../src/providers/provider.ts';

export type Floor = { run(): Promise<number>; close(): Promise<void> };

type Target = { id: string; installation_id: string; user_id: string; platform: 'ios' | 'android'; provider_identifier: string };

export async function openFloor(options: {
  url: string;
  applicationId: string;
  /** Each notification's users. */
  notifications: string[][];
  providers: { ios: PushProvider; android: PushProvider };
  content: PushContent;
  ttlSeconds: number;
  /** Pushes per outcome update: Herald's HERALD_DELIVER_CHUNK_SIZE. */
  chunkSize: number;
  /** Herald's HERALD_DB_POOL_MAX. */
  poolMax: number;
  /** The floor's own table, created here (floors side by side in one database need one each). */
  table: string;
}): Promise<Floor> {
  const table = pg.escapeIdentifier(options.table);
  const pool = new pg.Pool({ connectionString: options.url, max: options.poolMax, application_name: 'herald-bench-floor' });
  const { rows: [shape] } = await pool.query<{ reloptions: string[] | null }>(`select reloptions from pg_class where oid = 'deliveries'::regclass`);
  await pool.query(`create table ${table} (like deliveries including all)`);
  if (shape.reloptions) await pool.query(`alter table ${table} set (${shape.reloptions.join(', ')})`);

  const fanOut = async (users: string[]): Promise<number> => {
    const notificationId = newId();
    const expiresAt = new Date(Date.now() + options.ttlSeconds * 1000);
    const { rows: targets } = await pool.query<Target>(
      // A probe of (application_id, user_id) per user, as Herald's read is: planned with the array's
      // values, `user_id = any($2)` was slow to plan and ran as a scan.
      `select i.id, i.installation_id, i.user_id, i.platform, i.provider_identifier
         from unnest($2::text[]) as u(user_id)
              cross join lateral (
                select * from installations i where i.application_id = $1 and i.user_id = u.user_id and i.status = 'active' offset 0
              ) i`,
      [options.applicationId, users],
    );
    const deliveryIds = targets.map(() => newId());
    await pool.query(
      `insert into ${table} (id, application_id, notification_id, installation_id, client_installation_id, user_id, platform, state, attempts, created_at)
       select d.id, $1, $2, d.installation_id, d.client_installation_id, d.user_id, d.platform, 'pending', 0, now()
         from unnest($3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::text[]) as d(id, installation_id, client_installation_id, user_id, platform)`,
      [
        options.applicationId,
        notificationId,
        deliveryIds,
        targets.map((target) => target.id),
        targets.map((target) => target.installation_id),
        targets.map((target) => target.user_id),
        targets.map((target) => target.platform),
      ],
    );
    const pushesOf = (platform: Target['platform']): Push[] =>
      targets.flatMap((target, index) =>
        target.platform === platform ? [{ deliveryId: deliveryIds[index], notificationId, providerIdentifier: target.provider_identifier, content: options.content, expiresAt }] : [],
      );
    let accepted = 0;
    // The platforms side by side, each one chunk after another, as a deliver job pushes a batch.
    await Promise.all(
      (['ios', 'android'] as const).map(async (platform) => {
        const pushes = pushesOf(platform);
        for (let start = 0; start < pushes.length; start += options.chunkSize) {
          const outcomes = await options.providers[platform].send(pushes.slice(start, start + options.chunkSize));
          const { rowCount } = await pool.query(
            `update ${table} d set state = r.state, provider_message_id = r.provider_message_id, attempts = d.attempts + 1,
                    last_attempt_at = now(), completed_at = now()
               from unnest($1::uuid[], $2::text[], $3::text[]) as r(id, state, provider_message_id)
              where d.id = r.id and d.state = 'pending' and r.state = 'accepted'`,
            [outcomes.map((outcome) => outcome.deliveryId), outcomes.map((outcome) => outcome.kind), outcomes.map((outcome) => (outcome.kind === 'accepted' ? (outcome.providerId ?? null) : null))],
          );
          accepted += rowCount ?? 0;
        }
      }),
    );
    return accepted;
  };

  // Warmed up (the pool's connections, the statements' plans, JIT) as the ceiling and Herald are.
  await fanOut(options.notifications[0]);
  let closing: Promise<void> | null = null;
  return {
    /** All the notifications at once, as Herald's load sends them; answers deliveries accepted per second. */
    async run() {
      await pool.query(`truncate ${table}`);
      const started = performance.now();
      const accepted = (await Promise.all(options.notifications.map(fanOut))).reduce((sum, count) => sum + count, 0);
      const elapsed = (performance.now() - started) / 1000;
      const expected = options.notifications.length * options.notifications[0].length * 2;
      if (accepted !== expected) throw new Error(`floor: ${accepted} of ${expected} deliveries accepted`);
      return accepted / elapsed;
    },
    close: () => (closing ??= pool.end()),
  };
}

// The local-time benchmark (`make bench-local-time`). On a fresh database that is dropped at the end
// whatever happens, with the simulators in their own process and `herald serve` and `herald work`
// as separate processes (as bench-broadcast runs them):
//   prefill  100,000 installations of one application in one statement, their device timezones
//            spread evenly over the zones below (at least 24 distinct UTC offsets, among them
//            whole, half and three-quarter hours), 1 in 50 with none and 1 in 50 with a name that
//            is no zone (both use the send's `options.timezone`);
//   send     one `all: true` broadcast with `options.local_time` chosen on the wall clock so that
//            the zones at UTC+6 are due at once (their local time is within that minute) and
//            Asia/Kathmandu (UTC+5:45) 15 minutes later; every other zone waits hours;
//   measure  for each zone due within the run: its pushes' arrival after its due instant (p50,
//            max) against the goal (every push within 60 s of it), and pushes that came early (none
//            may); for the zones still waiting: deliveries written (none: nothing of a waiting
//            zone is in the database or in memory but its wave); every Herald process's RSS sampled
//            every 250 ms, its peak before the first zone was pushed against its peak while the
//            others waited (flat: within 20 %).
// It prints each figure beside its goal (ok / MISS) and writes them to bench/results/local-time-*.json.
// Exits 0 whatever the figures are (a measurement); non-zero when the run itself failed.
//
// Environment (all optional):
//   DATABASE_URL           admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres)
//   BENCH_INSTALLATIONS    installations prefilled (100000)
//   BENCH_WAIT_MINUTES     how long to wait for the zones due after the first (16: Kathmandu's is 15 minutes on)
//   BENCH_JSON             write the figures to this file instead of bench/results/local-time-<UTC time>.json
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createDatabase, seedApplication } from '../test/support/seed.ts';
import { message } from './fanout-reference.ts';
import {
  bulkLoad,
  createCleanups,
  fixed,
  freePort,
  herald,
  heraldEnvironment,
  integer,
  launch,
  type Launched,
  machineLine,
  percentile,
  positiveIntegerFromEnv,
  receivedPushes,
  root,
  runBenchmark,
  startSimulatorsProcess,
  statusKb,
  waitForHttp,
  writeResults,
} from './support.ts';

const env = process.env;
const settings = {
  installations: positiveIntegerFromEnv('BENCH_INSTALLATIONS', 100_000),
  waitMinutes: positiveIntegerFromEnv('BENCH_WAIT_MINUTES', 16),
  rssEveryMs: 250,
};
const goals = { lateMs: 60_000, rssGrowth: 0.2 };

/**
 * Zones with 30 distinct UTC offsets in December (northern winter, southern summer). The first
 * group is due at once; Kathmandu 15 minutes later; the rest hours apart.
 */
const zones = [
  'Asia/Dhaka', 'Asia/Bishkek', 'Asia/Kathmandu', 'Asia/Kolkata', 'Asia/Karachi', 'Asia/Kabul', 'Asia/Dubai', 'Asia/Tehran',
  'Europe/Moscow', 'Europe/Athens', 'Europe/Berlin', 'Europe/London', 'UTC', 'Atlantic/Azores', 'Atlantic/South_Georgia',
  'America/Sao_Paulo', 'America/St_Johns', 'America/Halifax', 'America/New_York', 'America/Chicago', 'America/Denver',
  'America/Los_Angeles', 'America/Anchorage', 'Pacific/Marquesas', 'Pacific/Honolulu', 'Asia/Yangon', 'Asia/Bangkok',
  'Asia/Shanghai', 'Australia/Eucla', 'Asia/Tokyo', 'Australia/Adelaide', 'Australia/Sydney', 'Pacific/Auckland',
];
const fallbackZone = 'Asia/Dhaka';

const log = (line = '') => process.stdout.write(`${line}\n`);
const verdict = (ok: boolean) => (ok ? 'ok' : 'MISS');
const row = (label: string, value: string, goal: string, ok: boolean) => log(`  ${label.padEnd(52)}${value.padStart(18)}   goal ${goal.padEnd(12)} ${verdict(ok)}`);
const cleanups = createCleanups();

/** The wall-clock time "HH:MM" in a zone at an instant. */
function localClock(at: Date, zone: string): string {
  return new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(at);
}

/** Offset of a zone from UTC at an instant, in minutes. */
function offsetMinutes(at: Date, zone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' }).formatToParts(at);
  const name = parts.find((part) => part.type === 'timeZoneName')?.value ?? 'GMT';
  const match = /GMT([+-])(\d{2}):(\d{2})/.exec(name);
  return match ? (match[1] === '-' ? -1 : 1) * (Number(match[2]) * 60 + Number(match[3])) : 0;
}

async function main(): Promise<number> {
  const adminUrl = env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const database = `herald_bench_local_time_${randomBytes(4).toString('hex')}`;
  log(`Herald local-time benchmark, ${new Date().toISOString()}`);
  log(machineLine(database, adminUrl));
  const offsets = new Set(zones.map((zone) => offsetMinutes(new Date(), zone)));
  log(`zones: ${zones.length}, distinct UTC offsets now: ${offsets.size}`);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'herald-bench-'));
  cleanups.add('temporary folder', async () => rmSync(tmp, { recursive: true, force: true }));
  const { url, drop } = await createDatabase(adminUrl, database);
  cleanups.add('database', drop);
  const sims = await startSimulatorsProcess(path.join(tmp, 'simulators'));
  cleanups.add('simulators', () => sims.process.stop());
  const credentialsKey = randomBytes(32);
  const seeded = await seedApplication(url, { name: 'Local-time benchmark', credentialsKey, keys: sims.keys, users: 0 });
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  cleanups.add('pool', () => pool.end());
  const figures: Record<string, unknown> = { settings, zones, distinctOffsets: offsets.size };

  const prefillStarted = performance.now();
  const loader = new pg.Client({ connectionString: url });
  await loader.connect();
  const inserted = await bulkLoad(loader, ['installations'], () => loader.query(
    `insert into installations
       (id, application_id, installation_id, platform, provider_identifier, status, permission, user_id, device,
        registered_at, last_seen_at, identifier_updated_at, permission_updated_at, tags)
     select gen_random_uuid(), $1, 'installation-' || n, case when n % 2 = 0 then 'ios' else 'android' end,
            case when n % 2 = 0 then md5(n::text) || md5((-n)::text) else 'fcm-' || n || ':APA91b' || md5(n::text) end,
            'active', 'authorized', 'user-' || n,
            jsonb_build_object('locale', 'en-US', 'timezone',
              case when n % 50 = 0 then null when n % 50 = 1 then 'Mars/Olympus_Mons' else ($3::text[])[1 + (n / 2) % cardinality($3::text[])] end),
            now(), now(), now(), now(), '{}'::jsonb
       from generate_series(1, $2) n`,
    [seeded.applicationId, settings.installations, zones],
  ), log);
  await loader.end();
  log(`prefilled ${integer(inserted.rowCount ?? 0)} installations in ${fixed((performance.now() - prefillStarted) / 1000, 1)} s`);

  const port = await freePort();
  const heraldEnv: NodeJS.ProcessEnv = { ...heraldEnvironment({ databaseUrl: url, port, dataDir: path.join(tmp, 'herald'), ...sims, credentialsKey }), HERALD_WORKER_NICE: '10' };
  const api = launch('herald serve', herald, ['serve'], { cwd: root, env: heraldEnv });
  cleanups.add('herald serve', () => api.stop());
  await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, () => !api.exited());
  const healthPort = await freePort();
  const worker = launch('herald work', herald, ['work'], { cwd: root, env: { ...heraldEnv, HERALD_WORKER_HEALTH_PORT: String(healthPort) } });
  cleanups.add('herald work', () => worker.stop());
  await waitForHttp(`http://127.0.0.1:${healthPort}/readyz`, 60_000, () => !worker.exited());

  // RSS of each process: before the first zone's pushes end, and while the others wait.
  let stage: 'first' | 'waiting' = 'first';
  const peaks = new Map<string, { first: number; waiting: number }>();
  const sampler = setInterval(() => {
    for (const launched of [api, worker] as Launched[]) {
      const kb = statusKb(launched.pid, 'VmRSS');
      if (kb === null) continue;
      const peak = peaks.get(launched.name) ?? { first: 0, waiting: 0 };
      peak[stage] = Math.max(peak[stage], kb);
      peaks.set(launched.name, peak);
    }
  }, settings.rssEveryMs);
  cleanups.add('rss sampler', async () => clearInterval(sampler));

  // Wait for a minute that leaves at least 20 s of it, so the zones due "at once" are within it when the fanout starts.
  while (new Date().getSeconds() > 40) await sleep(1000);
  const start = new Date();
  const localTime = localClock(start, fallbackZone);
  const response = await fetch(`http://127.0.0.1:${port}/api/v1/notifications`, {
    method: 'POST',
    headers: { authorization: `Bearer ${seeded.serverToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      recipients: { audience: { all: true } },
      notification: { title: 'Good morning', body: message.notification.body },
      options: { local_time: localTime, timezone: fallbackZone },
    }),
  });
  const sent = (await response.json()) as { data?: { id: string } };
  if (response.status !== 202 || !sent.data) throw new Error(`send: ${response.status} ${JSON.stringify(sent)}`);
  const id = sent.data.id;
  log(`sent at ${start.toISOString()} with local_time ${localTime} (now in ${fallbackZone}); waiting ${settings.waitMinutes} min`);

  // Zone → its due instant, computed here the way the rule reads (next occurrence of the wall-clock
  // minute, at once within it), and checked against what Herald wrote on the deliveries.
  const deadline = Date.now() + settings.waitMinutes * 60_000;
  let firstDone = false;
  while (Date.now() < deadline) {
    await sleep(2000);
    if (!firstDone) {
      const { rows } = await pool.query<{ pending: number; delivered: number }>(
        `select count(*) filter (where state = 'pending')::int as pending, count(*)::int as delivered from deliveries where notification_id = $1`,
        [id],
      );
      if (rows[0].delivered > 0 && rows[0].pending === 0) {
        firstDone = true;
        stage = 'waiting';
        log(`first zones pushed (${integer(rows[0].delivered)} deliveries) ${fixed((Date.now() - start.getTime()) / 1000, 1)} s after the send`);
      }
    }
  }
  clearInterval(sampler);

  const { rows: deliveries } = await pool.query<{ zone: string | null; due: string | null; delivery: string; state: string }>(
    `select i.device->>'timezone' as zone, (extract(epoch from d.scheduled_for) * 1000)::text as due, d.id as delivery, d.state
       from deliveries d join installations i on i.id = d.installation_id where d.notification_id = $1`,
    [id],
  );
  const pushes = await receivedPushes(sims);
  const arrival = new Map(pushes.filter((push) => push.notificationId === id && push.deliveryId).map((push) => [push.deliveryId!, push.at]));
  const byZone = new Map<string, { due: number; late: number[]; early: number; deliveries: number }>();
  for (const delivery of deliveries) {
    const zone = delivery.zone === null || !zones.includes(delivery.zone) ? `(fallback) ${delivery.zone ?? 'none'}` : delivery.zone;
    const due = delivery.due === null ? start.getTime() : Number(delivery.due);
    const entry = byZone.get(zone) ?? { due, late: [], early: 0, deliveries: 0 };
    entry.deliveries += 1;
    const at = arrival.get(delivery.delivery);
    if (at !== undefined) {
      if (at < due) entry.early += 1;
      entry.late.push(Math.max(0, at - due));
    }
    byZone.set(zone, entry);
  }
  const waitingZones = zones.filter((zone) => !byZone.has(zone));
  log('');
  log('zones due within the run:');
  const zoneFigures = [];
  for (const [zone, entry] of [...byZone].sort((a, b) => a[1].due - b[1].due)) {
    const max = entry.late.length ? Math.max(...entry.late) : Number.NaN;
    const ok = entry.late.length === entry.deliveries && entry.early === 0 && max <= goals.lateMs;
    row(
      `${zone} due ${new Date(entry.due).toISOString().slice(11, 19)} (${integer(entry.deliveries)})`,
      `p50 ${fixed(percentile(entry.late, 50) / 1000, 1)} s max ${fixed(max / 1000, 1)} s`,
      `≤ ${goals.lateMs / 1000} s, 0 early`,
      ok,
    );
    zoneFigures.push({ zone, dueAt: new Date(entry.due).toISOString(), deliveries: entry.deliveries, pushed: entry.late.length, early: entry.early, p50Ms: percentile(entry.late, 50), maxMs: max, ok });
  }
  const { rows: notification } = await pool.query<{ status: string; ahead: number }>(
    `select status, (select count(*)::int from deliveries d where d.notification_id = n.id and d.scheduled_for > now()) as ahead
       from notifications n where id = $1`,
    [id],
  );
  row(`${waitingZones.length} zones still waiting: their deliveries written`, integer(notification[0].ahead), '0', notification[0].ahead === 0);
  row(`notification status while zones wait`, notification[0].status, 'processing', notification[0].status === 'processing');
  log('');
  const rss = Object.fromEntries([...peaks].map(([name, peak]) => [name, { firstMb: peak.first / 1024, waitingMb: peak.waiting / 1024 }]));
  for (const [name, peak] of Object.entries(rss)) {
    const growth = peak.waitingMb / peak.firstMb - 1;
    row(`${name} peak RSS first zones → while waiting`, `${fixed(peak.firstMb, 0)} → ${fixed(peak.waitingMb, 0)} MB`, `≤ +${goals.rssGrowth * 100} %`, growth <= goals.rssGrowth);
  }
  figures.send = { at: start.toISOString(), localTime, timezone: fallbackZone, notificationId: id };
  figures.zonesDue = zoneFigures;
  figures.zonesWaiting = waitingZones;
  figures.status = notification[0].status;
  figures.deliveriesWrittenAhead = notification[0].ahead;
  figures.rss = rss;
  writeResults('local-time', figures);
  return 0;
}

await runBenchmark('bench-local-time', main, cleanups);

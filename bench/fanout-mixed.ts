// The mixed run of `make bench-fanout`: an application whose users each have an iOS, an Android and
// a web installation, so that a third of the pushes go to each provider, against its ceiling: the
// same pushes sent at once by the libraries alone (Herald's APNs and FCM adapters as in (a), and the
// `web-push` library's own sendNotification on a keep-alive agent, signing its VAPID JWT as it does
// at each push) straight to the simulators. The simulator does not decrypt in either run: it did
// not issue the seeded subscriptions. Herald's ratio to the ceiling is printed beside its goal.
import { randomUUID } from 'node:crypto';
import https from 'node:https';
import type pg from 'pg';
import webpush from 'web-push';
import { createLogger } from '../src/logging/logger.ts';
import { createApnsProvider } from '../src/providers/apns.ts';
import { createFcmProvider } from '../src/providers/fcm.ts';
import { createLimiter } from '../src/providers/support.ts';
import type { Push } from '../src/providers/provider.ts';
import { webPushPayload } from '../src/domain/payloads.ts';
import { androidToken, iosToken, seedApplication, seededWebKeys, userId, webEndpoint } from '../test/support/seed.ts';
import { clearSimulators, message, pushContent } from './fanout-reference.ts';
import { fixed, integer, median, simulatorControl, type SimulatorsProcess } from './support.ts';

export type MixedSettings = { notifications: number; recipients: number; rounds: number; timeoutMs: number };
export type MixedStage = { url: string; port: number; sims: SimulatorsProcess; credentialsKey: Buffer; pool: pg.Pool; alive: () => boolean };

/** Herald's mixed rate over the ceiling's: the goal. */
export const mixedTarget = 0.8;
/** Pushes in flight at once for the web-push library: as many as Herald's Web Push client allows. */
const webConcurrency = 500;

type MixedRound = { ceiling: number; webCeiling: number; herald: number; heraldWeb: number };

export async function mixedRun(stage: MixedStage, settings: MixedSettings, log: (line?: string) => void) {
  const users = settings.notifications * settings.recipients;
  const seeded = await seedApplication(stage.url, {
    name: 'Fanout benchmark, mixed',
    credentialsKey: stage.credentialsKey,
    keys: stage.sims.keys,
    users,
    webPush: stage.sims.webPush,
  });
  log(`mixed: ${integer(seeded.installations)} installations (${integer(users)} users × iOS + Android + web)`);
  const ceiling = openCeiling(stage.sims, users);
  const clear = () => Promise.all([clearSimulators(stage.sims), simulatorControl(stage.sims.webPush, stage.sims.ca, 'DELETE', '/__sim/received')]);
  try {
    await ceiling.warm();
    // Herald's web client too (the library imported, connections opened, the VAPID header signed):
    // one notification to a few users first, not measured.
    await heraldRound(stage, seeded.serverToken, { ...settings, notifications: 1, recipients: Math.min(100, users) }, `mixed-warmup-${randomUUID()}`);
    const rounds: MixedRound[] = [];
    for (let round = 0; round < settings.rounds; round++) {
      await clear();
      const mixedRate = await ceiling.mixed();
      await clear();
      const webRate = await ceiling.web();
      await clear();
      const herald = await heraldRound(stage, seeded.serverToken, settings, `mixed-${randomUUID()}`);
      rounds.push({ ceiling: mixedRate, webCeiling: webRate, ...herald });
      log(
        `mixed round ${round + 1}: ceiling ${integer(mixedRate)}/s (web-push alone ${integer(webRate)}/s), ` +
          `Herald ${integer(herald.herald)}/s (its web pushes ${integer(herald.heraldWeb)}/s), ratio ${fixed(herald.herald / mixedRate, 2)}`,
      );
    }
    const figures = {
      users,
      pushes: users * 3,
      ceiling: median(rounds.map((round) => round.ceiling)),
      webCeiling: median(rounds.map((round) => round.webCeiling)),
      herald: median(rounds.map((round) => round.herald)),
      heraldWeb: median(rounds.map((round) => round.heraldWeb)),
      ratio: median(rounds.map((round) => round.herald / round.ceiling)),
      webRatio: median(rounds.map((round) => round.heraldWeb / round.webCeiling)),
      target: mixedTarget,
      rounds,
    };
    return figures;
  } finally {
    await ceiling.close();
  }
}

export function reportMixed(figures: Awaited<ReturnType<typeof mixedRun>>, row: (label: string, ...cells: string[]) => void): void {
  row(`mixed: a third each iOS, Android, web (median of ${figures.rounds.length})`, integer(figures.pushes), '', '');
  row('    ceiling: the libraries alone, all three at once', '', '', integer(figures.ceiling));
  row('    Herald: first 202 → last accepted', '', '', integer(figures.herald));
  row(`    ratio Herald/ceiling ≥ ${figures.target}`, '', fixed(figures.ratio, 2), figures.ratio >= figures.target ? 'PASS' : 'BELOW');
  row('    web ceiling: web-push alone', integer(figures.users), '', integer(figures.webCeiling));
  row('    Herald, its web pushes: first 202 → last web accepted', '', '', integer(figures.heraldWeb));
  row('    ratio, web alone', '', '', fixed(figures.webRatio, 2));
}

/** The libraries alone: each run pushes what a Herald round does (one push per installation) and answers pushes per second. */
function openCeiling(sims: SimulatorsProcess, users: number) {
  const silent = createLogger('silent');
  const endpoints = { apns: sims.apns, fcm: sims.fcm, ca: sims.ca };
  const ios = createApnsProvider(sims.keys.apns, endpoints, silent);
  const android = createFcmProvider(sims.keys.fcm, endpoints, silent);
  // Closes idle connections before the simulator does, as Herald's agent does (providers/web-push.ts).
  const agent = new https.Agent({ keepAlive: true, maxSockets: 64, ca: sims.ca, timeout: 30_000 });
  const limit = createLimiter(webConcurrency);
  const { subject, publicKey, privateKey } = sims.keys.webpush;
  const expiresAt = () => new Date(Date.now() + message.options.ttl * 1000);
  const pushes = (count: number, token: (n: number) => string): Push[] =>
    Array.from({ length: count }, (_, index) => ({ deliveryId: randomUUID(), notificationId: randomUUID(), providerIdentifier: token(index + 1), content: pushContent, expiresAt: expiresAt() }));
  const sendWeb = async (count: number) => {
    const notificationId = randomUUID();
    const results = await Promise.all(
      Array.from({ length: count }, (_, index) =>
        limit(() => {
          const payload = JSON.stringify(webPushPayload(pushContent, { deliveryId: randomUUID(), notificationId }));
          return webpush.sendNotification({ endpoint: webEndpoint(sims.webPush, index + 1), keys: seededWebKeys }, payload, {
            vapidDetails: { subject, publicKey, privateKey },
            TTL: message.options.ttl,
            urgency: 'high',
            agent,
          });
        }),
      ),
    );
    if (results.some((result) => result.statusCode !== 201)) throw new Error('web ceiling: a push was not accepted');
  };
  const sendApple = async (count: number) => {
    const refused = (await ios.send(pushes(count, iosToken))).filter((outcome) => outcome.kind !== 'accepted');
    if (refused.length > 0) throw new Error(`mixed ceiling: ${refused.length} APNs pushes not accepted`);
  };
  const sendGoogle = async (count: number) => {
    const refused = (await android.send(pushes(count, androidToken))).filter((outcome) => outcome.kind !== 'accepted');
    if (refused.length > 0) throw new Error(`mixed ceiling: ${refused.length} FCM pushes not accepted`);
  };
  const timed = async (work: () => Promise<unknown>, items: number) => {
    const started = performance.now();
    await work();
    return items / ((performance.now() - started) / 1000);
  };
  return {
    /** Connections, tokens, JIT: not measured. */
    warm: () => Promise.all([sendWeb(200), sendApple(200), sendGoogle(200)]),
    mixed: () => timed(() => Promise.all([sendWeb(users), sendApple(users), sendGoogle(users)]), users * 3),
    web: () => timed(() => sendWeb(users), users),
    close: async () => {
      agent.destroy();
      await Promise.all([ios.close(), android.close()]);
    },
  };
}

/** The round's notifications at once, each to its own users; rates from the first 202 to the last accepted, in all and on web. */
async function heraldRound(stage: MixedStage, token: string, settings: MixedSettings, stamp: string) {
  const base = `http://127.0.0.1:${stage.port}`;
  const sent = await Promise.all(
    Array.from({ length: settings.notifications }, async (_, index) => {
      const userIds = Array.from({ length: settings.recipients }, (_, offset) => userId(index * settings.recipients + offset + 1));
      const response = await fetch(`${base}/api/v1/notifications`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': `${stamp}-${index}` },
        body: JSON.stringify({ recipients: { user_ids: userIds }, ...message }),
      });
      const body = (await response.json()) as { data?: { id: string } };
      if (response.status !== 202 || !body.data) throw new Error(`mixed send: ${response.status} ${JSON.stringify(body)}`);
      return { id: body.data.id, acceptedAt: Date.now() };
    }),
  );
  const ids = sent.map((notification) => notification.id);
  const deadline = Date.now() + settings.timeoutMs;
  for (;;) {
    const { rows } = await stage.pool.query<{ open: number }>('select count(*)::int as open from notifications where id = any($1::uuid[]) and completed_at is null', [ids]);
    if (rows[0].open === 0) break;
    if (!stage.alive()) throw new Error('Herald exited during the mixed run');
    if (Date.now() > deadline) throw new Error(`mixed run: ${rows[0].open} notifications not completed`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const { rows } = await stage.pool.query<{ platform: string; accepted: number; others: number; last: string }>(
    `select platform, count(*) filter (where state = 'accepted')::int as accepted, count(*) filter (where state <> 'accepted')::int as others,
            (extract(epoch from max(completed_at)) * 1000)::text as last
       from deliveries where notification_id = any($1::uuid[]) group by platform`,
    [ids],
  );
  const expected = settings.notifications * settings.recipients;
  if (rows.length !== 3 || rows.some((row) => row.accepted !== expected || row.others > 0)) throw new Error(`mixed run: ${JSON.stringify(rows)}`);
  const first202 = Math.min(...sent.map((notification) => notification.acceptedAt));
  const last = Math.max(...rows.map((row) => Number(row.last)));
  const web = rows.find((row) => row.platform === 'web')!;
  return { herald: (expected * 3) / ((last - first202) / 1000), heraldWeb: expected / ((Number(web.last) - first202) / 1000) };
}

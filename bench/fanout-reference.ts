// The references of `make bench-fanout` (bench/fanout.ts): (a) the ceiling, Herald's adapters sending
// pre-built pushes straight to the simulators, and (a') the floor of a durable fanout
// (bench/fanout-floor.ts). They run in the benchmark's own process, with Node's defaults, and again
// in a process of their own started as Herald is (bin/herald-node: its heap and malloc settings),
// so that each run shows what Herald's memory settings cost the same work (bench/fanout-reference-process.ts).
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { PushContent } from '../src/domain/payloads.ts';
import { createLogger } from '../src/logging/logger.ts';
import { createApnsProvider } from '../src/providers/apns.ts';
import { createFcmProvider } from '../src/providers/fcm.ts';
import type { Push, PushProvider } from '../src/providers/provider.ts';
import type { SimulatorKeys } from '../src/cli/simulate.ts';
import { androidToken, iosToken } from '../test/support/seed.ts';
import { openFloor } from './fanout-floor.ts';
import { launch, root, simulatorControl } from './support.ts';

/** What every notification of the benchmark says: a typical visible push with a little data and a TTL. */
export const message = {
  notification: { title: 'Order shipped', body: 'Your order is on its way' },
  data: { order_id: 1234, kind: 'shipping' },
  options: { priority: 'high', ttl: 3600 },
} as const;
/** The same content as a deliver job builds it from the stored notification (jobs.ts pushContent). */
export const pushContent: PushContent = {
  notification: { ...message.notification, image_url: null, action_url: null },
  data: { ...message.data },
  options: { ...message.options },
};

/** The simulators as a process other than the one that started them reaches them. */
export type SimulatorEndpoints = { apns: string; fcm: string; ca: string; keys: SimulatorKeys };

export async function clearSimulators(sims: SimulatorEndpoints): Promise<void> {
  await Promise.all([sims.apns, sims.fcm].map((base) => simulatorControl(base, sims.ca, 'DELETE', '/__sim/received')));
}

/** What (a) and (a') are given: the same pushes, users and settings as Herald's load rounds. */
export type ReferenceOptions = {
  sims: SimulatorEndpoints;
  /** Pushes per platform of a run. */
  perPlatform: number;
  /** Users per notification: the pushes of one notification share its id, as in Herald. */
  recipients: number;
  floor: { url: string; applicationId: string; notifications: string[][]; chunkSize: number; poolMax: number; table: string };
};

/** run() answers pushes (a) or deliveries (a') accepted per second. */
export type References = { ceiling: { run(): Promise<number> }; floor: { run(): Promise<number> }; close(): Promise<void> };

type Providers = { ios: PushProvider; android: PushProvider; close(): Promise<void> };

/**
 * The adapters Herald uses, configured the same way, for (a) and (a'): @parse/node-apn for APNs,
 * Herald's own HTTP/2 client for FCM (src/providers/fcm-client.ts).
 */
function openProviders(sims: SimulatorEndpoints): Providers {
  const silent = createLogger('silent');
  const endpoints = { apns: sims.apns, fcm: sims.fcm, ca: sims.ca };
  const ios = createApnsProvider(sims.keys.apns, endpoints, silent);
  const android = createFcmProvider(sims.keys.fcm, endpoints, silent);
  let closing: Promise<void> | null = null;
  const close = () => (closing ??= Promise.all([ios, android].map((provider) => provider.close())).then(() => undefined));
  return { ios, android, close };
}

/**
 * (a) The adapters called directly with pre-built pushes, both platforms at once. Warmed up
 * (connections, JWT, OAuth token, JIT) before the first measured run, as Herald is by its warm-up
 * notifications.
 */
async function openCeiling(options: ReferenceOptions, providers: Providers): Promise<{ run(): Promise<number> }> {
  const pushes = (count: number, token: (n: number) => string): Push[] => {
    const expiresAt = new Date(Date.now() + message.options.ttl * 1000);
    let notificationId = randomUUID();
    return Array.from({ length: count }, (_, index) => {
      if (index % options.recipients === 0) notificationId = randomUUID();
      return { deliveryId: randomUUID(), notificationId, providerIdentifier: token(index + 1), content: pushContent, expiresAt };
    });
  };
  const sendAll = async (iosPushes: Push[], androidPushes: Push[]) => {
    const outcomes = (await Promise.all([providers.ios.send(iosPushes), providers.android.send(androidPushes)])).flat();
    const refused = outcomes.filter((outcome) => outcome.kind !== 'accepted');
    if (refused.length > 0) throw new Error(`ceiling: ${refused.length} pushes not accepted, e.g. ${JSON.stringify(refused[0])}`);
  };
  await sendAll(pushes(500, iosToken), pushes(500, androidToken));
  await clearSimulators(options.sims);
  return {
    async run() {
      const iosPushes = pushes(options.perPlatform, iosToken);
      const androidPushes = pushes(options.perPlatform, androidToken);
      const started = performance.now();
      await sendAll(iosPushes, androidPushes);
      const elapsed = (performance.now() - started) / 1000;
      await clearSimulators(options.sims);
      return (options.perPlatform * 2) / elapsed;
    },
  };
}

/** (a) and (a') in this process. */
export async function openReferences(options: ReferenceOptions): Promise<References> {
  const providers = openProviders(options.sims);
  try {
    const ceiling = await openCeiling(options, providers);
    const floor = await openFloor({ ...options.floor, providers, content: pushContent, ttlSeconds: message.options.ttl });
    await clearSimulators(options.sims);
    return {
      ceiling,
      floor: {
        async run() {
          const rate = await floor.run();
          await clearSimulators(options.sims);
          return rate;
        },
      },
      close: async () => {
        await providers.close();
        await floor.close();
      },
    };
  } catch (error) {
    await providers.close();
    throw error;
  }
}

export type ReferenceRequest = { open: ReferenceOptions } | { run: 'ceiling' | 'floor' };
export type ReferenceAnswer = { opened: true } | { rate: number } | { failed: string };

/**
 * (a) and (a') in a process of their own, started by bin/herald-node as Herald is by bin/herald.
 * close() stops it: nothing it holds outlives it (its connections end with it).
 */
export async function startReferenceProcess(options: ReferenceOptions): Promise<References & { pid: number }> {
  const script = path.join(root, 'bench', 'fanout-reference-process.ts');
  const launched = launch('references', path.join(root, 'bin', 'herald-node'), [script], { cwd: root, env: process.env, ipc: true });
  const exited = new Promise<never>((_, reject) =>
    launched.child.once('exit', (code, signal) => reject(new Error(`references process exited (${code ?? signal}):\n${launched.lines.join('\n')}`))),
  );
  exited.catch(() => undefined);
  const ask = async (request: ReferenceRequest) => {
    const answer = await Promise.race([
      new Promise<ReferenceAnswer>((resolve) => {
        launched.child.once('message', (message) => resolve(message as ReferenceAnswer));
        launched.child.send(request);
      }),
      exited,
    ]);
    if ('failed' in answer) throw new Error(`references process: ${answer.failed}`);
    return answer;
  };
  const rate = async (which: 'ceiling' | 'floor') => {
    const answer = await ask({ run: which });
    if (!('rate' in answer)) throw new Error(`references process answered ${JSON.stringify(answer)}`);
    return answer.rate;
  };
  const close = () => launched.stop(10_000);
  try {
    await ask({ open: options });
  } catch (error) {
    await close();
    throw error;
  }
  return { pid: launched.pid, ceiling: { run: () => rate('ceiling') }, floor: { run: () => rate('floor') }, close };
}

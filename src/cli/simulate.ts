// Local APNs, FCM and Web Push for a machine with no Apple or Google account: `herald simulate`
// runs them alone; `herald start --simulate` (the default on the zero-config start) runs them
// in-process and points the workers at them. Their signing keys (and the demo's VAPID key pair) are
// kept in the data folder, so that credentials stored for the demo application keep working across
// restarts.
import { generateKeyPairSync, createPublicKey } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ProviderEndpoints } from '../providers/provider.ts';
import { generateVapidKeys, type ApnsCredentials, type FcmCredentials, type WebPushCredentials } from '../domain/credentials.ts';
import { startApnsSimulator, type ApnsSimulator } from '../providers/simulators/apns-simulator.ts';
import type { Latency } from '../providers/simulators/common.ts';
import { startFcmSimulator, type FcmSimulator } from '../providers/simulators/fcm-simulator.ts';
import { startWebPushSimulator, type WebPushSimulator } from '../providers/simulators/web-push-simulator.ts';

export const simulatedApns = { keyId: 'SIMKEY0001', teamId: 'SIMTEAM001', bundleId: 'com.example.herald.demo' } as const;
export const simulatedFcmProject = 'herald-demo';

export type SimulatorKeys = { apns: ApnsCredentials; fcm: FcmCredentials; webpush: WebPushCredentials };

export type Simulators = {
  apns: ApnsSimulator;
  fcm: FcmSimulator;
  webPush: WebPushSimulator;
  endpoints: ProviderEndpoints;
  /** Credentials the simulators accept: what the demo application is given. */
  keys: SimulatorKeys;
  stop(): Promise<void>;
};

function readOrCreate(file: string | null, create: () => string): string {
  if (file && existsSync(file)) return readFileSync(file, 'utf8');
  const value = create();
  if (file) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, value, { mode: 0o600 });
  }
  return value;
}

/** The simulators' signing keys: kept under `dir` when given, fresh otherwise. */
export function simulatorKeys(dir: string | null): SimulatorKeys {
  const at = (name: string) => (dir ? path.join(dir, name) : null);
  const apnsKey = readOrCreate(at('apns-key.p8'), () =>
    generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  );
  const serviceAccount = JSON.parse(
    readOrCreate(at('fcm-service-account.json'), () => {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      return JSON.stringify({
        type: 'service_account',
        project_id: simulatedFcmProject,
        client_email: `herald@${simulatedFcmProject}.iam.gserviceaccount.com`,
        private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      });
    }),
  );
  const vapid = JSON.parse(readOrCreate(at('vapid.json'), () => JSON.stringify(generateVapidKeys())));
  return {
    apns: { key: apnsKey, ...simulatedApns, sandbox: false },
    fcm: { serviceAccount },
    webpush: { subject: 'mailto:demo@localhost.example', publicKey: vapid.publicKey, privateKey: vapid.privateKey },
  };
}

export async function startSimulators(options: {
  keysDir: string | null;
  host?: string;
  apnsPort?: number;
  fcmPort?: number;
  webPushPort?: number;
  latency?: Latency;
  record?: boolean;
}): Promise<Simulators> {
  const keys = simulatorKeys(options.keysDir);
  const common = { host: options.host, latency: options.latency, record: options.record };
  const apns = await startApnsSimulator({
    ...common,
    port: options.apnsPort ?? 0,
    teamId: keys.apns.teamId,
    keys: { [keys.apns.keyId]: createPublicKey(keys.apns.key).export({ type: 'spki', format: 'pem' }).toString() },
    bundleIds: [keys.apns.bundleId],
  });
  const fcm = await startFcmSimulator({ ...common, port: options.fcmPort ?? 0 });
  const webPush = await startWebPushSimulator({ ...common, port: options.webPushPort ?? 0 });
  return {
    apns,
    fcm,
    webPush,
    endpoints: {
      apns: apns.url,
      fcm: fcm.url,
      ca: `${apns.ca}\n${fcm.ca}\n${webPush.ca}`,
      // The simulator listens on this machine.
      webPushAllowPrivate: true,
      webPushSimulator: webPush.url,
    },
    keys,
    stop: async () => {
      await Promise.all([apns.stop(), fcm.stop(), webPush.stop()]);
    },
  };
}

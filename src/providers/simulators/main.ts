// Runs the simulators in a process of their own (demo, benchmark):
//   node src/providers/simulators/main.ts simulators.json
// The JSON file has an `apns` and/or an `fcm` section (the options of startApnsSimulator and
// startFcmSimulator; APNs `keys` may hold the .p8 private keys themselves) and an optional `caFile`
// where the certificates to trust are written (HERALD_PROVIDER_CA_FILE). One JSON line on stdout
// says where they listen; SIGINT/SIGTERM stop them.
import { readFileSync, writeFileSync } from 'node:fs';
import { createPublicKey } from 'node:crypto';
import { startApnsSimulator, type ApnsSimulatorOptions } from './apns-simulator.ts';
import { startFcmSimulator, type FcmSimulatorOptions } from './fcm-simulator.ts';

type Config = { apns?: ApnsSimulatorOptions; fcm?: FcmSimulatorOptions; caFile?: string };

const file = process.argv[2];
if (!file) {
  console.error('usage: node src/providers/simulators/main.ts <config.json>');
  process.exit(2);
}
const config = JSON.parse(readFileSync(file, 'utf8')) as Config;

// A private key yields its public half, so a demo can hand over the very .p8 it signs with.
const publicPem = (pem: string) => createPublicKey(pem).export({ type: 'spki', format: 'pem' }) as string;

const apns = config.apns
  ? await startApnsSimulator({
      ...config.apns,
      keys: Object.fromEntries(Object.entries(config.apns.keys).map(([keyId, pem]) => [keyId, publicPem(pem)])),
    })
  : undefined;
const fcm = config.fcm ? await startFcmSimulator(config.fcm) : undefined;

// Several PEM certificates in one file are all trusted (Node's `ca` and NODE_EXTRA_CA_CERTS).
if (config.caFile) writeFileSync(config.caFile, [apns?.ca, fcm?.ca].filter(Boolean).join(''));
console.log(JSON.stringify({ apns: apns && { url: apns.url, port: apns.port }, fcm: fcm && { url: fcm.url, port: fcm.port }, caFile: config.caFile }));

const stop = async () => {
  await Promise.all([apns?.stop(), fcm?.stop()]);
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());

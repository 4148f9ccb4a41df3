// `herald simulate`: the APNs, FCM and Web Push simulators alone, for workers started elsewhere.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { Config } from '../../service/config.ts';
import { port, type CommandIo } from './common.ts';

export function addSimulateCommand(program: Command, config: Config, { out }: CommandIo): void {
  program
    .command('simulate')
    .description(
      'run the local APNs, FCM and Web Push simulators only (for a worker started with HERALD_APNS_ENDPOINT/HERALD_FCM_ENDPOINT, ' +
        'and HERALD_WEBPUSH_HOSTS/HERALD_WEBPUSH_ALLOW_PRIVATE for web subscriptions)',
    )
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--apns-port <port>', 'APNs simulator port', port, 2197)
    .option('--fcm-port <port>', 'FCM simulator port', port, 2198)
    .option('--webpush-port <port>', 'Web Push simulator port', port, 2199)
    .option('--latency <ms>', 'answer each push after this many milliseconds', (value) => port(value), 0)
    .option('--no-record', 'keep counters only, not every push received (benchmarks)')
    .option('--ca-file <path>', 'write the simulators\' CA certificate here (HERALD_PROVIDER_CA_FILE)', path.join(config.dataDir, 'simulator', 'ca.pem'))
    .action(async (options: { host: string; apnsPort: number; fcmPort: number; webpushPort: number; latency: number; record: boolean; caFile: string }) => {
      const keysDir = path.join(config.dataDir, 'simulator');
      const { startSimulators } = await import('../simulate.ts');
      const simulators = await startSimulators({
        keysDir,
        host: options.host,
        apnsPort: options.apnsPort,
        fcmPort: options.fcmPort,
        webPushPort: options.webpushPort,
        latency: options.latency,
        record: options.record,
      });
      mkdirSync(path.dirname(options.caFile), { recursive: true });
      writeFileSync(options.caFile, simulators.endpoints.ca!);
      out(JSON.stringify({ apns: simulators.endpoints.apns, fcm: simulators.endpoints.fcm, webPush: simulators.webPush.url, caFile: options.caFile, keysDir }));
      const stop = async () => {
        await simulators.stop();
        process.exit(0);
      };
      process.on('SIGINT', () => void stop());
      process.on('SIGTERM', () => void stop());
    });
}

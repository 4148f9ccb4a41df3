// `herald credentials`: store an application's APNs, FCM and Web Push (VAPID) credentials, show
// them, and rotate the key they are encrypted with.
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { Option, type Command } from 'commander';
import type { Config } from '../../service/config.ts';
import { configuredEndpoints } from '../../service/endpoints.ts';
import {
  credentialHealth,
  credentialsKey,
  listCredentials,
  rotateCredentialsKey,
  setApnsCredentials,
  setFcmCredentials,
  setWebPushCredentials,
  type FcmCredentials,
  type Provider,
} from '../../domain/credentials.ts';
import { credentialsKeyForm, decodeCredentialsKey } from '../../domain/credentials-key.ts';
import type { Logger } from '../../logging/logger.ts';
import { requireApplication, requireCredentialsKey, withDatabase, type CommandIo } from './common.ts';

async function readAll(stdin: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.from(chunk as Buffer | string));
  return Buffer.concat(chunks).toString('utf8');
}

// A list of subcommand declarations, each short, kept in one place so that it reads like
// `herald credentials --help`.
export function addCredentialsCommands(program: Command, config: Config, logger: Logger, { out, stdin }: CommandIo): void {
  const credentials = program.command('credentials').description("manage an application's APNs, FCM and Web Push credentials");
  const keyFor = () => requireCredentialsKey(config, 'provider credentials');
  credentials
    .command('set-apns')
    .description('store APNs token-auth credentials (.p8 key) for an application')
    .requiredOption('--app <id>', 'application id')
    .requiredOption('--key-file <path>', 'the .p8 signing key downloaded from Apple')
    .requiredOption('--key-id <id>', 'the key id')
    .requiredOption('--team-id <id>', 'the Apple developer team id')
    .requiredOption('--bundle-id <id>', "the app's bundle id (the apns-topic)")
    .option('--sandbox', 'use the APNs sandbox (development builds)', false)
    .action(async (options: { app: string; keyFile: string; keyId: string; teamId: string; bundleId: string; sandbox: boolean }) => {
      const key = keyFor();
      const pem = readFileSync(options.keyFile, 'utf8');
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        const { keyId, teamId, bundleId, sandbox } = options;
        await setApnsCredentials(em, options.app, { key: pem, keyId, teamId, bundleId, sandbox }, key);
      });
      out(`Stored APNs credentials for application ${options.app}.`);
    });
  credentials
    .command('set-fcm')
    .description('store FCM credentials (a service account JSON file) for an application')
    .requiredOption('--app <id>', 'application id')
    .requiredOption('--service-account <path>', 'the service account key file from the Firebase console')
    .action(async (options: { app: string; serviceAccount: string }) => {
      const key = keyFor();
      let serviceAccount: FcmCredentials['serviceAccount'];
      try {
        serviceAccount = JSON.parse(readFileSync(options.serviceAccount, 'utf8'));
      } catch (error) {
        if (!(error instanceof SyntaxError)) throw error;
        throw new Error(`${options.serviceAccount} is not JSON (${error.message}): use the key file the Firebase console downloads.`, { cause: error });
      }
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        await setFcmCredentials(em, options.app, { serviceAccount }, key);
      });
      out(`Stored FCM credentials for application ${options.app}.`);
    });
  credentials
    .command('set-webpush')
    .description("store an application's VAPID key pair for Web Push: a new one, or the pair given")
    .requiredOption('--app <id>', 'application id')
    .requiredOption('--subject <subject>', 'mailto: address or https: URL a push service may contact about these pushes')
    .option('--public-key <key>', 'an existing pair\'s public key (base64url, as `web-push generate-vapid-keys` prints it)')
    .option('--private-key-file <path>', "a file holding that pair's private key (base64url)")
    .option('--force', 'replace the application\'s existing pair: every existing web subscription stops working', false)
    .action(async (options: { app: string; subject: string; publicKey?: string; privateKeyFile?: string; force: boolean }) => {
      if (Boolean(options.publicKey) !== Boolean(options.privateKeyFile)) {
        throw new Error('Give both --public-key and --private-key-file to store an existing pair, or neither to generate one.');
      }
      const key = keyFor();
      const keys = options.publicKey ? { publicKey: options.publicKey, privateKey: readFileSync(options.privateKeyFile!, 'utf8').trim() } : undefined;
      const stored = await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        return setWebPushCredentials(em, options.app, { subject: options.subject, keys, force: options.force }, key);
      });
      out(`Stored the Web Push (VAPID) key pair for application ${options.app}.`);
      out(`Public key (the applicationServerKey pages subscribe with): ${stored.publicKey}`);
      if (stored.replaced) {
        out('The previous pair was replaced: every existing web subscription stops working until its page subscribes again with the new public key.');
      }
    });
  credentials
    .command('show')
    .description("show an application's credentials, without their secrets")
    .requiredOption('--app <id>', 'application id')
    .action(async (options: { app: string }) => {
      const list = await withDatabase(config, logger, (em) => listCredentials(em, options.app));
      if (list.length === 0) out('No credentials: pushes to every platform are skipped (no_credentials).');
      for (const credential of list) {
        const settings = Object.entries(credential.settings).map(([name, value]) => `${name}=${value}`).join(' ');
        const { status, since, reason } = credentialHealth(credential);
        const health = {
          healthy: 'healthy',
          unverified: 'unverified: no provider has accepted them yet (herald credentials check asks now)',
          unhealthy: `UNHEALTHY since ${since?.toISOString()}: ${reason}`,
          unreachable: `provider UNREACHABLE since ${since?.toISOString()}`,
        }[status];
        out(`${credential.provider}  ${settings}  updated ${credential.updatedAt.toISOString()}  ${health}`);
      }
    });

  credentials
    .command('check')
    .description('ask the providers now whether they accept the credentials (APNs: a push to a made-up device token; FCM: a validate_only send), and record the answer')
    .requiredOption('--app <id>', 'application id')
    .addOption(new Option('--provider <provider>', 'only this provider').choices(['apns', 'fcm']))
    .action(async (options: { app: string; provider?: Provider }) => {
      const key = keyFor();
      const { checkCredentials } = await import('../../worker/credential-check.ts');
      const checks = await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        return checkCredentials(em, { applicationId: options.app, only: options.provider, key, endpoints: configuredEndpoints(config), logger });
      });
      if (checks.length === 0) {
        // Push services offer no dry run: web credentials are judged by their pushes' answers alone.
        throw new Error(`Application ${options.app} has no ${options.provider ?? 'apns or fcm'} credentials to check (web credentials have no check: their health follows their pushes).`);
      }
      for (const { provider, verdict } of checks) {
        const setCommand = provider === 'apns' ? 'set-apns' : 'set-fcm';
        out(
          verdict.kind === 'accepted'
            ? `${provider}  accepted: the provider took the credentials (it answered ${verdict.answer} to a push no device receives)`
            : verdict.kind === 'refused'
              ? `${provider}  REFUSED: ${verdict.reason}; pushes fail until the credentials are stored again (herald credentials ${setCommand})`
              : `${provider}  provider UNREACHABLE: ${verdict.reason}; nothing was learned about the credentials`,
        );
      }
      const failed = checks.filter((check) => check.verdict.kind !== 'accepted').length;
      if (failed > 0) throw new Error(`${failed} of ${checks.length} credential(s) were not accepted.`);
    });

  credentials
    .command('rotate-key')
    .description('re-encrypt every stored credential and webhook signing secret under a new key, in one transaction (the current key is HERALD_CREDENTIALS_KEY)')
    .option('--new-key-file <path>', 'a file holding the new key (`openssl rand -base64 32 > new.key`)')
    .option('--new-key-stdin', 'read the new key from standard input')
    .action(async (options: { newKeyFile?: string; newKeyStdin?: boolean }) => {
      if (Boolean(options.newKeyFile) === Boolean(options.newKeyStdin)) {
        throw new Error('Give the new key with either --new-key-file PATH or --new-key-stdin.');
      }
      // Not the zero-config key file: the operator names the key being replaced.
      const currentKey = credentialsKey(config.HERALD_CREDENTIALS_KEY);
      if (!currentKey) throw new Error('HERALD_CREDENTIALS_KEY is not set: set it to the key the credentials are stored with.');
      const given = options.newKeyFile ? readFileSync(options.newKeyFile, 'utf8') : await readAll(stdin);
      // Only the line end that `openssl rand -base64 32 > file` or `echo` adds is forgiven.
      const newKey = decodeCredentialsKey(given.replace(/\r?\n$/, ''));
      if (!newKey) throw new Error(`The new key must be ${credentialsKeyForm}; nothing was re-encrypted.`);
      const rotated = await withDatabase(config, logger, (em) => rotateCredentialsKey(em, currentKey, newKey));
      out(`Re-encrypted ${rotated.credentials} stored credential(s) with the new key.`);
      if (rotated.webhookSecrets > 0) out(`Re-encrypted ${rotated.webhookSecrets} webhook signing secret(s) with the new key.`);
      out(
        'Now set HERALD_CREDENTIALS_KEY to the new key wherever it is set (every worker, and this CLI) and restart the ' +
          'workers: until they restart they cannot open any credential they have not opened already.',
      );
    });
}

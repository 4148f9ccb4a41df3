// The `herald` command: run the service, and administer applications and tokens.
import { Command, InvalidArgumentError } from 'commander';
import { loadConfig, type Config } from '../config.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  createApplication,
  createToken,
  findApplication,
  listApplications,
  listTokens,
  revokeToken,
} from '../domain/applications.ts';
import { abilities, allAbilities, clientAbilities, isAbility } from '../domain/tokens.ts';
import { createLogger, type Logger } from '../logger.ts';
import { openDatabase, startService } from '../service.ts';
import { ensureDemoApplication } from './demo.ts';

const out = (line = '') => process.stdout.write(`${line}\n`);

function abilityList(value: string): string[] {
  const list = value.split(/[\s,]+/).filter(Boolean);
  const unknown = list.filter((ability) => !isAbility(ability));
  if (unknown.length > 0 || list.length === 0) {
    throw new InvalidArgumentError(`expected some of: ${[allAbilities, ...abilities].join(', ')}`);
  }
  return list;
}

function port(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65535) throw new InvalidArgumentError('not a port');
  return parsed;
}

/** Runs an admin command against the database, then closes everything it opened. */
async function withDatabase<T>(config: Config, logger: Logger, work: (em: EntityManager) => Promise<T>): Promise<T> {
  const database = await openDatabase(config, logger, { ownEmbedded: false });
  try {
    return await work(database.orm.em.fork());
  } finally {
    await database.close();
  }
}

async function run(config: Config, logger: Logger, roles: { api: boolean; worker: boolean }, demo: boolean) {
  const service = await startService(config, logger, roles);
  if (demo) await ensureDemoApplication(service.database.orm.em.fork(), config, out);
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    try {
      await service.stop();
      process.exit(0);
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

export function buildProgram(config: Config, logger: Logger, adminLogger: Logger): Command {
  const program = new Command('herald')
    .description('Herald: self-hosted push notifications for iOS (APNs) and Android (FCM).')
    .showHelpAfterError();

  program
    .command('start')
    .description('run the API and the workers in one process; with no DATABASE_URL, an embedded Postgres')
    .option('-p, --port <port>', 'HTTP port (default: PORT or 3000)', port)
    .action(async (options: { port?: number }) => {
      const effective = options.port === undefined ? config : { ...config, PORT: options.port };
      await run(effective, logger, { api: true, worker: true }, true);
    });

  program
    .command('serve')
    .description('run the HTTP API only')
    .option('-p, --port <port>', 'HTTP port (default: PORT or 3000)', port)
    .action(async (options: { port?: number }) => {
      const effective = options.port === undefined ? config : { ...config, PORT: options.port };
      await run(effective, logger, { api: true, worker: false }, false);
    });

  program
    .command('work')
    .description('run the fanout workers only')
    .action(async () => run(config, logger, { api: false, worker: true }, false));

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
        if (!(await findApplication(em, options.app))) throw new Error(`No application ${options.app}.`);
        return createToken(em, { applicationId: options.app, name: options.name, abilities: options.abilities });
      });
      out(`Created token ${created.token.id} (${created.token.abilities.join(' ')})`);
      out(created.plaintext);
    });
  tokens
    .command('list')
    .description('list tokens (never their secrets)')
    .option('--app <id>', 'only this application')
    .action(async (options: { app?: string }) => {
      const list = await withDatabase(config, adminLogger, (em) => listTokens(em, options.app));
      for (const token of list) {
        const state = token.revokedAt ? `revoked ${token.revokedAt.toISOString()}` : 'active';
        out(`${token.id}  app ${token.applicationId}  ${state}  ${token.name}  [${token.abilities.join(' ')}]`);
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
    process.stderr.write(`herald: ${(error as Error).message}\n`);
    logger.debug({ err: error }, 'command failed');
    process.exit(1);
  }
}


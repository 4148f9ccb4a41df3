// `herald stats hourly`: what GET /api/v1/stats/hourly answers, for an operator at the database,
// with the API's range rules.
import type { Command } from 'commander';
import type { Config } from '../../service/config.ts';
import { validationMessage } from '../../domain/errors.ts';
import { hourlyStatistics } from '../../domain/hourly-statistics.ts';
import type { Logger } from '../../logging/logger.ts';
import { requireApplication, withDatabase, type CommandIo } from './common.ts';

export function addStatsCommands(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
  const stats = program.command('stats').description("an application's sends and their outcomes");
  stats
    .command('hourly')
    .description('sends, accepted, failed, skipped and opens per UTC hour, as GET /api/v1/stats/hourly answers them (at most 31 days)')
    .requiredOption('--app <id>', 'application id')
    .option('--from <date-time>', 'RFC 3339, e.g. 2026-12-01T00:00:00Z (default: 24 hours before --to)')
    .option('--to <date-time>', 'RFC 3339, exclusive (default: now)')
    .action(async (options: { app: string; from?: string; to?: string }) => {
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        let hours;
        try {
          hours = await hourlyStatistics(em, options.app, { from: options.from, to: options.to });
        } catch (error) {
          const errors = (error as { errors?: Record<string, string[]> }).errors;
          if (errors) throw new Error(validationMessage(errors), { cause: error });
          throw error;
        }
        const columns = ['sends', 'accepted', 'failed', 'skipped', 'opens'] as const;
        out(['hour (UTC)'.padEnd(20), ...columns.map((column) => column.padStart(9))].join(' '));
        for (const hour of hours.data) {
          out([hour.hour.slice(0, 16).replace('T', ' ').padEnd(20), ...columns.map((column) => String(hour[column]).padStart(9))].join(' '));
        }
      });
    });
}

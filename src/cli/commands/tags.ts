// `herald tags`: what GET /api/v1/tags answers, for an operator at the database: the tag summary
// the API serves, computed now when there is none yet (or with --refresh).
import type { Command } from 'commander';
import type { Config } from '../../service/config.ts';
import { refreshTagSummary, tagSummarySettings, tagSummaryView } from '../../domain/tag-summaries.ts';
import { findTagSummary } from '../../db/sql/tags.ts';
import type { Logger } from '../../logging/logger.ts';
import { requireApplication, withDatabase, type CommandIo } from './common.ts';

export function addTagsCommand(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
  program
    .command('tags')
    .description("list an application's tag keys (most used first) with their most common values, as GET /api/v1/tags answers them")
    .requiredOption('--app <id>', 'application id')
    .option('--refresh', 'compute the summary now instead of showing the stored one')
    .action(async (options: { app: string; refresh?: boolean }) => {
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        const stored = options.refresh ? undefined : await findTagSummary(em, options.app);
        // An operator waits for it whatever the application's size (a worker's bound, not the API's).
        const summary = stored?.refreshedAt ? stored : await refreshTagSummary(em, options.app, tagSummarySettings.statementSeconds);
        const view = tagSummaryView(summary);
        if (view.data.length === 0) out('No tags.');
        for (const key of view.data) {
          out(`${key.key}  ${key.installations} installations: ${key.values.map((value) => `${value.value} ${value.installations}`).join(', ')}`);
        }
        out(`(computed ${view.refreshed_at})`);
      });
    });
}

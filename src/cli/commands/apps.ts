// `herald apps`: create and list applications, set their send rate limits and the origins whose
// pages may call them from a browser.
import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../../service/config.ts';
import { createApplication, listApplications, setAllowedOrigins } from '../../domain/applications.ts';
import { setSendPolicy } from '../../domain/rate-limits.ts';

import type { Logger } from '../../logging/logger.ts';
import { requireApplication, withDatabase, type CommandIo } from './common.ts';

function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new InvalidArgumentError('expected a positive integer');
  return parsed;
}

export function addAppsCommands(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
  const apps = program.command('apps').description('manage applications');
  apps
    .command('create')
    .description('create an application')
    .requiredOption('--name <name>', 'a name to recognise it by')
    .action(async (options: { name: string }) => {
      const application = await withDatabase(config, logger, (em) => createApplication(em, options.name));
      out(`Created application ${application.id} (${application.name})`);
    });
  apps
    .command('list')
    .description('list applications')
    .action(async () => {
      const list = await withDatabase(config, logger, listApplications);
      for (const application of list) out(`${application.id}  ${application.createdAt.toISOString()}  ${application.name}`);
    });

  apps
    .command('set')
    .description("set an application's allowed origins: the sites whose pages may register installations and report events with its app token (CORS)")
    .requiredOption('--app <id>', 'application id')
    .requiredOption('--allowed-origins <origins>', "comma-separated origins, e.g. https://shop.example,https://www.shop.example ('' for none)")
    .action(async (options: { app: string; allowedOrigins: string }) => {
      const origins = await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        return setAllowedOrigins(em, options.app, options.allowedOrigins.split(','));
      });
      out(
        origins.length > 0
          ? `Pages of ${origins.join(', ')} may call application ${options.app} from a browser with its app token.`
          : `No page may call application ${options.app} from a browser.`,
      );
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
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        await setSendPolicy(em, options.app, policy);
      });
      out(
        policy
          ? `Application ${options.app} may send ${policy.quota} notifications per ${policy.windowSeconds} s.`
          : `Application ${options.app} uses the default send rate limit.`,
      );
    });
}

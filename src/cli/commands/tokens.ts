// `herald tokens`: create, list and revoke API tokens.
import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../../service/config.ts';
import { createToken, listTokens, revokeToken } from '../../domain/applications.ts';
import { abilities, allAbilities, clientAbilities, isAbility } from '../../domain/tokens.ts';
import type { Logger } from '../../logging/logger.ts';
import { requireApplication, withDatabase, type CommandIo } from './common.ts';

function abilityList(value: string): string[] {
  const list = value.split(/[\s,]+/).filter(Boolean);
  const unknown = list.filter((ability) => !isAbility(ability));
  if (unknown.length > 0 || list.length === 0) {
    throw new InvalidArgumentError(`expected some of: ${[allAbilities, ...abilities].join(', ')}`);
  }
  return list;
}

export function addTokensCommands(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
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
      const created = await withDatabase(config, logger, async (em) => {
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
      const list = await withDatabase(config, logger, (em) => listTokens(em, options.app));
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
    .description('revoke a token; it stops working within 5 seconds')
    .argument('<id>', 'token id')
    .action(async (id: string) => {
      const revoked = await withDatabase(config, logger, (em) => revokeToken(em, id));
      if (!revoked) throw new Error(`No token ${id}.`);
      out(`Revoked token ${id}.`);
    });
}

// `herald segments`: an application's saved audiences, with their sizes, as the API keeps them
// (PUT/GET/DELETE /api/v1/segments, POST /api/v1/audiences/count). An audience is given as the
// JSON the API takes, checked against the document's `Audience` schema and its rules.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { InvalidArgumentError, type Command } from 'commander';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../service/config.ts';
import type { Audience } from '../../domain/audiences.ts';
import { validationMessage } from '../../domain/errors.ts';
import { countAudienceOf, deleteSegment, findSegment, listSegments, saveSegment } from '../../domain/segments.ts';
import { loadDocument } from '../../http/document.ts';
import type { Logger } from '../../logging/logger.ts';
import { requireApplication, withDatabase, type CommandIo } from './common.ts';

let validateAudience: ((value: unknown) => boolean) & { errors?: { instancePath: string; message?: string }[] | null };

/** The audience the JSON text states, or an error that says what is wrong with it. */
function audienceArgument(text: string): Audience {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidArgumentError('not JSON: give an audience such as \'{"platforms":["android"]}\' or \'{"all":true}\'');
  }
  validateAudience ??= new Ajv2020({ strict: false, allErrors: true })
    .addSchema({ ...loadDocument(), $id: 'openapi' })
    .getSchema('openapi#/components/schemas/Audience')!;
  if (!validateAudience(value)) {
    const problems = (validateAudience.errors ?? []).map((error) => `${error.instancePath || 'audience'} ${error.message ?? ''}`.trim());
    throw new InvalidArgumentError(`not an audience: ${problems.join('; ')}`);
  }
  return value as Audience;
}

/** A domain 422 (an empty audience, an operand an operator does not take) as the command's error. */
async function plainly<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    const errors = (error as { errors?: Record<string, string[]> }).errors;
    if (errors) throw new Error(validationMessage(errors), { cause: error });
    throw error;
  }
}

const size = async (em: EntityManager, app: string, segment: string) => {
  const { installations, users } = await countAudienceOf(em, app, { segment });
  return `${installations} installations, ${users} users`;
};

export function addSegmentsCommands(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
  const segments = program.command('segments').description("manage an application's segments (saved audiences) and see their sizes");
  segments
    .command('list')
    .description('list the segments, by name, each with its size now (installations a visible push would reach, and their users)')
    .requiredOption('--app <id>', 'application id')
    .action(async (options: { app: string }) => {
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        const found = await listSegments(em, options.app);
        if (found.length === 0) out('No segments.');
        for (const segment of found) out(`${segment.name}  ${await size(em, options.app, segment.name)}  ${JSON.stringify(segment.audience)}`);
      });
    });
  segments
    .command('set')
    .description('create a segment, or replace its audience')
    .requiredOption('--app <id>', 'application id')
    .argument('<name>', 'the segment name (letters, digits, _ . : -; at most 64)')
    .argument('<audience>', 'the audience as JSON, e.g. \'{"platforms":["android"],"tags":[{"key":"plan","op":"eq","value":"pro"}]}\'', audienceArgument)
    .action(async (name: string, audience: Audience, options: { app: string }) => {
      if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(name)) throw new Error('The segment name may hold letters, digits, _ . : and -, at most 64 of them.');
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        const { created } = await plainly(saveSegment(em, options.app, name, audience));
        out(`${created ? 'Created' : 'Replaced'} segment ${name}: ${await size(em, options.app, name)}.`);
      });
    });
  segments
    .command('show')
    .description('show a segment: its audience and its size now')
    .requiredOption('--app <id>', 'application id')
    .argument('<name>', 'the segment name')
    .action(async (name: string, options: { app: string }) => {
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        const segment = await findSegment(em, options.app, name).catch(() => {
          throw new Error(`No segment ${name}.`);
        });
        out(`${segment.name}  ${await size(em, options.app, name)}`);
        out(JSON.stringify(segment.audience, null, 2));
      });
    });
  segments
    .command('count')
    .description('the size of an audience now, without saving it')
    .requiredOption('--app <id>', 'application id')
    .argument('<audience>', 'the audience as JSON', audienceArgument)
    .action(async (audience: Audience, options: { app: string }) => {
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        const { installations, users } = await plainly(countAudienceOf(em, options.app, { audience }));
        out(`${installations} installations, ${users} users`);
      });
    });
  segments
    .command('delete')
    .description('delete a segment; notifications already sent to it keep its audience')
    .requiredOption('--app <id>', 'application id')
    .argument('<name>', 'the segment name')
    .action(async (name: string, options: { app: string }) => {
      await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        await deleteSegment(em, options.app, name).catch(() => {
          throw new Error(`No segment ${name}.`);
        });
      });
      out(`Deleted segment ${name}.`);
    });
}

// `herald webhooks`: an application's webhook endpoints (add, list, remove, rotate-secret, enable)
// and their delivery log.
import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../../service/config.ts';
import { webhookEventTypes, type WebhookEndpoint } from '../../db/entities.ts';
import {
  addWebhookEndpoint,
  defaultPreviousSecretHours,
  enableWebhookEndpoint,
  findWebhookEndpoint,
  isWebhookEventType,
  listWebhookDeliveries,
  listWebhookEndpoints,
  maxPreviousSecretHours,
  removeWebhookEndpoint,
  rotateWebhookSecret,
  webhookEndpointView,
  type WebhookDeliveryState,
} from '../../domain/webhooks.ts';
import { webhookDeliveryStateValues } from '../../generated/api.ts';
import type { Logger } from '../../logging/logger.ts';
import { requireApplication, requireCredentialsKey, withDatabase, type CommandIo } from './common.ts';

function eventList(value: string): string[] {
  const list = value.split(/[\s,]+/).filter(Boolean);
  if (list.length === 0 || !list.every(isWebhookEventType)) throw new InvalidArgumentError(`expected some of: ${webhookEventTypes.join(', ')}`);
  return list;
}

function hours(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0 || parsed > maxPreviousSecretHours) {
    throw new InvalidArgumentError(`expected a number of hours from 0 to ${maxPreviousSecretHours}`);
  }
  return parsed;
}

function pageSize(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 100) throw new InvalidArgumentError('expected a whole number from 1 to 100');
  return parsed;
}

function deliveryState(value: string): WebhookDeliveryState {
  if (!(webhookDeliveryStateValues as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`expected one of: ${webhookDeliveryStateValues.join(', ')}`);
  }
  return value as WebhookDeliveryState;
}

/** One line: id, application, state, URL, events, then how its last attempt went. */
function describeEndpoint(endpoint: WebhookEndpoint): string {
  const view = webhookEndpointView(endpoint);
  const state = view.disabled_at ? `DISABLED since ${view.disabled_at}: ${view.disabled_reason}` : 'enabled';
  const last = view.last_attempt
    ? `last attempt ${view.last_attempt.outcome}${view.last_attempt.error ? ` (${view.last_attempt.error})` : view.last_attempt.status_code ? ` (HTTP ${view.last_attempt.status_code})` : ''} ` +
      `at ${view.last_attempt.at}, attempt ${view.last_attempt.attempt} of ${view.last_attempt.event_type} ${view.last_attempt.event_id}`
    : 'no attempt yet';
  const failing = view.failing_since && !view.disabled_at ? `  failing since ${view.failing_since}` : '';
  const previous = view.previous_secret_expires_at ? `  previous secret signs until ${view.previous_secret_expires_at}` : '';
  return `${view.id}  app ${endpoint.applicationId}  ${state}  ${view.url}  [${view.events.join(' ')}]  ${last}${failing}${previous}`;
}

// A list of subcommand declarations, each short, kept in one place so that it reads like
// `herald webhooks --help`.
export function addWebhooksCommands(program: Command, config: Config, logger: Logger, { out }: CommandIo): void {
  const webhooks = program.command('webhooks').description("manage an application's webhook endpoints and read their delivery log");
  const keyFor = () => requireCredentialsKey(config, 'webhook signing secrets');
  const noEndpoint = (id: string) => new Error(`No webhook endpoint ${id}.`);
  const requireEndpoint = async (em: Parameters<typeof findWebhookEndpoint>[0], id: string) => {
    const endpoint = await findWebhookEndpoint(em, id);
    if (!endpoint) throw noEndpoint(id);
    return endpoint;
  };

  webhooks
    .command('add')
    .description('add an endpoint Herald POSTs signed events to; its signing secret is shown once')
    .requiredOption('--app <id>', 'application id')
    .requiredOption('--url <url>', 'where to POST (https; a public address unless HERALD_WEBHOOK_ALLOW_PRIVATE=true)')
    .requiredOption('--events <list>', `comma-separated, some of: ${webhookEventTypes.join(', ')}`, eventList)
    .action(async (options: { app: string; url: string; events: string[] }) => {
      const key = keyFor();
      const { endpoint, secret } = await withDatabase(config, logger, async (em) => {
        await requireApplication(em, options.app);
        return addWebhookEndpoint(em, { applicationId: options.app, url: options.url, events: options.events }, key, {
          allowPrivate: config.HERALD_WEBHOOK_ALLOW_PRIVATE,
        });
      });
      out(`Created webhook endpoint ${endpoint.id} (${endpoint.url}: ${endpoint.events.join(' ')})`);
      out('Its signing secret, shown this once (verify the Herald-Signature header with it):');
      out(secret);
    });

  webhooks
    .command('list')
    .description('list endpoints (never their secrets): enabled or disabled and why, and how the last attempt went')
    .option('--app <id>', 'only this application')
    .action(async (options: { app?: string }) => {
      const list = await withDatabase(config, logger, (em) => listWebhookEndpoints(em, options.app));
      if (list.length === 0) out('No webhook endpoints.');
      for (const endpoint of list) out(describeEndpoint(endpoint));
    });

  webhooks
    .command('remove')
    .description('remove an endpoint and its delivery log; nothing more is sent to it')
    .argument('<id>', 'endpoint id')
    .action(async (id: string) => {
      const removed = await withDatabase(config, logger, (em) => removeWebhookEndpoint(em, id));
      if (!removed) throw noEndpoint(id);
      out(`Removed webhook endpoint ${id}.`);
    });

  webhooks
    .command('rotate-secret')
    .description('give an endpoint a new signing secret, shown once; the previous one keeps signing for a while')
    .argument('<id>', 'endpoint id')
    .option(
      '--keep-previous <hours>',
      `hours during which requests also carry a signature with the previous secret (0: stop at once; at most ${maxPreviousSecretHours})`,
      hours,
      defaultPreviousSecretHours,
    )
    .action(async (id: string, options: { keepPrevious: number }) => {
      const key = keyFor();
      const rotated = await withDatabase(config, logger, (em) => rotateWebhookSecret(em, id, key, options.keepPrevious));
      if (!rotated) throw noEndpoint(id);
      out(`New signing secret of webhook endpoint ${id}, shown this once:`);
      out(rotated.secret);
      out(
        rotated.previousSecretExpiresAt
          ? `Requests also carry a signature made with the previous secret until ${rotated.previousSecretExpiresAt.toISOString()}.`
          : 'The previous secret no longer signs anything.',
      );
    });

  webhooks
    .command('enable')
    .description('turn a disabled endpoint back on; events made from now on are sent to it')
    .argument('<id>', 'endpoint id')
    .action(async (id: string) => {
      const endpoint = await withDatabase(config, logger, (em) => enableWebhookEndpoint(em, id));
      if (!endpoint) throw noEndpoint(id);
      out(`Enabled webhook endpoint ${id}.`);
    });

  webhooks
    .command('deliveries')
    .description("an endpoint's delivery log, newest event first: state, attempts, the last answer or error")
    .argument('<id>', 'endpoint id')
    .option('--limit <n>', 'how many (1 to 100)', pageSize, 20)
    .option('--state <state>', `only these: ${webhookDeliveryStateValues.join(', ')}`, deliveryState)
    .action(async (id: string, options: { limit: number; state?: WebhookDeliveryState }) => {
      const { deliveries } = await withDatabase(config, logger, async (em) =>
        listWebhookDeliveries(em, await requireEndpoint(em, id), { limit: options.limit, state: options.state }),
      );
      if (deliveries.length === 0) out('No deliveries.');
      for (const delivery of deliveries) out(describeDelivery(delivery));
    });
}

/** One line of an endpoint's delivery log. */
function describeDelivery(delivery: Awaited<ReturnType<typeof listWebhookDeliveries>>['deliveries'][number]): string {
  const answer = delivery.error ?? (delivery.statusCode === null ? '' : `HTTP ${delivery.statusCode}`);
  const when = delivery.lastAttemptAt ? ` at ${delivery.lastAttemptAt.toISOString()}` : '';
  const next = delivery.nextAttemptAt ? `  next attempt ${delivery.nextAttemptAt.toISOString()}` : '';
  const reason = delivery.reason ? ` (${delivery.reason})` : '';
  const excerpt = delivery.responseExcerpt ? `  answer: ${JSON.stringify(delivery.responseExcerpt)}` : '';
  return (
    `${delivery.createdAt.toISOString()}  ${delivery.eventType}  ${delivery.eventId}  ${delivery.state}${reason}  ` +
    `attempts ${delivery.attempts}${answer ? `  last: ${answer}${when}` : ''}${next}${excerpt}`
  );
}

// The webhook job: send one endpoint's pending deliveries (a few requests at a time), record each
// round's answers, disable an endpoint that has failed for the whole retry window, and queue one
// retry job for what failed, after exponential backoff. At least once: a worker killed mid-job
// leaves its unrecorded deliveries pending, and the job's retry sends them again, same event id.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { PgBoss } from 'pg-boss';
import {
  endWebhookDeliveries,
  findWebhookTarget,
  pendingWebhookDeliveries,
  recordWebhookAttempts,
  type ClaimedWebhookDelivery,
  type WebhookAttemptResult,
  type WebhookTarget,
} from '../db/sql/webhooks.ts';
import type { WebhookAttempt } from '../db/entities.ts';
import { chunk } from '../domain/chunk.ts';
import type { WebhookJob } from '../domain/webhook-outbox.ts';
import { describeSeconds, signatureHeader, signingSecrets, webhookBody, webhookRetryDelaySeconds } from '../domain/webhooks.ts';
import type { Logger } from '../logging/logger.ts';
import { queues, webhookPlacement } from './queue.ts';
import type { WebhookAnswer, WebhookSender } from './webhook-sender.ts';

export type WebhookContext = {
  boss: PgBoss;
  sender: WebhookSender;
  logger: Logger;
  /** Opens the endpoints' signing secrets (HERALD_CREDENTIALS_KEY). */
  key: Buffer | null;
  /** The first retry's delay; each next one doubles, up to an hour. */
  retryBaseSeconds: number;
  /** How long an event is retried, and how long an endpoint may fail before it is disabled. */
  windowSeconds: number;
};

/** Requests in flight at once per job; each round's answers are recorded before the next round. */
export const requestsPerRound = 10;

export const userAgent = 'Herald-Webhooks/1.1';

export async function runWebhook(em: EntityManager, context: WebhookContext, job: WebhookJob): Promise<void> {
  const db = em.fork();
  const target = await findWebhookTarget(db, job.endpointId);
  // Removed: its deliveries went with it.
  if (!target) return;
  const pending = await pendingWebhookDeliveries(db, job.endpointId, job.deliveryIds);
  if (pending.length === 0) return;
  if (target.disabledAt) {
    await endWebhookDeliveries(db, pending.map((delivery) => delivery.deliveryId), 'endpoint_disabled');
    return;
  }
  if (!context.key) throw new Error('HERALD_CREDENTIALS_KEY is not set: webhook signing secrets cannot be opened.');
  const retry: string[] = [];
  let retryAt = 0;
  const rounds = chunk(pending, requestsPerRound);
  for (const [index, round] of rounds.entries()) {
    const results = await Promise.all(round.map((delivery) => attempt(context, target, delivery)));
    const { disabled } = await recordWebhookAttempts(db, target.id, {
      results,
      lastAttempt: lastAttemptOf(round, results),
      windowSeconds: context.windowSeconds,
      disabledReason: `Every delivery failed for ${describeSeconds(context.windowSeconds)}; the last: ${results[results.length - 1].error}.`,
    });
    const failed = results.filter((result) => result.state === 'pending');
    if (disabled) {
      const rest = [...failed.map((result) => result.deliveryId), ...retry, ...rounds.slice(index + 1).flat().map((d) => d.deliveryId)];
      await endWebhookDeliveries(db, rest, 'endpoint_disabled');
      context.logger.warn({ endpointId: target.id, applicationId: job.applicationId }, 'webhook endpoint disabled: every delivery failed for the retry window');
      return;
    }
    for (const result of failed) {
      retry.push(result.deliveryId);
      retryAt = Math.max(retryAt, result.nextAttemptAt!.getTime());
    }
  }
  if (retry.length > 0) {
    await context.boss.send(queues.webhook, { ...job, deliveryIds: retry } satisfies WebhookJob, {
      startAfter: new Date(retryAt),
      ...webhookPlacement(job.endpointId),
    });
  }
}

/** One request, and what it leaves: succeeded, failed for good (expired), or pending with its next time. */
async function attempt(context: WebhookContext, target: WebhookTarget, delivery: ClaimedWebhookDelivery): Promise<WebhookAttemptResult> {
  const body = webhookBody({ id: delivery.eventId, type: delivery.type, createdAt: delivery.createdAt, data: delivery.data });
  const attemptedAt = new Date();
  const answer: WebhookAnswer = await context.sender.post(target.url, body, {
    'Content-Type': 'application/json',
    'User-Agent': userAgent,
    'Herald-Signature': signatureHeader(signingSecrets(target, context.key!, attemptedAt), body, attemptedAt),
  });
  const outcome = { deliveryId: delivery.deliveryId, statusCode: answer.statusCode, error: answer.error, responseExcerpt: answer.excerpt, attemptedAt };
  if (answer.ok) return { ...outcome, state: 'succeeded', reason: null, nextAttemptAt: null };
  // Retried until the window ends: a backoff step that would pass its end is cut to a last attempt
  // at the end; an attempt made once it has ended is the last.
  const windowEnd = delivery.createdAt.getTime() + context.windowSeconds * 1000;
  const now = Date.now();
  if (now >= windowEnd) return { ...outcome, state: 'failed', reason: 'expired', nextAttemptAt: null };
  const next = Math.min(now + webhookRetryDelaySeconds(delivery.attempts + 1, context.retryBaseSeconds) * 1000, windowEnd);
  return { ...outcome, state: 'pending', reason: null, nextAttemptAt: new Date(next) };
}

/** The endpoint's `last_attempt`: the round's last request. */
function lastAttemptOf(round: ClaimedWebhookDelivery[], results: WebhookAttemptResult[]): WebhookAttempt {
  const index = results.length - 1;
  const result = results[index];
  return {
    at: result.attemptedAt.toISOString(),
    event_id: round[index].eventId,
    event_type: round[index].type,
    attempt: round[index].attempts + 1,
    outcome: result.state === 'succeeded' ? 'succeeded' : 'failed',
    status_code: result.statusCode,
    error: result.error,
  };
}

/** A webhook job that failed for good (its retries exhausted): its deliveries end failed. */
export async function failWebhook(em: EntityManager, job: WebhookJob): Promise<void> {
  await endWebhookDeliveries(em.fork(), job.deliveryIds, 'internal_error');
}

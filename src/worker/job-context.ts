// What the send's jobs (fanout-job.ts, jobs.ts, paced-sends.ts, broadcasts.ts) share: a deliver
// job's data and queue, and what every job runs with.
import type { PgBoss } from 'pg-boss';
import type { Platform } from '../domain/platforms.ts';
import type { WebhookOutbox } from '../domain/webhook-outbox.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderClients } from './clients.ts';
import { queues } from './queue.ts';

/**
 * Pushes to make on one platform for one application: pending deliveries of one notification, or
 * of many small ones fanned out together (a batch of scheduled sends), all in one lane.
 */
export type DeliverJob = {
  applicationId: string;
  platform: Platform;
  deliveryIds: string[];
  /** Pushes of a broadcast: in the campaign lane's queue (queues.campaignDeliver), and so are their retries. */
  campaign?: boolean;
};

/** The queue a deliver job and its retries wait in: the campaign lane's for a broadcast's pushes. */
export const deliverQueueOf = (job: Pick<DeliverJob, 'campaign'>): string => (job.campaign ? queues.campaignDeliver : queues.deliver);

export type JobContext = {
  boss: PgBoss;
  /** Where `delivery.failed`, `installation.invalidated` and `notification.completed` webhooks go. */
  webhooks: WebhookOutbox;
  clients: ProviderClients;
  logger: Logger;
  /** Pushes per deliver job: one provider round of sends. */
  batchSize: number;
  /** A batch's provider send that has not answered by then is given up as `provider timeout`. */
  sendDeadlineMs: number;
  /** Pushes sent per provider round trip, each round's outcomes recorded before the next is sent. */
  recordEvery: number;
  /**
   * The keys (waitingRetriesKey) of retry jobs this process has queued since it last resumed them:
   * a batch the provider accepts then resumes them, even when it is not a retry itself.
   */
  waitingRetries: Set<string>;
};

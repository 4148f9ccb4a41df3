// Cancelling a notification (API 1.1.0). What is promised: once the cancel answers, no push of the
// notification leaves. Two steps make that hold without waiting on a stream of pushes:
// 1. the status becomes `cancelled`, committed at once: a fanout not yet started never starts, and
//    every chunk of pushes about to be handed to a provider sees it and stops (holdUncancelled);
// 2. holding the notification's pushes (db/sql/notifications.ts lockPushes), which waits for the
//    chunks being pushed at that moment to record their outcomes, the deliveries still pending end
//    `skipped`, reason `cancelled`, and the notification ends, with its `notification.cancelled`
//    webhook.
// A crash between the two leaves a cancelled notification unfinished: the next of its jobs to run
// (its fanout, or a deliver batch) finishes step 2, and so does a repeated cancel.
import type { EntityManager } from '@mikro-orm/postgresql';
import { deferredWaveJobs } from '../db/sql/broadcasts.ts';
import { skipPendingAsCancelled } from '../db/sql/deliveries.ts';
import {
  completeNotification,
  lockPushes,
  markCancelled,
  type FinishedNotification,
  type NotificationRow,
} from '../db/sql/notifications.ts';
import { isStatementTimeout } from '../db/unavailable.ts';
import { conflict, notFound, unavailable } from './errors.ts';
import { isUuid } from './ids.ts';
import type { Logger } from '../logging/logger.ts';
import { deliveriesEnded } from '../observability/metrics.ts';
import { findNotification, reportNotificationEnd, type FanoutQueue } from './notifications.ts';
import { notificationCancelled, type WebhookOutbox } from './webhook-outbox.ts';

const endedMessage = (status: string) =>
  `The notification has already ended (${status}); only a queued or processing notification can be cancelled.`;

export type Cancelled = {
  notification: NotificationRow;
  /** Set when this cancel ended it (not a repeat): what its metrics and log line report. */
  ended?: FinishedNotification;
  /** Deliveries this cancel skipped, per platform. */
  skipped: { platform: string; count: number }[];
};

export async function cancelNotification(
  em: EntityManager,
  fanouts: FanoutQueue,
  webhooks: WebhookOutbox,
  applicationId: string,
  given: string,
): Promise<Cancelled> {
  const id = given.toLowerCase();
  if (!isUuid(id)) throw notFound();
  // A scheduled notification's deferred fanout, and a local-time broadcast's deferred waves, are
  // dropped with the status, in one transaction.
  const marked = await em.transactional(async (tx) => {
    const found = await markCancelled(tx, applicationId, id);
    if (found?.fanoutDeferred) await fanouts.dropScheduled(tx.getKysely(), id);
    if (found?.status === 'cancelled') await fanouts.dropDeferredWalks(tx.getKysely(), await deferredWaveJobs(tx, id));
    return found;
  });
  if (marked === undefined) throw notFound();
  if (marked.status !== 'cancelled') throw conflict(endedMessage(marked.status));
  const { ended, skipped } = await finishCancellation(em, webhooks, applicationId, id);
  return { notification: await findNotification(em, applicationId, id), ended, skipped };
}

/**
 * Step 2 of a cancel: run by the cancel itself, and by a job of the notification that finds it
 * cancelled (so a cancel cut short between its steps is finished by the next job). A no-op when
 * another caller finished it.
 */
export async function finishCancellation(em: EntityManager, webhooks: WebhookOutbox, applicationId: string, id: string): Promise<Omit<Cancelled, 'notification'>> {
  return em.transactional(async (tx) => {
    // The wait for the chunks being pushed is the caller's lock bound (db/bounds.ts; the API's
    // keeps a request within seconds): past it the cancel answers 503, and a repeat finds them done.
    await lockPushes(tx, id).catch((error: unknown) => {
      throw isStatementTimeout(error) ? unavailable(1) : error;
    });
    const skipped = await skipPendingAsCancelled(tx, id);
    const ended = await completeNotification(tx, id, 'cancelled');
    if (ended && (await webhooks.wants(tx, applicationId, 'notification.cancelled'))) {
      await webhooks.emit(tx, applicationId, [notificationCancelled(ended)]);
    }
    return { ended, skipped };
  });
}

/** What finishing a cancel moved, once committed: the skipped deliveries' metrics, and the notification's end (when this caller ended it). */
export function reportCancellation(logger: Logger, finished: Omit<Cancelled, 'notification'>): void {
  for (const { platform, count } of finished.skipped) deliveriesEnded(platform, [{ state: 'skipped', reason: 'cancelled', count }]);
  reportNotificationEnd(logger, finished.ended);
}

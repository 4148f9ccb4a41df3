import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import type { PipelinedPool } from '../../db/pipelined-pool.ts';
import {
  findNotification,
  listNotifications,
  notificationView,
  sendNotification,
  type FanoutQueue,
  type NotificationView,
} from '../../domain/notifications.ts';
import { cancelNotification, reportCancellation } from '../../domain/cancellation.ts';
import type { WebhookOutbox } from '../../domain/webhook-outbox.ts';
import { hourlyStatistics } from '../../domain/hourly-statistics.ts';
import { breakdownOf, deliveryView, listDeliveries, listUserDeliveries, userDeliveryView, type DeliveryView } from '../../domain/deliveries.ts';
import { principalOf } from '../auth.ts';
import { pageParameters } from '../page.ts';
import type { SendQuota } from '../rate-limit.ts';
import { notificationMoved, sendAnswered } from '../../observability/metrics.ts';

export const sendPath = '/api/v1/notifications';

export function notificationsRouter(orm: Orm, sends: PipelinedPool, fanouts: FanoutQueue, quota: SendQuota, webhooks: WebhookOutbox): Router {
  const router = Router();

  router.post(sendPath, async (req, res) => {
    const { applicationId, abilities } = principalOf(req);
    const { notification, accepted } = await sendNotification(orm.em, sends, fanouts, {
      applicationId,
      abilities,
      request: req.body,
      idempotencyKey: req.get('idempotency-key'),
      admit: () => quota.admit(req, res),
      refund: () => quota.refund(req, res),
    });
    sendAnswered(applicationId, accepted ? 'accepted' : 'replayed');
    if (accepted) notificationMoved('queued');
    // A replay took nothing from the quota, and says how much is left all the same.
    if (!res.hasHeader('RateLimit')) await quota.announce(req, res);
    res.status(202).json({ data: notificationView(notification), meta: { accepted } });
  });

  router.get('/api/v1/notifications', async (req, res) => {
    const { applicationId } = principalOf(req);
    const { notifications, nextCursor } = await listNotifications(orm.em, applicationId, {
      ...pageParameters(req),
      status: typeof req.query.status === 'string' ? (req.query.status as NotificationView['status']) : undefined,
    });
    res.json({ data: notifications.map((n) => notificationView(n)), meta: { next_cursor: nextCursor } });
  });

  router.get('/api/v1/notifications/:notificationId', async (req, res) => {
    const { applicationId } = principalOf(req);
    const notification = await findNotification(orm.em, applicationId, req.params.notificationId);
    res.json({ data: notificationView(notification) });
  });

  router.post('/api/v1/notifications/:notificationId/cancel', async (req, res) => {
    const { applicationId } = principalOf(req);
    const { notification, ...finished } = await cancelNotification(orm.em, fanouts, webhooks, applicationId, req.params.notificationId);
    reportCancellation(req.log, finished);
    res.json({ data: notificationView(notification) });
  });

  router.get('/api/v1/notifications/:notificationId/deliveries', async (req, res) => {
    const { applicationId } = principalOf(req);
    const { deliveries, nextCursor } = await listDeliveries(orm.em, applicationId, req.params.notificationId, {
      ...pageParameters(req),
      userId: typeof req.query.user_id === 'string' ? req.query.user_id : undefined,
      state: typeof req.query.state === 'string' ? (req.query.state as DeliveryView['state']) : undefined,
      platform: typeof req.query.platform === 'string' ? (req.query.platform as DeliveryView['platform']) : undefined,
      reason: typeof req.query.reason === 'string' ? req.query.reason : undefined,
    });
    res.json({ data: deliveries.map(deliveryView), meta: { next_cursor: nextCursor } });
  });

  router.get('/api/v1/deliveries', async (req, res) => {
    const { applicationId } = principalOf(req);
    // Required by the document: the validator has answered 422 when it is missing.
    const userId = req.query.user_id as string;
    const { deliveries, nextCursor } = await listUserDeliveries(orm.em, applicationId, { userId, ...pageParameters(req) });
    res.json({ data: deliveries.map(userDeliveryView), meta: { next_cursor: nextCursor } });
  });

  router.get('/api/v1/notifications/:notificationId/breakdown', async (req, res) => {
    const { applicationId } = principalOf(req);
    res.json({ data: await breakdownOf(orm.em, applicationId, req.params.notificationId) });
  });

  router.get('/api/v1/stats/hourly', async (req, res) => {
    const { applicationId } = principalOf(req);
    // Strings, or absent: the validator has answered 422 for anything else.
    const { from, to } = req.query as { from?: string; to?: string };
    res.json(await hourlyStatistics(orm.em, applicationId, { from, to }));
  });

  return router;
}

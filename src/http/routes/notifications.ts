import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import {
  findNotification,
  listNotifications,
  notificationViews,
  sendNotification,
  type EnqueueFanout,
} from '../../domain/notifications.ts';
import { deliveryView, listDeliveries, type DeliveryView } from '../../domain/deliveries.ts';
import { principalOf } from '../auth.ts';
import type { SendQuota } from '../rate-limit.ts';

const defaultPageSize = 25;

export const sendPath = '/api/v1/notifications';

export function notificationsRouter(orm: Orm, enqueueFanout: EnqueueFanout, quota: SendQuota): Router {
  const router = Router();

  router.post(sendPath, async (req, res) => {
    const { applicationId } = principalOf(req);
    const { notification, accepted } = await sendNotification(orm.em, enqueueFanout, {
      applicationId,
      request: req.body,
      idempotencyKey: req.get('idempotency-key'),
      admit: () => quota.admit(req, res),
      refund: () => quota.refund(req, res),
    });
    // A replay took nothing from the quota, and says how much is left all the same.
    if (!res.hasHeader('RateLimit')) await quota.announce(req, res);
    const [data] = await notificationViews(orm.em, [notification]);
    res.status(202).json({ data, meta: { accepted } });
  });

  router.get('/api/v1/notifications', async (req, res) => {
    const { applicationId } = principalOf(req);
    const { notifications, nextCursor } = await listNotifications(orm.em, applicationId, {
      limit: req.query.limit === undefined ? defaultPageSize : Number(req.query.limit),
      cursor: typeof req.query.cursor === 'string' ? req.query.cursor : undefined,
    });
    res.json({ data: await notificationViews(orm.em, notifications), meta: { next_cursor: nextCursor } });
  });

  router.get('/api/v1/notifications/:notificationId', async (req, res) => {
    const { applicationId } = principalOf(req);
    const notification = await findNotification(orm.em, applicationId, req.params.notificationId);
    const [data] = await notificationViews(orm.em, [notification]);
    res.json({ data });
  });

  router.get('/api/v1/notifications/:notificationId/deliveries', async (req, res) => {
    const { applicationId } = principalOf(req);
    const { deliveries, nextCursor } = await listDeliveries(orm.em, applicationId, req.params.notificationId, {
      limit: req.query.limit === undefined ? defaultPageSize : Number(req.query.limit),
      cursor: typeof req.query.cursor === 'string' ? req.query.cursor : undefined,
      userId: typeof req.query.user_id === 'string' ? req.query.user_id : undefined,
      state: typeof req.query.state === 'string' ? (req.query.state as DeliveryView['state']) : undefined,
    });
    res.json({ data: deliveries.map(deliveryView), meta: { next_cursor: nextCursor } });
  });

  return router;
}

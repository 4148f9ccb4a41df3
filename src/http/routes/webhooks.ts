import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import {
  endpointOf,
  listWebhookDeliveries,
  listWebhookEndpoints,
  webhookDeliveryView,
  webhookEndpointView,
  type WebhookDeliveryState,
} from '../../domain/webhooks.ts';
import { principalOf } from '../auth.ts';

const defaultPageSize = 25;

export function webhooksRouter(orm: Orm): Router {
  const router = Router();

  router.get('/api/v1/webhooks', async (req, res) => {
    const { applicationId } = principalOf(req);
    const endpoints = await listWebhookEndpoints(orm.em, applicationId);
    res.json({ data: endpoints.map(webhookEndpointView) });
  });

  router.get('/api/v1/webhooks/:webhookId/deliveries', async (req, res) => {
    const { applicationId } = principalOf(req);
    const endpoint = await endpointOf(orm.em, applicationId, req.params.webhookId);
    const { deliveries, nextCursor } = await listWebhookDeliveries(orm.em, endpoint, {
      limit: req.query.limit === undefined ? defaultPageSize : Number(req.query.limit),
      cursor: typeof req.query.cursor === 'string' ? req.query.cursor : undefined,
      state: typeof req.query.state === 'string' ? (req.query.state as WebhookDeliveryState) : undefined,
    });
    res.json({ data: deliveries.map(webhookDeliveryView), meta: { next_cursor: nextCursor } });
  });

  return router;
}

import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import { recordEvent } from '../../domain/events.ts';
import type { WebhookOutbox } from '../../domain/webhook-outbox.ts';
import { principalOf } from '../auth.ts';

export function eventsRouter(orm: Orm, webhooks: WebhookOutbox): Router {
  const router = Router();
  router.post('/api/v1/events', async (req, res) => {
    const { applicationId } = principalOf(req);
    const { event, created } = await recordEvent(orm.em, webhooks, applicationId, req.body);
    res.status(created ? 201 : 200).json({ data: event });
  });
  return router;
}

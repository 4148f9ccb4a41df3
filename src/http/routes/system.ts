import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import type { OutageWatch } from '../../db/outage.ts';
import { ping } from '../../db/sql/infrastructure.ts';

export function systemRouter(orm: Orm, document: object, outage: OutageWatch): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (req, res) => {
    try {
      await ping(orm.em);
      res.json({ status: 'ok' });
    } catch (error) {
      if (!outage.report(error)) req.log.warn({ err: error }, 'readiness check failed');
      res.status(503).json({ status: 'unavailable' });
    }
  });
  router.get('/openapi.json', (_req, res) => {
    res.json(document);
  });
  return router;
}

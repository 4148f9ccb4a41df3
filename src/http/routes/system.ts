import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import { ping } from '../../db/sql.ts';

export function systemRouter(orm: Orm, document: object): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (req, res) => {
    try {
      await ping(orm.em);
      res.json({ status: 'ok' });
    } catch (error) {
      req.log.warn({ err: error }, 'database unreachable');
      res.status(503).json({ status: 'unavailable' });
    }
  });
  router.get('/openapi.json', (_req, res) => {
    res.json(document);
  });
  return router;
}

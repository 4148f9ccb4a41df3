import { Router } from 'express';
import type { OutageWatch } from '../../db/outage.ts';

/** `readiness`: the database probe (db/outage.ts openDatabaseProbe), answered or failed within 2 s. */
export function systemRouter(readiness: () => Promise<void>, document: object, outage: OutageWatch): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (req, res) => {
    try {
      await readiness();
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

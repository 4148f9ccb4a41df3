import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import { describeApplication } from '../../domain/applications.ts';
import type { SendPolicy } from '../../domain/rate-limits.ts';
import { principalOf } from '../auth.ts';

export function applicationRouter(orm: Orm, defaultSendPolicy: SendPolicy): Router {
  const router = Router();
  router.get('/api/v1/app', async (req, res) => {
    res.json({ data: await describeApplication(orm.em, principalOf(req), defaultSendPolicy) });
  });
  return router;
}

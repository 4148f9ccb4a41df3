import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import {
  deleteInstallation,
  findInstallation,
  installationView,
  listUserInstallations,
  registerInstallation,
  updateInstallation,
} from '../../domain/installations.ts';
import type { EndpointRules } from '../../domain/web-push.ts';
import { principalOf } from '../auth.ts';
import { pageParameters } from '../page.ts';

export function installationsRouter(orm: Orm, endpointRules: EndpointRules): Router {
  const router = Router();
  const path = '/api/v1/installations/:installationId';

  router.get('/api/v1/installations', async (req, res) => {
    const { applicationId } = principalOf(req);
    // Required by the document: the validator has answered 422 when it is missing.
    const userId = req.query.user_id as string;
    const { installations, nextCursor } = await listUserInstallations(orm.em, applicationId, { userId, ...pageParameters(req) });
    res.json({ data: installations.map(installationView), meta: { next_cursor: nextCursor } });
  });

  router.put(path, async (req, res) => {
    const { installation, created } = await registerInstallation(orm.em, principalOf(req), req.params.installationId, req.body, endpointRules);
    res.status(created ? 201 : 200).json({ data: installationView(installation) });
  });

  router.patch(path, async (req, res) => {
    const installation = await updateInstallation(orm.em, principalOf(req), req.params.installationId, req.body);
    res.json({ data: installationView(installation) });
  });

  router.get(path, async (req, res) => {
    const { applicationId } = principalOf(req);
    const installation = await findInstallation(orm.em, applicationId, req.params.installationId);
    res.json({ data: installationView(installation) });
  });

  router.delete(path, async (req, res) => {
    const { applicationId } = principalOf(req);
    await deleteInstallation(orm.em, applicationId, req.params.installationId);
    res.status(204).end();
  });

  return router;
}

import { Router } from 'express';
import type { Orm } from '../../db/orm.ts';
import { countAudienceOf, deleteSegment, findSegment, listSegments, saveSegment, segmentView } from '../../domain/segments.ts';
import { readTagSummary, type TagSummaryQueue } from '../../domain/tag-summaries.ts';
import { principalOf } from '../auth.ts';

export function audiencesRouter(orm: Orm, tagSummaries: TagSummaryQueue): Router {
  const router = Router();
  const path = '/api/v1/segments/:name';

  router.get('/api/v1/segments', async (req, res) => {
    const { applicationId } = principalOf(req);
    res.json({ data: (await listSegments(orm.em, applicationId)).map(segmentView) });
  });

  router.put(path, async (req, res) => {
    const { applicationId } = principalOf(req);
    const { segment, created } = await saveSegment(orm.em, applicationId, req.params.name, req.body.audience);
    res.status(created ? 201 : 200).json({ data: segmentView(segment) });
  });

  router.get(path, async (req, res) => {
    const { applicationId } = principalOf(req);
    res.json({ data: segmentView(await findSegment(orm.em, applicationId, req.params.name)) });
  });

  router.delete(path, async (req, res) => {
    const { applicationId } = principalOf(req);
    await deleteSegment(orm.em, applicationId, req.params.name);
    res.status(204).end();
  });

  router.post('/api/v1/audiences/count', async (req, res) => {
    const { applicationId } = principalOf(req);
    res.json({ data: await countAudienceOf(orm.em, applicationId, req.body) });
  });

  router.get('/api/v1/tags', async (req, res) => {
    const { applicationId } = principalOf(req);
    res.json(await readTagSummary(orm.em, applicationId, tagSummaries));
  });

  return router;
}

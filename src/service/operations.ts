// A process's listener for its operators, apart from the API: Prometheus metrics
// (HERALD_METRICS_PORT) and, for a worker alone, its container health checks
// (HERALD_WORKER_HEALTH_PORT); when both are the same port, one listener answers both.
// Nothing here is reachable with an application token: the API's port never serves it.
import type { RequestListener } from 'node:http';
import type { OutageWatch } from '../db/outage.ts';
import { registry } from '../observability/metrics.ts';

export type Operations = {
  metrics: boolean;
  /** A worker's health: alive, and ready while its outage watch sees the database. */
  health: OutageWatch | null;
};

export function operationsListener({ metrics, health }: Operations): RequestListener {
  return (req, res) => {
    const path = req.url?.split('?')[0];
    const answer = (status: number, body: object) =>
      res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
    if (req.method !== 'GET') return answer(405, { status: 'method not allowed' });
    if (metrics && path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        () => answer(500, { status: 'metrics unavailable' }),
      );
      return;
    }
    if (health && path === '/healthz') return answer(200, { status: 'ok' });
    if (health && path === '/readyz') return health.down ? answer(503, { status: 'unavailable' }) : answer(200, { status: 'ok' });
    answer(404, { status: 'not found' });
  };
}

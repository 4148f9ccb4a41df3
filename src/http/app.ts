import { randomUUID } from 'node:crypto';
import { RequestContext } from '@mikro-orm/postgresql';
import { performance } from 'node:perf_hooks';
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import helmet from 'helmet';
import { pinoHttp } from 'pino-http';
import type { Orm } from '../db/orm.ts';
import type { OutageWatch } from '../db/outage.ts';
import type { PipelinedPool } from '../db/pipelined-pool.ts';
import type { FanoutQueue } from '../domain/notifications.ts';
import type { TagSummaryQueue } from '../domain/tag-summaries.ts';
import type { WebhookOutbox } from '../domain/webhook-outbox.ts';
import type { Logger } from '../logging/logger.ts';
import { httpRequest } from '../observability/metrics.ts';
import { applicationIdOf, authorize, routeOf } from './auth.ts';
import { readJsonBody } from './body.ts';
import { corsPreflight } from './cors.ts';
import { dashboardRouter } from './dashboard.ts';
import { docsRouter } from './docs.ts';
import { notFound } from '../domain/errors.ts';
import type { SendPolicy } from '../domain/rate-limits.ts';
import type { EndpointRules } from '../domain/web-push.ts';
import type { SendLimiter } from './send-limiter.ts';
import { errorHandler, lastResortHandler } from './errors.ts';
import { announceQuotaOnError, sendQuota } from './rate-limit.ts';
import { applicationRouter } from './routes/application.ts';
import { audiencesRouter } from './routes/audiences.ts';
import { eventsRouter } from './routes/events.ts';
import { installationsRouter } from './routes/installations.ts';
import { notificationsRouter, sendPath } from './routes/notifications.ts';
import { systemRouter } from './routes/system.ts';
import { webhooksRouter } from './routes/webhooks.ts';

export type AppOptions = {
  orm: Orm;
  /** Where sends run their transaction (db/pipelined-pool.ts). */
  sends: PipelinedPool;
  fanouts: FanoutQueue;
  /** Where GET /api/v1/tags asks a worker for an application's first tag summary (domain/tag-summaries.ts). */
  tagSummaries: TagSummaryQueue;
  /** Where an accepted event's `event.reported` webhook goes (domain/webhook-outbox.ts). */
  webhooks: WebhookOutbox;
  logger: Logger;
  document: Record<string, unknown>;
  bodyLimit: string;
  validateResponses: boolean;
  sendLimiter: SendLimiter;
  /** Logs a database outage once, however many requests it refuses (db/outage.ts). */
  outage: OutageWatch;
  /** GET /readyz: the database probe (db/outage.ts openDatabaseProbe). */
  readiness: () => Promise<void>;
  defaultSendPolicy: SendPolicy;
  /** How long a token read is trusted (domain/applications.ts tokenCacheMs); 0: never. */
  tokenCacheMs: number;
  /** Where the built dashboard is (default: dist/dashboard/ of this checkout). */
  dashboardDir?: string;
  /** Which Web Push endpoints an installation may register (default: the known push services, public addresses). */
  webPushEndpoints?: EndpointRules;
};

const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;

function requestId(req: Request): string {
  const given = req.get('x-request-id');
  return given && requestIdPattern.test(given) ? given : randomUUID();
}

/** Every answer, by the document's route, into the request histogram (the metrics port serves it). */
function measure(): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    res.once('finish', () => httpRequest(routeOf(res), req.method, res.statusCode, (performance.now() - started) / 1000));
    next();
  };
}

/**
 * A 503 is the database out of reach, which the outage watch reports once, not an error of each
 * request it refuses; any other 5xx is a bug.
 */
function requestLevel(status: number, error: unknown): 'error' | 'warn' | 'info' {
  if (status === 503 && !error) return 'warn';
  return error || status >= 500 ? 'error' : 'info';
}

/** A request's log line: what an operator searches by, never its headers or body. */
function requestLine(req: Request, res: Response, durationMs: number) {
  return {
    method: req.method,
    route: routeOf(res),
    status: res.statusCode,
    durationMs,
    applicationId: applicationIdOf(res),
  };
}

export function createApp(options: AppOptions): Express {
  const { orm, logger, document } = options;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  // A path is served only as the document writes it: `/API/v1/...` or a trailing slash is a 404.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  app.use(helmet());
  app.use(measure());
  app.use(
    pinoHttp({
      logger,
      genReqId: (req, res) => {
        const id = requestId(req as Request);
        res.setHeader('X-Request-Id', id);
        return id;
      },
      // One line per request (requestLine), and every line a handler logs, carry the request id
      // alone: no request or response object, so no header ever reaches a log.
      quietReqLogger: true,
      quietResLogger: true,
      // pino-http still makes a child logger bound to the request on every request, even when it is
      // quiet and never logs through it; its serializer (the URL, the headers, the socket) would run
      // through the redaction on every request for nothing. No line carries a request.
      wrapSerializers: false,
      serializers: { req: () => undefined },
      customAttributeKeys: { reqId: 'requestId' },
      customLogLevel: (_req, res, error) => requestLevel(res.statusCode, error),
      customSuccessObject: (req, res, { responseTime }) => requestLine(req as Request, res as Response, responseTime),
      // A 503's cause is the outage watch's line; pino-http's stand-in error would only add its own stack.
      customErrorObject: (req, res, error, { responseTime }) => ({
        ...requestLine(req as Request, res as Response, responseTime),
        ...(res.statusCode === 503 ? {} : { err: error }),
      }),
    }),
  );
  // The API reference: a page for people, outside the document (http/docs.ts).
  app.use(docsRouter());
  // The dashboard's page and bundle: static, outside the API's document and before its checks.
  app.use(dashboardRouter(options.dashboardDir));
  // A page's preflight, before the checks of a request: it carries no token (http/cors.ts).
  app.use(corsPreflight(orm, options.tokenCacheMs));
  // One unit of work per request: handlers and the domain use orm.em, which is this request's fork.
  app.use((_req, _res, next) => RequestContext.create(orm.em, next));
  // The order of checks: the operation and the token from the headers (404/405, 401/403), then the
  // body (400/413/415, depth and text), then the schema (422), then the handler's rules.
  app.use(authorize(orm, document, options.tokenCacheMs));
  app.use(readJsonBody(options.bodyLimit));
  app.use(
    OpenApiValidator.middleware({
      // The validator rewrites the document it is given; the served copy stays pristine.
      apiSpec: structuredClone(document) as never,
      validateRequests: { allowUnknownQueryParameters: false, allErrors: true },
      validateResponses: options.validateResponses ? { removeAdditional: false } : false,
      // Authorization already happened in authorize(), before the body was read.
      validateSecurity: false,
      validateFormats: true,
      ajvFormats: { mode: 'full' },
      ignoreUndocumented: false,
    }),
  );
  app.use(systemRouter(options.readiness, document, options.outage));
  app.use(installationsRouter(orm, options.webPushEndpoints ?? { extraHosts: [], allowPrivate: false }));
  const quota = sendQuota(options.sendLimiter, options.defaultSendPolicy);
  app.use(notificationsRouter(orm, options.sends, options.fanouts, quota, options.webhooks));
  app.use(eventsRouter(orm, options.webhooks));
  app.use(applicationRouter(orm, options.defaultSendPolicy));
  app.use(webhooksRouter(orm));
  app.use(audiencesRouter(orm, options.tagSummaries));
  // A documented path without a handler (never in a release) still answers in the error body.
  app.use((_req, _res, next) => next(notFound()));
  app.use(announceQuotaOnError(quota, sendPath));
  app.use(errorHandler(options.outage));
  app.use(lastResortHandler);
  return app;
}

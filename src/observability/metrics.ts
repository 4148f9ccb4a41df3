// Every Prometheus metric of a Herald process, in one registry that its metrics port serves
// (HERALD_METRICS_PORT). The HTTP layer, the send quota, the worker's jobs and the service
// composition report what happened through the functions below; nothing else touches prom-client.
// A process counts only its own work: Prometheus scrapes each process and sums.
//
// Labels are bounded: a route is the document's path template (never the raw URL), a delivery
// reason is one of a known set (anything else is `other`), an application is an id (applications
// are few: one per app a deployment serves). The fanout reports counts per batch, never per push.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();

/** Seconds, for one HTTP request or one provider round trip: 5 ms to 10 s. */
const requestBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const http = new Histogram({
  name: 'herald_http_request_duration_seconds',
  help: 'API requests by route (the document path template; "unmatched" for any other path), method and status',
  labelNames: ['route', 'method', 'status'] as const,
  buckets: requestBuckets,
  registers: [registry],
});

const sends = new Counter({
  name: 'herald_sends_total',
  help: 'Send requests past authentication and validation, by application and result: accepted (a new notification), replayed (an Idempotency-Key seen before), rate_limited (429)',
  labelNames: ['application', 'result'] as const,
  registers: [registry],
});

const authFailures = new Counter({
  name: 'herald_auth_failures_total',
  help: 'Requests refused by authentication (401: missing_token, invalid_token) or authorization (403: insufficient_scope)',
  labelNames: ['status', 'reason'] as const,
  registers: [registry],
});

const deliveries = new Counter({
  name: 'herald_deliveries_total',
  help: 'Deliveries that reached their outcome, by platform, outcome (accepted, failed, skipped, expired) and reason (empty when accepted; "other" outside the known set)',
  labelNames: ['platform', 'outcome', 'reason'] as const,
  registers: [registry],
});

const retries = new Counter({
  name: 'herald_delivery_retries_total',
  help: 'Pushes the provider did not take for a transient reason (429, 5xx, unreachable, timeout), scheduled again, by platform and reason',
  labelNames: ['platform', 'reason'] as const,
  registers: [registry],
});

const providerRequests = new Histogram({
  name: 'herald_provider_request_duration_seconds',
  help: 'One round trip of a chunk of pushes (HERALD_DELIVER_CHUNK_SIZE) to APNs, FCM or Web Push, by platform; a send past HERALD_PROVIDER_DEADLINE_SECONDS is observed at the deadline',
  labelNames: ['platform'] as const,
  buckets: requestBuckets,
  registers: [registry],
});

const jobWait = new Histogram({
  name: 'herald_job_wait_seconds',
  help: 'How long a job waited between becoming due (created, or its retry time) and a worker starting it, by queue',
  labelNames: ['queue'] as const,
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
  registers: [registry],
});

const notifications = new Counter({
  name: 'herald_notifications_total',
  help: 'Notification status transitions: queued (created, counted by the API process), processing (fanout started), completed, partial, failed (counted by the worker that decided it)',
  labelNames: ['status'] as const,
  registers: [registry],
});

const notificationDuration = new Histogram({
  name: 'herald_notification_duration_seconds',
  help: 'From a notification created to its final status, by that status',
  labelNames: ['status'] as const,
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400],
  registers: [registry],
});

export type QueueDepth = { queue: string; ready: number; deferred: number; active: number };

let queueSource: (() => Promise<QueueDepth[]>) | null = null;
let queueCache: { at: number; depths: Promise<QueueDepth[]> } | null = null;
/** Scrapers (two Prometheus replicas, a person with curl) within this share one read. */
const queueCacheMs = 1000;
/** A scrape during a database outage still answers, without the queue gauge. */
const queueReadTimeoutMs = 2000;

new Gauge({
  name: 'herald_queue_jobs',
  help: 'Jobs in each queue by state: ready (due, waiting for a worker), deferred (a retry or delay not due yet), active (running). Read from the queue at scrape time; every worker process reports the same numbers: aggregate with max, not sum',
  labelNames: ['queue', 'state'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    if (!queueSource) return;
    const now = Date.now();
    if (!queueCache || now - queueCache.at > queueCacheMs) queueCache = { at: now, depths: queueSource() };
    const { depths } = queueCache;
    let timer: NodeJS.Timeout | undefined;
    const read = await Promise.race([
      depths.catch(() => null),
      new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), queueReadTimeoutMs))),
    ]).finally(() => clearTimeout(timer));
    if (!read) {
      queueCache = null;
      return;
    }
    for (const { queue, ready, deferred, active } of read) {
      this.set({ queue, state: 'ready' }, ready);
      this.set({ queue, state: 'deferred' }, deferred);
      this.set({ queue, state: 'active' }, active);
    }
  },
});

/** The queue gauge reads from `source` at scrape time (a worker process); null stops it. */
export function observeQueues(source: (() => Promise<QueueDepth[]>) | null): void {
  queueSource = source;
  queueCache = null;
}

let processMetrics = false;

/** CPU, memory, heap, event loop lag, GC, handles: prom-client's standard process metrics. */
export function collectProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics({ register: registry });
}

const httpMethods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export function httpRequest(route: string, method: string, status: number, seconds: number): void {
  http.observe({ route, method: httpMethods.has(method) ? method : 'other', status: String(status) }, seconds);
}

export function sendAnswered(applicationId: string, result: 'accepted' | 'replayed' | 'rate_limited'): void {
  sends.inc({ application: applicationId, result });
}

export function authFailed(status: 401 | 403, reason: 'missing_token' | 'invalid_token' | 'insufficient_scope'): void {
  authFailures.inc({ status: String(status), reason });
}

// Delivery reasons: Herald's own (skips, fanout failures, network failures), the reasons APNs
// documents and FCM's error codes. A provider may add one, and a library may put an error's
// message there: those are `other`, so a reason can never grow the label set.
const knownReasons = new Set([
  'permission_denied', 'permission_not_determined', 'no_credentials', 'duplicate_identifier',
  'installation_deleted', 'installation_invalid', 'cancelled', 'provider_credentials', 'expired', 'internal_error',
  'cannot be opened with this key', 'provider unreachable', 'provider timeout', 'provider connection lost', 'provider error', 'unanswered',
  'TokenEndpointUnavailable',
  // APNs
  'BadCollapseId', 'BadDeviceToken', 'BadExpirationDate', 'BadMessageId', 'BadPriority', 'BadTopic',
  'DeviceTokenNotForTopic', 'DuplicateHeaders', 'IdleTimeout', 'InvalidPushType', 'MissingDeviceToken',
  'MissingTopic', 'PayloadEmpty', 'TopicDisallowed', 'BadCertificate', 'BadCertificateEnvironment',
  'ExpiredProviderToken', 'Forbidden', 'InvalidProviderToken', 'MissingProviderToken', 'UnrelatedKeyIdInToken',
  'BadPath', 'MethodNotAllowed', 'ExpiredToken', 'Unregistered', 'PayloadTooLarge', 'TooManyProviderTokenUpdates',
  'TooManyRequests', 'InternalServerError', 'ServiceUnavailable', 'Shutdown',
  // FCM error codes, and the RPC statuses it answers without one
  'UNSPECIFIED_ERROR', 'INVALID_ARGUMENT', 'UNREGISTERED', 'SENDER_ID_MISMATCH', 'QUOTA_EXCEEDED', 'UNAVAILABLE',
  'INTERNAL', 'THIRD_PARTY_AUTH_ERROR', 'PERMISSION_DENIED', 'UNAUTHENTICATED', 'NOT_FOUND', 'RESOURCE_EXHAUSTED',
  // Web Push: the status names Herald gives (providers/web-push.ts), and the push services' own
  'BadRequest', 'Unauthorized', 'NotFound', 'Gone', 'BadGateway', 'GatewayTimeout', 'MissingSubscriptionKeys',
  'VapidPkHashMismatch', 'BadJwtToken', 'ExpiredJwtToken', 'BadWebPushTopic',
]);
// firebase-admin's own error codes (`messaging/invalid-argument`), a fixed set of its library.
const firebaseCode = /^(messaging|app)\/[a-z-]{1,60}$/;

export function reasonLabel(reason: string | null): string {
  if (reason === null) return '';
  return knownReasons.has(reason) || firebaseCode.test(reason) ? reason : 'other';
}

/** Outcomes moved by one statement (a batch's, a fanout's skips), counted per state and reason. */
export type OutcomeCount = { state: 'accepted' | 'failed' | 'skipped'; reason: string | null; count: number };

export function deliveriesEnded(platform: string, counts: readonly OutcomeCount[]): void {
  for (const { state, reason, count } of counts) {
    const outcome = state === 'failed' && reason === 'expired' ? 'expired' : state;
    deliveries.inc({ platform, outcome, reason: reasonLabel(reason) }, count);
  }
}

/** Transient reasons of one chunk, each with how many pushes it held back. */
export function deliveriesRetried(platform: string, reasons: ReadonlyMap<string, number>): void {
  for (const [reason, count] of reasons) retries.inc({ platform, reason: reasonLabel(reason) }, count);
}

export function providerRequest(platform: string, seconds: number): void {
  providerRequests.observe({ platform }, seconds);
}

export function jobStarted(queue: string, waitSeconds: number): void {
  jobWait.observe({ queue }, Math.max(0, waitSeconds));
}

export function notificationMoved(status: 'queued' | 'processing'): void {
  notifications.inc({ status });
}

export function notificationFinished(status: string, seconds: number): void {
  notifications.inc({ status });
  notificationDuration.observe({ status }, Math.max(0, seconds));
}

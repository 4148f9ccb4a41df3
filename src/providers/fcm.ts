// FCM HTTP v1 through firebase-admin: one App per credential, `sendEach` in batches of 500 over
// HTTP/2 sessions kept open between batches (fcm-sessions.ts), one outcome per push.
import { randomUUID } from 'node:crypto';
import { cert, deleteApp, initializeApp, type App } from 'firebase-admin/app';
import { getMessaging, type Messaging, type TokenMessage } from 'firebase-admin/messaging';
import { fcmMessage, fcmMessages } from '../domain/payloads.ts';
import type { Logger } from '../logging/logger.ts';
import { endpointCredential, fcmRoute } from './fcm-endpoint.ts';
import { createFcmSessions } from './fcm-sessions.ts';
import type { ProviderEndpoints, Push, PushOutcome, PushProvider } from './provider.ts';
import type { FcmCredentials } from '../domain/credentials.ts';
import { createLimiter, networkReason, parseJsonOrUndefined, parseRetryAfter, perContent, summarize, unusableProvider } from './support.ts';

export type FcmProviderOptions = {
  /** sendEach calls in flight at once, across concurrent send() calls; each on an HTTP/2 session of its own. */
  concurrency?: number;
  /** How long a session no batch uses stays open. */
  sessionIdleMs?: number;
  /**
   * Keep firebase-admin's own retries (503s, resets and timeouts: 4 more tries after 0/1/2/4 s).
   * Default false: the fanout retries every transient outcome itself, honouring Retry-After and
   * the push's expiry, as it does for APNs, and a batch is not held for up to 7 s by one 503.
   */
  sdkRetries?: boolean;
};

/** FCM's limit per sendEach. */
const batchSize = 500;

export function createFcmProvider(
  credentials: FcmCredentials,
  endpoints: ProviderEndpoints,
  logger: Logger,
  options: FcmProviderOptions = {},
): PushProvider {
  const serviceAccount = credentials.serviceAccount;
  const log = logger.child({ module: 'fcm', projectId: serviceAccount.project_id });
  let app: App;
  try {
    let credential;
    if (endpoints.fcm) {
      credential = endpointCredential(serviceAccount, endpoints.fcm, endpoints.ca);
    } else {
      credential = cert({
        projectId: serviceAccount.project_id,
        clientEmail: serviceAccount.client_email,
        privateKey: serviceAccount.private_key,
      });
    }
    // A unique name: several applications may share a Firebase project, each with its own App.
    app = initializeApp({ credential, projectId: serviceAccount.project_id }, `herald-fcm-${randomUUID()}`);
  } catch (error) {
    // cert() refuses a service account without a usable private key.
    log.warn({ err: error }, 'FCM service account unusable');
    return unusableProvider('InvalidServiceAccount');
  }
  const messaging = getMessaging(app);
  if (!options.sdkRetries && !disableSdkRetries(messaging)) {
    log.warn('firebase-admin retries could not be turned off: 503s are retried by the SDK too');
  }

  const concurrency = options.concurrency ?? 4;
  const limit = createLimiter(concurrency);
  const sessions = createFcmSessions({ maxIdle: concurrency, idleMs: options.sessionIdleMs });
  const route = fcmRoute({ endpoint: endpoints.fcm, ca: endpoints.ca, sessions });

  async function sendBatch(batch: Push[], now: number): Promise<PushOutcome[]> {
    try {
      const messageOf = perContent(fcmMessages);
      const response = await route(() => messaging.sendEach(batch.map((push) => messageFor(push, now, messageOf(push)))));
      return response.responses.map((result, index) =>
        result.success
          ? { deliveryId: batch[index].deliveryId, kind: 'accepted', ...(result.messageId ? { providerId: result.messageId } : {}) }
          : fcmOutcome(batch[index].deliveryId, result.error),
      );
    } catch (error) {
      // sendEach itself failed (e.g. the app was deleted): the same outcome for the whole batch.
      return batch.map((push) => fcmOutcome(push.deliveryId, error));
    }
  }

  return {
    async send(pushes: Push[]): Promise<PushOutcome[]> {
      const now = Date.now();
      const batches: Push[][] = [];
      for (let start = 0; start < pushes.length; start += batchSize) batches.push(pushes.slice(start, start + batchSize));
      const outcomes = (await Promise.all(batches.map((batch) => limit(() => sendBatch(batch, now))))).flat();
      const summary = summarize(outcomes);
      if (summary.credentials) log.warn(summary, 'FCM refused our credentials');
      else log.debug(summary, 'FCM batch sent');
      return outcomes;
    },
    async close(): Promise<void> {
      sessions.close();
      await deleteApp(app);
    },
  };
}

/** firebase-admin 14.5.1 has no option for it; a test proves one request per 503 so an upgrade that moves it shows. */
function disableSdkRetries(messaging: Messaging): boolean {
  const handler = (messaging as unknown as { messagingRequestHandler?: { http2Client?: { retry?: unknown } } }).messagingRequestHandler;
  if (!handler?.http2Client || !('retry' in handler.http2Client)) return false;
  handler.http2Client.retry = null;
  return true;
}

/** `built`: fcmMessage(push.content, push), which sendBatch builds from what the batch's messages share. */
export function messageFor(push: Push, now: number, built: ReturnType<typeof fcmMessage> = fcmMessage(push.content, push)): TokenMessage {
  const message = built as Omit<TokenMessage, 'token'> & { android?: Record<string, unknown> };
  const android: Record<string, unknown> = { ...message.android };
  const ttl = ttlSeconds(push, now);
  // firebase-admin takes ttl in milliseconds and writes it as "Ns" itself.
  if (ttl === undefined) delete android.ttl;
  else android.ttl = ttl * 1000;
  const { android: _android, ...rest } = message;
  return { ...rest, ...(Object.keys(android).length > 0 ? { android } : {}), token: push.providerIdentifier };
}

function ttlSeconds(push: Push, now: number): number | undefined {
  // platform_overrides are merged last: a ttl there wins, in seconds or FCM's "Ns".
  const override = push.content.options?.platform_overrides?.android?.ttl;
  if (typeof override === 'number' && override >= 0) return override;
  const seconds = typeof override === 'string' ? /^(\d+(?:\.\d+)?)s?$/.exec(override)?.[1] : undefined;
  if (seconds !== undefined) return Number(seconds);
  if (push.content.options?.ttl === 0) return 0;
  if (!push.expiresAt) return undefined;
  return Math.max(0, Math.floor((push.expiresAt.getTime() - now) / 1000));
}

type SdkError = {
  code?: string;
  message?: string;
  httpResponse?: { status?: number; headers?: Record<string, unknown>; data?: unknown };
};

/** What Google said, read from the response body the SDK keeps on the error. */
function serverError(data: unknown): { errorCode?: string; status?: string; message?: string; tokenField: boolean } {
  const error = (typeof data === 'string' ? parseJsonOrUndefined(data) : data) as
    | { error?: { status?: string; message?: string; details?: { '@type'?: string; errorCode?: string; fieldViolations?: { field?: string }[] }[] } }
    | undefined;
  const details = error?.error?.details ?? [];
  return {
    errorCode: details.find((detail) => detail['@type']?.endsWith('FcmError'))?.errorCode,
    status: error?.error?.status,
    message: error?.error?.message,
    tokenField: details.some((detail) => detail.fieldViolations?.some((violation) => violation.field === 'message.token')),
  };
}

export function fcmOutcome(deliveryId: string, error: unknown): PushOutcome {
  const sdkError = (error ?? {}) as SdkError;
  const code = sdkError.code ?? 'unknown-error';
  const server = serverError(sdkError.httpResponse?.data);
  const reason = server.errorCode ?? server.status ?? code;
  const httpStatus = sdkError.httpResponse?.status;
  const transient = (why = reason): PushOutcome => {
    const retryAfterSeconds = parseRetryAfter(sdkError.httpResponse?.headers?.['retry-after']);
    return { deliveryId, kind: 'transient', reason: why, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) };
  };
  switch (code) {
    case 'messaging/registration-token-not-registered':
    case 'messaging/invalid-registration-token':
      return { deliveryId, kind: 'invalid_token', reason };
    case 'messaging/mismatched-credential':
      // SENDER_ID_MISMATCH: the token belongs to another sender. A bare PERMISSION_DENIED: our
      // service account may not send for this project, which no device can fix.
      return server.errorCode === 'SENDER_ID_MISMATCH' ? { deliveryId, kind: 'invalid_token', reason } : { deliveryId, kind: 'credentials', reason };
    case 'messaging/invalid-argument': {
      // INVALID_ARGUMENT is also a payload problem: only a complaint about the token kills it.
      const aboutToken = server.tokenField || /registration token/i.test(server.message ?? sdkError.message ?? '');
      return { deliveryId, kind: aboutToken && httpStatus !== undefined ? 'invalid_token' : 'rejected', reason };
    }
    case 'messaging/third-party-auth-error':
    case 'messaging/authentication-error':
      return { deliveryId, kind: 'credentials', reason };
    case 'app/invalid-credential':
      // The token endpoint unreachable is not a bad key.
      return isNetworkFailure(error) ? transient('TokenEndpointUnavailable') : { deliveryId, kind: 'credentials', reason };
    case 'messaging/message-rate-exceeded':
    case 'messaging/device-message-rate-exceeded':
    case 'messaging/server-unavailable':
    case 'messaging/internal-error':
      return transient();
    case 'app/network-timeout':
    case 'app/network-error':
      return transient(networkReason(error));
  }
  if (httpStatus !== undefined) {
    if (httpStatus === 429 || httpStatus >= 500) return transient();
    if (httpStatus === 401 || httpStatus === 403) return { deliveryId, kind: 'credentials', reason };
    return { deliveryId, kind: 'rejected', reason };
  }
  // No answer from Google: the SDK refused the message itself, or the connection failed.
  if (/^messaging\/(invalid|payload)/.test(code)) return { deliveryId, kind: 'rejected', reason };
  return transient();
}

const networkCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);

function isNetworkFailure(error: unknown): boolean {
  for (let current = error as { code?: unknown; status?: unknown; cause?: unknown } | undefined, depth = 0; current && depth < 5; depth++) {
    if (typeof current.code === 'string' && networkCodes.has(current.code)) return true;
    if (typeof current.status === 'number' && (current.status === 429 || current.status >= 500)) return true;
    current = current.cause as typeof current;
  }
  return false;
}

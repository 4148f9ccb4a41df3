// FCM HTTP v1 through Herald's own HTTP/2 client (fcm-client.ts): one POST per push on kept
// connections, an OAuth token from fcm-token.ts, one outcome per push. firebase-admin's sendEach
// is not used: it opened a connection per call and gives a call one deadline, not each message.
import { fcmMessage, fcmMessages } from '../domain/payloads.ts';
import type { Logger } from '../logging/logger.ts';
import { createFcmClient, timeoutError, type FcmAnswer } from './fcm-client.ts';
import { fcmSendBody, InvalidFcmMessage } from './fcm-message.ts';
import { fcmAccessTokens } from './fcm-token.ts';
import type { ProviderEndpoints, Push, PushOutcome, PushProvider, SendOptions } from './provider.ts';
import type { FcmCredentials } from '../domain/credentials.ts';
import { networkReason, parseJsonOrUndefined, parseRetryAfter, perContent, summarize, unusableProvider } from './support.ts';

export type FcmProviderOptions = {
  /** Connections to FCM at most, across concurrent send() calls; each carries up to 100 messages at once. */
  concurrency?: number;
  /** How long a connection no message uses stays open. */
  sessionIdleMs?: number;
};

export type FcmSendOptions = SendOptions & {
  /** FCM checks the messages and the credentials without sending them (`validate_only`). */
  validateOnly?: boolean;
};

export type FcmProvider = PushProvider & { send(pushes: Push[], options?: FcmSendOptions): Promise<PushOutcome[]> };

export function createFcmProvider(
  credentials: FcmCredentials,
  endpoints: ProviderEndpoints,
  logger: Logger,
  options: FcmProviderOptions = {},
): FcmProvider {
  const serviceAccount = credentials.serviceAccount;
  const log = logger.child({ module: 'fcm', projectId: serviceAccount.project_id });
  const accessToken = fcmAccessTokens(serviceAccount, endpoints.fcm, endpoints.ca);
  if (!accessToken) {
    log.warn('FCM service account unusable');
    return unusableProvider('InvalidServiceAccount');
  }
  const client = createFcmClient({
    endpoint: endpoints.fcm,
    ca: endpoints.ca,
    projectId: serviceAccount.project_id,
    maxSessions: options.concurrency ?? 4,
    idleMs: options.sessionIdleMs,
  });

  async function sendOne(push: Push, now: number, built: Message, token: string, sendOptions: FcmSendOptions, signal?: AbortSignal): Promise<PushOutcome> {
    let body: string;
    try {
      const sendBody = fcmSendBody(messageFor(push, now, built));
      body = JSON.stringify(sendOptions.validateOnly ? { ...sendBody, validate_only: true } : sendBody);
    } catch (error) {
      if (error instanceof InvalidFcmMessage) return fcmOutcome(push.deliveryId, { invalid: error });
      throw error;
    }
    let answer: FcmAnswer;
    try {
      answer = await client.send(body, token, signal);
    } catch (error) {
      return fcmOutcome(push.deliveryId, { unanswered: error });
    }
    if (answer.status !== 200) return fcmOutcome(push.deliveryId, { answer });
    const name = (parseJsonOrUndefined(answer.body) as { name?: unknown } | undefined)?.name;
    return { deliveryId: push.deliveryId, kind: 'accepted', ...(typeof name === 'string' ? { providerId: name } : {}) };
  }

  return {
    async send(pushes: Push[], sendOptions: FcmSendOptions = {}): Promise<PushOutcome[]> {
      const now = Date.now();
      const controller = new AbortController();
      const deadline = sendOptions.deadline
        ? setTimeout(() => controller.abort(timeoutError('FCM did not answer before the deadline')), sendOptions.deadline.getTime() - now)
        : undefined;
      try {
        const signal = deadline ? controller.signal : undefined;
        let token: string;
        try {
          token = await untilAborted(accessToken(), signal);
        } catch (error) {
          // No token by the deadline is the deadline's timeout, not a credentials problem.
          if (signal?.aborted) return pushes.map((push) => fcmOutcome(push.deliveryId, { unanswered: error }));
          return pushes.map((push) => fcmOutcome(push.deliveryId, { credential: error }));
        }
        const messageOf = perContent(fcmMessages);
        const outcomes = await Promise.all(pushes.map((push) => sendOne(push, now, messageOf(push), token, sendOptions, signal)));
        const summary = summarize(outcomes);
        if (summary.credentials) log.warn(summary, 'FCM refused our credentials');
        else log.debug(summary, 'FCM batch sent');
        return outcomes;
      } finally {
        clearTimeout(deadline);
      }
    },
    async close(): Promise<void> {
      client.close();
    },
  };
}

type Message = Record<string, unknown>;

/** `promise`, or the signal's reason once it aborts first. */
function untilAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * The message for one push, in firebase-admin's field names (fcm-message.ts turns it into FCM's
 * JSON). `built`: fcmMessage(push.content, push), which send() builds from what the batch's
 * messages share.
 */
export function messageFor(push: Push, now: number, built: Message = fcmMessage(push.content, push)): Message {
  const android: Record<string, unknown> = { ...(built.android as Record<string, unknown> | undefined) };
  const ttl = ttlSeconds(push, now);
  // In milliseconds, as firebase-admin's `Message` has it: fcmSendBody writes it as "Ns".
  if (ttl === undefined) delete android.ttl;
  else android.ttl = ttl * 1000;
  const { android: _android, ...rest } = built;
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

/** Why a push was not accepted: FCM's answer, or none, or no access token, or a message refused before sending. */
export type FcmFailure = { answer: FcmAnswer } | { unanswered: unknown } | { credential: unknown } | { invalid: InvalidFcmMessage };

// The reasons and kinds are those Herald gave when it sent through firebase-admin, which
// integrators and the metrics already know: Google's error code when it names one, else
// firebase-admin's client code for the answer (`messaging/…`), which this table gives.
const clientCodes: Record<string, string> = {
  InvalidParameters: 'invalid-argument',
  MismatchSenderId: 'mismatched-credential',
  Unavailable: 'server-unavailable',
  InternalServerError: 'internal-error',
  InvalidRegistration: 'invalid-registration-token',
  NotRegistered: 'registration-token-not-registered',
  InvalidPackageName: 'invalid-package-name',
  MessageTooBig: 'payload-size-limit-exceeded',
  InvalidDataKey: 'invalid-data-payload-key',
  InvalidTtl: 'invalid-options',
  DeviceMessageRateExceeded: 'device-message-rate-exceeded',
  TopicsMessageRateExceeded: 'topics-message-rate-exceeded',
  InvalidApnsCredential: 'third-party-auth-error',
  NOT_FOUND: 'registration-token-not-registered',
  PERMISSION_DENIED: 'mismatched-credential',
  RESOURCE_EXHAUSTED: 'message-rate-exceeded',
  UNAUTHENTICATED: 'third-party-auth-error',
  APNS_AUTH_ERROR: 'third-party-auth-error',
  INTERNAL: 'internal-error',
  INVALID_ARGUMENT: 'invalid-argument',
  QUOTA_EXCEEDED: 'message-rate-exceeded',
  SENDER_ID_MISMATCH: 'mismatched-credential',
  THIRD_PARTY_AUTH_ERROR: 'third-party-auth-error',
  UNAVAILABLE: 'server-unavailable',
  UNREGISTERED: 'registration-token-not-registered',
};

/** A body that is not JSON (a proxy's page): the code by status alone. */
const statusCodes: Record<number, string> = { 400: 'invalid-argument', 401: 'authentication-error', 403: 'authentication-error', 500: 'internal-error', 503: 'server-unavailable' };

type GoogleError = {
  error?: string | { status?: string; message?: string; details?: { '@type'?: string; errorCode?: string; fieldViolations?: { field?: string }[] }[] };
};

/** What FCM said: its error code (FcmError detail), status, message, whether it blamed the token, and the client code. */
function readAnswer(answer: FcmAnswer) {
  const json = parseJsonOrUndefined(answer.body) as GoogleError | null | undefined;
  if (json === undefined) return { code: statusCodes[answer.status] ?? 'unknown-error', tokenField: false, text: answer.body };
  const error = typeof json === 'object' && json !== null ? json.error : undefined;
  const google = typeof error === 'object' && error !== null ? error : undefined;
  const details = Array.isArray(google?.details) ? google.details : [];
  const errorCode = details.find((detail) => detail['@type'] === 'type.googleapis.com/google.firebase.fcm.v1.FcmError')?.errorCode;
  const serverCode = typeof error === 'string' ? error : (errorCode ?? (google && 'status' in google ? google.status : google?.message));
  return {
    code: serverCode !== undefined && Object.hasOwn(clientCodes, serverCode) ? clientCodes[serverCode] : 'unknown-error',
    errorCode,
    status: google?.status,
    tokenField: details.some((detail) => detail.fieldViolations?.some((violation) => violation.field === 'message.token')),
    text: google?.message ?? '',
  };
}

export function fcmOutcome(deliveryId: string, failure: FcmFailure): PushOutcome {
  if ('invalid' in failure) return { deliveryId, kind: 'rejected', reason: 'messaging/invalid-payload' };
  if ('unanswered' in failure) return { deliveryId, kind: 'transient', reason: networkReason(failure.unanswered) };
  if ('credential' in failure) {
    // The token endpoint unreachable is not a bad key.
    return isNetworkFailure(failure.credential)
      ? { deliveryId, kind: 'transient', reason: 'TokenEndpointUnavailable' }
      : { deliveryId, kind: 'credentials', reason: 'app/invalid-credential' };
  }
  const { answer } = failure;
  const server = readAnswer(answer);
  const reason = server.errorCode ?? server.status ?? `messaging/${server.code}`;
  const transient = (): PushOutcome => {
    const retryAfterSeconds = parseRetryAfter(answer.headers['retry-after']);
    return { deliveryId, kind: 'transient', reason, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) };
  };
  switch (server.code) {
    case 'registration-token-not-registered':
    case 'invalid-registration-token':
      return { deliveryId, kind: 'invalid_token', reason };
    case 'mismatched-credential':
      // SENDER_ID_MISMATCH: the token belongs to another sender. A bare PERMISSION_DENIED: our
      // service account may not send for this project, which no device can fix.
      return server.errorCode === 'SENDER_ID_MISMATCH' ? { deliveryId, kind: 'invalid_token', reason } : { deliveryId, kind: 'credentials', reason };
    case 'invalid-argument':
      // INVALID_ARGUMENT is also a payload problem: only a complaint about the token kills it.
      return { deliveryId, kind: server.tokenField || /registration token/i.test(server.text) ? 'invalid_token' : 'rejected', reason };
    case 'third-party-auth-error':
    case 'authentication-error':
      return { deliveryId, kind: 'credentials', reason };
    case 'message-rate-exceeded':
    case 'device-message-rate-exceeded':
    case 'server-unavailable':
    case 'internal-error':
      return transient();
  }
  if (answer.status === 429 || answer.status >= 500) return transient();
  if (answer.status === 401 || answer.status === 403) return { deliveryId, kind: 'credentials', reason };
  return { deliveryId, kind: 'rejected', reason };
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

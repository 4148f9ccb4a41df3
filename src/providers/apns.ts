// APNs through @parse/node-apn: one long-lived HTTP/2 client per credential, one request per push
// (each push's payload carries its own delivery id), and one outcome per push.
import { setImmediate } from 'node:timers/promises';
import apn from '@parse/node-apn';
import { apnsPayload, apnsPayloads } from '../domain/payloads.ts';
import { isUuid } from '../domain/ids.ts';
import type { Logger } from '../logging/logger.ts';
import type { ProviderEndpoints, Push, PushOutcome, PushProvider, SendOptions } from './provider.ts';
import type { ApnsCredentials } from '../domain/credentials.ts';
import { createLimiter, networkReason, perContent, socketHost, summarize, unusableProvider } from './support.ts';

export type ApnsProviderOptions = {
  /** Requests in flight at once on the one connection, across concurrent send() calls. */
  concurrency?: number;
  /** Per request, before it is reported transient. */
  requestTimeoutMs?: number;
  /** How long close() waits for the library's shutdown, whose callback may never come. */
  closeTimeoutMs?: number;
};

// Streams in flight on one session at most: given thousands at once, the server ends the session
// (ENHANCE_YOUR_CALM).
const defaultConcurrency = 1000;
/** Requests issued per turn of the event loop (see send()). */
const sliceSize = 50;

const invalidTokenReasons = new Set(['Unregistered', 'ExpiredToken', 'BadDeviceToken', 'DeviceTokenNotForTopic']);
const credentialReasons = new Set([
  'InvalidProviderToken',
  'ExpiredProviderToken',
  'MissingProviderToken',
  'BadCertificate',
  'BadCertificateEnvironment',
  'TopicDisallowed',
  'BadTopic',
]);

type SendResult = Awaited<ReturnType<apn.Provider['send']>>;
type Failure = SendResult['failed'][number];

export function createApnsProvider(
  credentials: ApnsCredentials,
  endpoints: ProviderEndpoints,
  logger: Logger,
  options: ApnsProviderOptions = {},
): PushProvider {
  const log = logger.child({ module: 'apns', bundleId: credentials.bundleId });
  let client: apn.Provider;
  try {
    client = new apn.Provider({
      // A Buffer: a string that does not look like PEM is read by the library as a file path.
      token: { key: Buffer.from(credentials.key), keyId: credentials.keyId, teamId: credentials.teamId },
      production: !credentials.sandbox,
      ...endpointOptions(endpoints),
      // Its retry ignores Retry-After (it reads the header in the wrong case): the fanout retries
      // with its own backoff.
      connectionRetryLimit: 0,
      requestTimeout: options.requestTimeoutMs ?? 10_000,
    });
  } catch (error) {
    // The key cannot sign (not a .p8 EC key): every push fails as a credentials problem.
    log.warn({ err: error }, 'APNs signing key unusable');
    return unusableProvider('InvalidSigningKey');
  }

  const limit = createLimiter(options.concurrency ?? defaultConcurrency);
  return {
    async send(pushes: Push[], sendOptions: SendOptions = {}): Promise<PushOutcome[]> {
      // One recipient per library send(): every push has its own payload (its delivery id), and
      // results come back keyed by device token, which pushes sharing a token would make ambiguous.
      const payloadOf = perContent(apnsPayloads);
      const deadline = deadlineOf(sendOptions.deadline);
      const answer = (push: Push) =>
        limit(async () => {
          // Still waiting for a slot at the deadline: never sent, so nothing to wait for.
          if (deadline.passed) return timedOut(push.deliveryId);
          return outcomeOf(push.deliveryId, await client.send(notificationFor(push, credentials.bundleId, payloadOf(push)), push.providerIdentifier));
        });
      // Past the deadline a push without its answer is given up; the library's request stays in
      // flight until its own timeout, and whatever it answers then is not used.
      const sendOne = (push: Push) => {
        const answered = answer(push);
        // Settled after the deadline, a rejection has nobody left to handle it.
        answered.catch(() => undefined);
        return Promise.race([answered, deadline.reached.then(() => timedOut(push.deliveryId))]);
      };
      // HTTP/2 writes go out when the event loop turns: issued all at once, the first push of a
      // batch would wait until the whole batch is built. A slice at a time, the first ones leave
      // while the rest are prepared.
      const slices: Promise<PushOutcome[]>[] = [];
      for (let start = 0; start < pushes.length; start += sliceSize) {
        if (start > 0) await setImmediate();
        const slice = Promise.all(pushes.slice(start, start + sliceSize).map(sendOne));
        // Awaited below; until then a rejection must not count as unhandled.
        slice.catch(() => undefined);
        slices.push(slice);
      }
      const outcomes = (await Promise.all(slices).finally(deadline.clear)).flat();
      const summary = summarize(outcomes);
      if (summary.credentials) log.warn(summary, 'APNs refused our credentials');
      else log.debug(summary, 'APNs batch sent');
      return outcomes;
    },
    async close(): Promise<void> {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        // shutdown() returns nothing despite its types; its callback never fires after a dead connection.
        new Promise<void>((resolve) => {
          client.shutdown(() => resolve());
        }),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, options.closeTimeoutMs ?? 2000);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}

const timedOut = (deliveryId: string): PushOutcome => ({ deliveryId, kind: 'transient', reason: 'provider timeout' });

/** A send's deadline: a promise that settles when it is reached (never without one). */
function deadlineOf(at: Date | undefined): { reached: Promise<void>; readonly passed: boolean; clear(): void } {
  let timer: NodeJS.Timeout | undefined;
  let passed = false;
  const reached = at
    ? new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          passed = true;
          resolve();
        }, at.getTime() - Date.now());
      })
    : new Promise<void>(() => undefined);
  return { reached, get passed() { return passed; }, clear: () => clearTimeout(timer) };
}

function endpointOptions(endpoints: ProviderEndpoints): { address?: string; port?: number; ca?: string[] } {
  // The CA is the simulator's: given to Apple's own hosts it would replace the system's CAs.
  if (!endpoints.apns) return {};
  const url = new URL(endpoints.apns);
  return {
    address: socketHost(url),
    port: url.port ? Number(url.port) : 443,
    ...(endpoints.ca ? { ca: [endpoints.ca] } : {}),
  };
}

/** `payload`: apnsPayload(push.content, push), which send() builds from what the batch's payloads share. */
export function notificationFor(push: Push, bundleId: string, payload = apnsPayload(push.content, push)): apn.Notification {
  const options = push.content.options ?? {};
  const aps = (payload.aps ?? {}) as Record<string, unknown>;
  // Apple: alert, sound or badge make an `alert` push; anything else only wakes the app.
  const visible = aps.alert !== undefined || aps.sound !== undefined || aps.badge !== undefined;
  const note = new apn.Notification();
  note.rawPayload = payload;
  note.topic = bundleId;
  note.pushType = visible ? 'alert' : 'background';
  // A background push at priority 10 is an error for Apple.
  note.priority = visible && options.priority !== 'normal' ? 10 : 5;
  if (options.ttl === 0) note.expiry = 0;
  else if (push.expiresAt) note.expiry = Math.floor(push.expiresAt.getTime() / 1000);
  // A repeated push (a retry after a lost answer) replaces the one still shown instead of stacking.
  note.collapseId = options.collapse_id ?? push.notificationId;
  // Our delivery id as apns-id: Apple's answers and its delivery log then name the delivery.
  if (isUuid(push.deliveryId)) note.id = push.deliveryId.toLowerCase();
  return note;
}

function outcomeOf(deliveryId: string, result: SendResult): PushOutcome {
  const sent = result.sent[0] as { device: string; 'apns-id'?: string } | undefined;
  if (sent) return { deliveryId, kind: 'accepted', ...(sent['apns-id'] ? { providerId: sent['apns-id'] } : {}) };
  const failure: Failure | undefined = result.failed[0];
  if (!failure) return { deliveryId, kind: 'transient', reason: 'provider connection lost' };
  return failureOutcome(deliveryId, failure);
}

export function failureOutcome(deliveryId: string, failure: Failure): PushOutcome {
  const status = typeof failure.status === 'number' ? failure.status : undefined;
  // The library turns some answers into an Error whose message is the reason (ExpiredProviderToken).
  const reason = failure.response?.reason ?? reasonOfError(status, failure);
  if (status === 410 || invalidTokenReasons.has(reason)) {
    const timestamp = Number(failure.response?.timestamp);
    return {
      deliveryId,
      kind: 'invalid_token',
      reason,
      ...(Number.isFinite(timestamp) && timestamp > 0 ? { invalidatedAt: new Date(timestamp) } : {}),
    };
  }
  if (credentialReasons.has(reason) || status === 403) return { deliveryId, kind: 'credentials', reason };
  // No status: a connection error, a timeout, or a stream reset; also a 429/503 answered just after
  // a 500, for which the library has already closed the session ("client session is either closed
  // or destroyed"). The library drops Retry-After before it reaches us (it reads `Retry-After` from
  // lower-cased HTTP/2 headers, then deletes it).
  if (status === undefined || status === 429 || status >= 500) return { deliveryId, kind: 'transient', reason };
  return { deliveryId, kind: 'rejected', reason };
}

function reasonOfError(status: number | undefined, failure: Failure): string {
  if (status === 500) return 'InternalServerError';
  // No status: the request never got an answer (refused, timed out, session lost).
  if (status === undefined) return networkReason(failure.error ?? failure);
  const error = failure.error as Error | undefined;
  return error?.message || `HTTP ${status}`;
}

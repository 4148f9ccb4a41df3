// Web Push (RFC 8030) through the `web-push` library: it encrypts each payload for its subscription
// (RFC 8291) and builds the request; Herald sends it on kept connections (one keep-alive agent per
// credential, its sockets checked by the address guard), with a VAPID header (RFC 8292) signed once
// per push service and reused until it nears expiry, and a deadline per push.
import https from 'node:https';
import { createSecureContext, rootCertificates } from 'node:tls';
import webpush from 'web-push';
import { webPushPayloads } from '../domain/payloads.ts';
import { webPushPlaintextLimit, webPushTopic, webPushUrgency } from '../domain/web-push.ts';
import type { WebPushCredentials } from '../domain/credentials.ts';
import type { Logger } from '../logging/logger.ts';
import { AddressRefused, guardedLookup, literalRefusal } from './address-guard.ts';
import type { ProviderEndpoints, Push, PushOutcome, PushProvider, SendOptions } from './provider.ts';
import { createLimiter, networkReason, parseJsonOrUndefined, parseRetryAfter, perContent, summarize } from './support.ts';

export type WebPushProviderOptions = {
  /** Requests in flight at once, across concurrent send() calls. */
  concurrency?: number;
  /** Connections kept per push service host. */
  socketsPerHost?: number;
};

/** A VAPID JWT's lifetime: RFC 8292 allows at most 24 hours; push services commonly take 12. */
const vapidLifetimeSeconds = 12 * 3600;
/** A header with less than this left is signed again, so that none expires on its way. */
const vapidRenewSeconds = 3600;
/** Web Push's TTL when the notification has no expiry: the library's default, four weeks. */
const defaultTtlSeconds = 28 * 86400;
/** Characters of an error answer kept as the reason's detail. */
const detailLength = 120;

/** A kept connection idle this long is closed (sooner when the push service says it closes sooner). */
const idleConnectionMs = 30_000;

/** A push service's answer, or none. */
export type WebPushAnswer = { status: number; headers: Record<string, string | string[] | undefined>; body: string };

export function createWebPushProvider(
  credentials: WebPushCredentials,
  endpoints: ProviderEndpoints,
  logger: Logger,
  options: WebPushProviderOptions = {},
): PushProvider {
  const log = logger.child({ module: 'web-push' });
  const allowPrivate = endpoints.webPushAllowPrivate ?? false;
  const agent = keptConnections(endpoints, allowPrivate, options.socketsPerHost ?? 64);
  const vapid = vapidHeaders(credentials);
  const limit = createLimiter(options.concurrency ?? 500);

  async function sendOne(push: Push, payload: string, signal: AbortSignal, now: number): Promise<PushOutcome> {
    const subscription = push.subscription;
    if (!subscription) return { deliveryId: push.deliveryId, kind: 'rejected', reason: 'MissingSubscriptionKeys' };
    // The plaintext must leave room for the encryption in one 4,096-byte record: fitToPlatform cut
    // the text; only data too large even for that (accepted because it fits APNs and FCM) is left.
    if (Buffer.byteLength(payload) > webPushPlaintextLimit) return { deliveryId: push.deliveryId, kind: 'rejected', reason: 'PayloadTooLarge' };
    const endpoint = new URL(push.providerIdentifier);
    const refused = allowPrivate ? null : literalRefusal(endpoint);
    if (refused) return { deliveryId: push.deliveryId, kind: 'rejected', reason: refused };
    const options = push.content.options ?? {};
    const keys = { p256dh: subscription.p256dh, auth: subscription.auth };
    const request = webpush.generateRequestDetails({ endpoint: push.providerIdentifier, keys }, payload, {
      TTL: ttlSeconds(push, now),
      urgency: webPushUrgency(options.priority),
      ...(options.collapse_id ? { topic: webPushTopic(options.collapse_id) } : {}),
      // The VAPID header is signed here once per push service (vapidHeaders), not by the library at
      // every push: the library documents a falsy vapidDetails as "no signing", which its types omit.
      vapidDetails: null as unknown as undefined,
      headers: { Authorization: vapid(endpoint.origin, now) },
    });
    try {
      const answer = await post(agent, endpoint, request.headers, request.body, signal);
      return webPushOutcome(push, answer);
    } catch (error) {
      if (error instanceof AddressRefused) return { deliveryId: push.deliveryId, kind: 'rejected', reason: error.message };
      return { deliveryId: push.deliveryId, kind: 'transient', reason: signal.aborted ? 'provider timeout' : networkReason(error) };
    }
  }

  return {
    async send(pushes: Push[], sendOptions: SendOptions = {}): Promise<PushOutcome[]> {
      const now = Date.now();
      const controller = new AbortController();
      const deadline = sendOptions.deadline
        ? setTimeout(() => controller.abort(new Error('Web Push did not answer before the deadline')), sendOptions.deadline.getTime() - now)
        : undefined;
      try {
        const payloadOf = perContent(webPushPayloads);
        const outcomes = await Promise.all(
          pushes.map((push) =>
            limit(async (): Promise<PushOutcome> => {
              // Still waiting for a slot at the deadline: never sent.
              if (controller.signal.aborted) return { deliveryId: push.deliveryId, kind: 'transient', reason: 'provider timeout' };
              return sendOne(push, payloadOf(push), controller.signal, now);
            }),
          ),
        );
        const summary = summarize(outcomes);
        if (summary.credentials) log.warn(summary, 'a push service refused our VAPID key');
        else log.debug(summary, 'Web Push batch sent');
        return outcomes;
      } finally {
        clearTimeout(deadline);
      }
    },
    async close(): Promise<void> {
      agent.destroy();
    },
  };
}

/**
 * The `Authorization` header for a push service (its origin is the JWT's audience), signed when
 * first needed and again only when the one kept is within vapidRenewSeconds of its expiry: signing
 * an ES256 JWT per push would cost more than the push's own encryption.
 */
function vapidHeaders(credentials: WebPushCredentials): (audience: string, now: number) => string {
  const signed = new Map<string, { authorization: string; expiresAt: number }>();
  return (audience, now) => {
    const kept = signed.get(audience);
    if (kept && kept.expiresAt - now / 1000 > vapidRenewSeconds) return kept.authorization;
    const expiresAt = Math.floor(now / 1000) + vapidLifetimeSeconds;
    const headers = webpush.getVapidHeaders(audience, credentials.subject, credentials.publicKey, credentials.privateKey, 'aes128gcm', expiresAt);
    signed.set(audience, { authorization: headers.Authorization, expiresAt });
    return headers.Authorization;
  };
}

/** `TTL`: what is left of the push's life (0: now or never), or four weeks without an expiry. */
function ttlSeconds(push: Push, now: number): number {
  if (push.content.options?.ttl === 0) return 0;
  if (!push.expiresAt) return defaultTtlSeconds;
  return Math.max(0, Math.floor((push.expiresAt.getTime() - now) / 1000));
}

/** The provider's kept connections: one agent for every push service, `socketsPerHost` to each. */
function keptConnections(endpoints: ProviderEndpoints, allowPrivate: boolean, socketsPerHost: number): https.Agent {
  return new https.Agent({
    keepAlive: true,
    maxSockets: socketsPerHost,
    // How long an idle kept connection stays open. With it set, Node also honours a push service's
    // `Keep-Alive: timeout=` and closes the connection a second before the service would (without
    // it, the hint is ignored): a push is then never written on a connection the service is closing
    // at that moment, which fails it with a `socket hang up` and sends it back to wait out a retry.
    // It bounds idle connections only: a push in flight is bounded by its deadline.
    timeout: idleConnectionMs,
    ...(allowPrivate ? {} : { lookup: guardedLookup() }),
    // The simulator's CA besides the system's: subscriptions of real push services still verify.
    // Given as one secure context, built once: a `ca` option is part of the key the agent computes
    // for every request, and with the system's roots in it that key is hundreds of kilobytes.
    ...(endpoints.ca ? { secureContext: createSecureContext({ ca: [...rootCertificates, endpoints.ca] }) } : {}),
  });
}

/** One POST on the kept connections; rejects on a network failure or when `signal` aborts. */
function post(agent: https.Agent, endpoint: URL, headers: Record<string, unknown>, body: Buffer | null, signal: AbortSignal): Promise<WebPushAnswer> {
  return new Promise((resolve, reject) => {
    const request = https.request(endpoint, { method: 'POST', agent, headers: headers as Record<string, string>, signal }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        // Only an excerpt is kept: the rest is read and dropped, so the connection can be reused.
        if (size < 4096) chunks.push(chunk);
        size += chunk.length;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body ?? undefined);
  });
}

/**
 * Words of a push service's 401 or 403 that say the subscription was made with another VAPID key:
 * Apple's `VapidPkHashMismatch`, Mozilla's "VAPID public key mismatch" (errno 109), FCM's "does not
 * correspond to the sender ID used to subscribe this user".
 */
const otherKeyPattern = /VapidPkHashMismatch|public key mismatch|does not correspond/i;
/** One reason for that answer whichever service gave it, so that a breakdown groups them. */
const otherKeyReason = 'VapidPkHashMismatch';

/** The usual name of each status, the reason when a push service gives none of its own. */
const statusNames: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  410: 'Gone',
  413: 'PayloadTooLarge',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  502: 'BadGateway',
  503: 'ServiceUnavailable',
  504: 'GatewayTimeout',
};

/**
 * A delivery's reason for an answer: the push service's own name for it (a JSON `reason`, as Apple
 * and the simulator give) or the status's name, so that a notification's breakdown groups them; a
 * 400 adds the service's words, which say what in the request was wrong.
 */
function reasonOf(answer: WebPushAnswer): string {
  const json = parseJsonOrUndefined(answer.body) as Record<string, unknown> | undefined;
  const own = typeof json?.reason === 'string' && /^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(json.reason) ? json.reason : undefined;
  const name = own ?? statusNames[answer.status] ?? `HTTP ${answer.status}`;
  if (answer.status !== 400 || own) return name;
  const words = [json?.message, json?.error].find((value) => typeof value === 'string' && value.length > 0) as string | undefined;
  const text = (words ?? answer.body).replace(/\p{Cc}+/gu, ' ').trim().slice(0, detailLength);
  return text ? `${name}: ${text}` : name;
}

/**
 * A push service's answer as an outcome. 404 and 410: the subscription is gone; answers carry no
 * date, so the invalidation is dated when the push read the subscription, and a subscription the
 * browser replaced since (new keys on the same endpoint) is not invalidated. A 401 or 403 saying
 * the subscription belongs to another key: that subscription is dead for us (a key pair replaced
 * with --force). Any other 401 or 403: our VAPID JWT is refused, which no subscription can fix.
 */
export function webPushOutcome(push: Pick<Push, 'deliveryId' | 'subscription'>, answer: WebPushAnswer): PushOutcome {
  const { deliveryId } = push;
  const { status } = answer;
  if (status >= 200 && status < 300) {
    const location = answer.headers.location;
    return { deliveryId, kind: 'accepted', ...(typeof location === 'string' && location ? { providerId: location } : {}) };
  }
  const reason = reasonOf(answer);
  const invalidated = (why: string): PushOutcome => ({
    deliveryId,
    kind: 'invalid_token',
    reason: why,
    ...(push.subscription ? { invalidatedAt: push.subscription.readAt } : {}),
  });
  if (status === 404 || status === 410) return invalidated(reason);
  if ((status === 401 || status === 403) && otherKeyPattern.test(answer.body)) return invalidated(otherKeyReason);
  if (status === 401 || status === 403) return { deliveryId, kind: 'credentials', reason };
  if (status === 429 || status >= 500) {
    const retryAfterSeconds = parseRetryAfter(answer.headers['retry-after']);
    return { deliveryId, kind: 'transient', reason, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) };
  }
  return { deliveryId, kind: 'rejected', reason };
}

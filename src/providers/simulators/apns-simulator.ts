// A local APNs (HTTP/2 over TLS, `POST /3/device/{token}`) that checks and answers like Apple's:
// ES256 provider tokens signed by a registered key, the topic, the apns-* headers, the 4 KB limit,
// and Apple's error reasons. Failure rules and latency make it misbehave on purpose.
import { createPublicKey, randomUUID, verify, type KeyObject } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http2';
import {
  base64UrlJson,
  header,
  isObject,
  matchRule,
  startSimulator,
  type Answer,
  type RunningSimulator,
  type SimulatorOptions,
} from './common.ts';

export type ApnsSimulatorOptions = SimulatorOptions & {
  teamId: string;
  /** Signing keys by key id: the public half (PEM) of each .p8 key the simulator accepts. */
  keys: Record<string, string>;
  /** The app(s) this team may push to: `apns-topic` must be one of them. */
  bundleIds: string[];
  /** `hex`: refuse tokens that are not 64+ hex digits, as Apple does. `any` (default): accept any token. */
  tokenFormat?: 'any' | 'hex';
};

export type ApnsReceived = {
  token: string;
  topic?: string;
  priority?: string;
  expiration?: string;
  collapseId?: string;
  pushType?: string;
  apnsId: string;
  /** The parsed JSON body (undefined when it was empty or not JSON). */
  payload: unknown;
  status: number;
  reason?: string;
  at: number;
};

export type ApnsSimulator = RunningSimulator<ApnsReceived>;

/** Apple's status for each reason, so a failure rule only has to name the reason. */
const statusOfReason: Record<string, number> = {
  BadCollapseId: 400,
  BadDeviceToken: 400,
  BadExpirationDate: 400,
  BadMessageId: 400,
  BadPriority: 400,
  BadTopic: 400,
  DeviceTokenNotForTopic: 400,
  DuplicateHeaders: 400,
  IdleTimeout: 400,
  InvalidPushType: 400,
  MissingDeviceToken: 400,
  MissingTopic: 400,
  PayloadEmpty: 400,
  TopicDisallowed: 400,
  BadCertificate: 403,
  BadCertificateEnvironment: 403,
  ExpiredProviderToken: 403,
  Forbidden: 403,
  InvalidProviderToken: 403,
  MissingProviderToken: 403,
  BadPath: 404,
  MethodNotAllowed: 405,
  ExpiredToken: 410,
  Unregistered: 410,
  PayloadTooLarge: 413,
  TooManyProviderTokenUpdates: 429,
  TooManyRequests: 429,
  InternalServerError: 500,
  ServiceUnavailable: 503,
  Shutdown: 503,
};

const payloadLimit = 4096;
/** Apple refuses provider tokens older than an hour. */
const providerTokenLifetimeSeconds = 3600;
const pushTypes = new Set(['alert', 'background', 'location', 'voip', 'complication', 'fileprovider', 'mdm', 'liveactivity', 'pushtotalk', 'widgets']);
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const devicePath = /^\/3\/device\/([^/]+)$/;

export async function startApnsSimulator(options: ApnsSimulatorOptions): Promise<ApnsSimulator> {
  const checkProviderToken = providerTokenChecker(options.teamId, options.keys);
  const bundleIds = new Set(options.bundleIds);
  return startSimulator<ApnsReceived>('APNs', options, async (request, body, state) => {
    const match = devicePath.exec(request.url.split('?')[0]);
    if (!match) return undefined;
    const requestedId = header(request.headers, 'apns-id');
    const received = receivedPush(decodeURIComponent(match[1]), request.headers, requestedId, body);
    if (request.method !== 'POST') return refuse(received, 'MethodNotAllowed');
    const problem =
      checkProviderToken(header(request.headers, 'authorization')) ??
      pushProblem(received, requestedId, body, bundleIds, options.tokenFormat);
    if (problem) return refuse(received, problem);
    const rule = matchRule(state.rules, received.token);
    if (rule) return refuse(received, rule.reason, rule);
    return { answer: { status: 200, headers: { 'apns-id': received.apnsId } }, received };
  });
}

/** A push as received, accepted until a check refuses it. */
function receivedPush(token: string, headers: IncomingHttpHeaders, requestedId: string | undefined, body: Buffer): ApnsReceived {
  let payload: unknown;
  try {
    payload = body.length > 0 ? JSON.parse(body.toString('utf8')) : undefined;
  } catch {
    payload = undefined;
  }
  return {
    token,
    topic: header(headers, 'apns-topic'),
    priority: header(headers, 'apns-priority'),
    expiration: header(headers, 'apns-expiration'),
    collapseId: header(headers, 'apns-collapse-id'),
    pushType: header(headers, 'apns-push-type'),
    apnsId: requestedId !== undefined && uuidPattern.test(requestedId) ? requestedId : randomUUID(),
    payload,
    status: 200,
    at: Date.now(),
  };
}

/** Apple's checks of a push's headers, token and payload: the reason it is refused, if any. */
function pushProblem(
  push: ApnsReceived,
  requestedId: string | undefined,
  body: Buffer,
  bundleIds: Set<string>,
  tokenFormat: ApnsSimulatorOptions['tokenFormat'],
): string | undefined {
  if (requestedId !== undefined && !uuidPattern.test(requestedId)) return 'BadMessageId';
  if (push.topic === undefined) return 'MissingTopic';
  if (!bundleIds.has(push.topic)) return 'BadTopic';
  if (push.pushType !== undefined && !pushTypes.has(push.pushType)) return 'InvalidPushType';
  if (push.priority !== undefined && !['1', '5', '10'].includes(push.priority)) return 'BadPriority';
  // Apple documents priority 10 with a background push as an error: it must not wake the device at once.
  if (push.pushType === 'background' && push.priority === '10') return 'BadPriority';
  if (push.expiration !== undefined && !/^\d+$/.test(push.expiration)) return 'BadExpirationDate';
  if (push.collapseId !== undefined && Buffer.byteLength(push.collapseId) > 64) return 'BadCollapseId';
  if (tokenFormat === 'hex' && !/^[0-9a-f]{64,200}$/i.test(push.token)) return 'BadDeviceToken';
  if (body.length === 0) return 'PayloadEmpty';
  if (body.length > payloadLimit) return 'PayloadTooLarge';
  if (!isObject(push.payload)) return 'PayloadEmpty';
  return undefined;
}

/** Apple's error answer for `reason`; the push is recorded with it. */
function refuse(received: ApnsReceived, reason: string, extra: { status?: number; retryAfter?: number; timestamp?: number } = {}) {
  const status = extra.status ?? statusOfReason[reason] ?? 400;
  received.status = status;
  received.reason = reason;
  const answer: Answer = { status, headers: { 'apns-id': received.apnsId }, body: { reason } };
  if (status === 410) answer.body = { reason, timestamp: extra.timestamp ?? Date.now() };
  if (extra.retryAfter !== undefined) answer.headers!['retry-after'] = String(extra.retryAfter);
  return { answer, received };
}

/**
 * Checks an `authorization` header as Apple does: an ES256 JWT from the team, signed by one of its
 * registered keys, at most an hour old. Answers the reason it is refused, if any.
 */
function providerTokenChecker(teamId: string, publicKeys: Record<string, string>): (authorization: string | undefined) => string | undefined {
  const keys = new Map<string, KeyObject>(Object.entries(publicKeys).map(([keyId, pem]) => [keyId, createPublicKey(pem)]));
  // Verified JWT → its iat: a provider reuses one token for up to an hour, and an ECDSA verify per
  // request would make the simulator, not the client, the bottleneck of a benchmark.
  const verified = new Map<string, number>();
  return (authorization) => {
    if (!authorization) return 'MissingProviderToken';
    const match = /^bearer (.+)$/i.exec(authorization);
    if (!match) return 'InvalidProviderToken';
    const jwt = match[1];
    let iat = verified.get(jwt);
    if (iat === undefined) {
      const checked = verifyJwt(jwt, keys, teamId);
      if (typeof checked === 'string') return checked;
      iat = checked;
      if (verified.size >= 1000) verified.clear();
      verified.set(jwt, iat);
    }
    if (Date.now() / 1000 - iat > providerTokenLifetimeSeconds) return 'ExpiredProviderToken';
    return undefined;
  };
}

/** The JWT's iat when it is valid; otherwise the reason it is refused. */
function verifyJwt(jwt: string, keys: Map<string, KeyObject>, teamId: string): number | string {
  const [head, claims, signature, ...rest] = jwt.split('.');
  if (signature === undefined || rest.length > 0) return 'InvalidProviderToken';
  try {
    const parsedHead = base64UrlJson(head);
    const parsedClaims = base64UrlJson(claims);
    if (!isObject(parsedHead) || !isObject(parsedClaims)) return 'InvalidProviderToken';
    const key = typeof parsedHead.kid === 'string' ? keys.get(parsedHead.kid) : undefined;
    if (parsedHead.alg !== 'ES256' || !key) return 'InvalidProviderToken';
    if (parsedClaims.iss !== teamId || typeof parsedClaims.iat !== 'number') return 'InvalidProviderToken';
    // JWS carries ES256 signatures as raw r||s, not DER.
    const valid = verify('sha256', Buffer.from(`${head}.${claims}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature, 'base64url'));
    return valid ? parsedClaims.iat : 'InvalidProviderToken';
  } catch {
    return 'InvalidProviderToken';
  }
}

// A local Web Push service (RFC 8030 over TLS, `POST /push/{id}`) that checks what a real one
// checks: the VAPID JWT (RFC 8292: ES256 signed by the key in `k`, its audience this service's
// origin, not expired, at most 24 hours ahead, with a subject), a subscription made with another
// key, the TTL header, the aes128gcm encoding and the 4,096-byte limit. It issues subscriptions
// (`POST /subscriptions`, or subscribe() in-process) and keeps their private keys, so it decrypts
// what arrives for them (RFC 8291); a test can hand it the key of a subscription it made itself.
// Failure rules and latency make it misbehave on purpose.
import { createECDH, createPublicKey, randomBytes, randomUUID, verify, type ECDH } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http2';
import ece from 'http_ece';
import { base64UrlJson, header, isObject, matchRule, startSimulator, type Answer, type RunningSimulator, type SimulatorOptions } from './common.ts';

export type WebPushSimulatorOptions = SimulatorOptions & {
  /** false: no decryption, even of the subscriptions it issued (benchmarks: the cost is the client's). */
  decrypt?: boolean;
};

/** A subscription as a browser's PushSubscription.toJSON() gives it. */
export type SubscriptionJson = { endpoint: string; expirationTime: null; keys: { p256dh: string; auth: string } };

export type WebPushReceived = {
  /** The subscription id: the endpoint's last path segment. */
  subscription: string;
  ttl?: string;
  urgency?: string;
  topic?: string;
  contentEncoding?: string;
  /** The VAPID JWT's claims and key, when it had one that parsed. */
  vapid?: { audience?: unknown; subject?: unknown; expiresAt?: unknown; publicKey: string };
  /** Bytes of the encrypted body. */
  bytes: number;
  /** The decrypted JSON, when the simulator holds the subscription's private key and decryption is on. */
  payload?: unknown;
  status: number;
  reason?: string;
  at: number;
};

export type WebPushSimulator = RunningSimulator<WebPushReceived> & {
  /** A new subscription, made with `applicationServerKey` when given (a push signed by another key is then refused). */
  subscribe(applicationServerKey?: string): SubscriptionJson;
  /** Hands the simulator a subscription made elsewhere: its id, receiving private key (base64url) and auth secret. */
  adopt(id: string, keys: { privateKey: string; auth: string; applicationServerKey?: string }): void;
};

type Held = { ecdh: ECDH; auth: Buffer; applicationServerKey?: string };

/** A push service's status for each reason, so that a failure rule only has to name the reason. */
const statusOfReason: Record<string, number> = {
  BadRequest: 400,
  MissingTTL: 400,
  UnsupportedEncoding: 400,
  Unauthorized: 401,
  BadJwtToken: 401,
  ExpiredJwtToken: 401,
  Forbidden: 403,
  VapidPkHashMismatch: 403,
  NotFound: 404,
  Gone: 410,
  PayloadTooLarge: 413,
  TooManyRequests: 429,
  InternalServerError: 500,
  BadGateway: 502,
  ServiceUnavailable: 503,
};

/** RFC 8291 §4: one record of at most 4,096 bytes. */
const bodyLimit = 4096;
/** RFC 8292 §2: a JWT may not expire more than 24 hours ahead. */
const maxJwtLifetimeSeconds = 24 * 3600;
const pushPath = /^\/push\/([A-Za-z0-9_-]+)$/;

export async function startWebPushSimulator(options: WebPushSimulatorOptions = {}): Promise<WebPushSimulator> {
  const held = new Map<string, Held>();
  const checkVapid = vapidChecker();
  let origin = '';
  const subscribe = (applicationServerKey?: string): SubscriptionJson => {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const auth = randomBytes(16);
    const id = randomBytes(16).toString('base64url');
    held.set(id, { ecdh, auth, applicationServerKey });
    return { endpoint: `${origin}/push/${id}`, expirationTime: null, keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') } };
  };
  const sim = await startSimulator<WebPushReceived>('Web Push', options, async (request, body, state) => {
    const path = request.url.split('?')[0];
    if (path === '/subscriptions' && request.method === 'POST') {
      const given = parseJson(body);
      const key = isObject(given) && typeof given.applicationServerKey === 'string' ? given.applicationServerKey : undefined;
      return { answer: { status: 201, body: subscribe(key) } };
    }
    const match = pushPath.exec(path);
    if (!match) return undefined;
    const received = receivedPush(match[1], request.headers, body);
    if (request.method !== 'POST') return refuse(received, 'BadRequest', { status: 405 });
    const vapid = checkVapid(header(request.headers, 'authorization'), `https://${header(request.headers, 'host') ?? header(request.headers, ':authority')}`);
    if (typeof vapid === 'string') return refuse(received, vapid);
    received.vapid = vapid;
    const subscription = held.get(received.subscription);
    if (subscription?.applicationServerKey && subscription.applicationServerKey !== vapid.publicKey) return refuse(received, 'VapidPkHashMismatch');
    const rule = matchRule(state.rules, received.subscription);
    if (rule) return refuse(received, rule.reason, rule);
    if (received.ttl === undefined || !/^\d+$/.test(received.ttl)) return refuse(received, 'MissingTTL');
    if (body.length > bodyLimit) return refuse(received, 'PayloadTooLarge');
    if (body.length > 0 && received.contentEncoding !== 'aes128gcm') return refuse(received, 'UnsupportedEncoding');
    if (subscription && body.length > 0 && options.decrypt !== false) {
      try {
        received.payload = parseJson(decryptWebPush(body, subscription.ecdh, subscription.auth));
      } catch {
        return refuse(received, 'BadRequest', { message: 'the payload does not decrypt with the subscription keys' });
      }
    }
    return { answer: { status: 201, headers: { location: `${origin}/message/${randomUUID()}` } }, received };
  });
  origin = sim.url;
  return {
    ...sim,
    subscribe,
    adopt: (id, keys) => {
      const ecdh = createECDH('prime256v1');
      ecdh.setPrivateKey(Buffer.from(keys.privateKey, 'base64url'));
      held.set(id, { ecdh, auth: Buffer.from(keys.auth, 'base64url'), applicationServerKey: keys.applicationServerKey });
    },
  };
}

/** The plaintext of an aes128gcm Web Push body (RFC 8291), for the subscription's private key and auth secret. */
export function decryptWebPush(body: Buffer, privateKey: ECDH, auth: Buffer): Buffer {
  return ece.decrypt(body, { version: 'aes128gcm', privateKey, authSecret: auth.toString('base64url') });
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

function receivedPush(subscription: string, headers: IncomingHttpHeaders, body: Buffer): WebPushReceived {
  return {
    subscription,
    ttl: header(headers, 'ttl'),
    urgency: header(headers, 'urgency'),
    topic: header(headers, 'topic'),
    contentEncoding: header(headers, 'content-encoding'),
    bytes: body.length,
    status: 201,
    at: Date.now(),
  };
}

function refuse(received: WebPushReceived, reason: string, extra: { status?: number; retryAfter?: number; message?: string } = {}) {
  const status = extra.status ?? statusOfReason[reason] ?? 400;
  received.status = status;
  received.reason = reason;
  const answer: Answer = { status, body: { reason, ...(extra.message ? { message: extra.message } : {}) } };
  if (extra.retryAfter !== undefined) answer.headers = { 'retry-after': String(extra.retryAfter) };
  return { answer, received };
}

type Vapid = NonNullable<WebPushReceived['vapid']>;

/**
 * Checks an `Authorization: vapid t=<JWT>, k=<key>` header for `audience`: the vapid or the reason
 * it is refused. A sender reuses one JWT for hours; a verified one is remembered until it expires,
 * so that the simulator's ECDSA verifies never become a benchmark's bottleneck.
 */
function vapidChecker(): (authorization: string | undefined, audience: string) => Vapid | string {
  const verified = new Map<string, Vapid>();
  return (authorization, audience) => {
    if (!authorization) return 'Unauthorized';
    const match = /^vapid\s+(.*)$/i.exec(authorization);
    if (!match) return 'Unauthorized';
    const fields = Object.fromEntries(match[1].split(',').map((part) => part.trim().split('=').map((side) => side.trim())));
    const { t: jwt, k: publicKey } = fields as { t?: string; k?: string };
    if (!jwt || !publicKey) return 'Unauthorized';
    let vapid = verified.get(authorization);
    if (!vapid) {
      const checked = verifyVapidJwt(jwt, publicKey);
      if (typeof checked === 'string') return checked;
      vapid = checked;
      if (verified.size >= 1000) verified.clear();
      verified.set(authorization, vapid);
    }
    const now = Date.now() / 1000;
    if (vapid.audience !== audience) return 'BadJwtToken';
    if (typeof vapid.expiresAt !== 'number' || vapid.expiresAt <= now) return 'ExpiredJwtToken';
    if (vapid.expiresAt > now + maxJwtLifetimeSeconds + 60) return 'BadJwtToken';
    if (typeof vapid.subject !== 'string' || !/^(mailto:|https:)/.test(vapid.subject)) return 'BadJwtToken';
    return vapid;
  };
}

function verifyVapidJwt(jwt: string, publicKey: string): Vapid | string {
  const [head, claims, signature, ...rest] = jwt.split('.');
  if (signature === undefined || rest.length > 0) return 'BadJwtToken';
  try {
    const parsedHead = base64UrlJson(head);
    const parsedClaims = base64UrlJson(claims);
    if (!isObject(parsedHead) || !isObject(parsedClaims) || parsedHead.alg !== 'ES256') return 'BadJwtToken';
    const point = Buffer.from(publicKey, 'base64url');
    if (point.length !== 65 || point[0] !== 4) return 'BadJwtToken';
    const key = createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') },
      format: 'jwk',
    });
    const valid = verify('sha256', Buffer.from(`${head}.${claims}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature, 'base64url'));
    if (!valid) return 'BadJwtToken';
    return { audience: parsedClaims.aud, subject: parsedClaims.sub, expiresAt: parsedClaims.exp, publicKey };
  } catch {
    return 'BadJwtToken';
  }
}

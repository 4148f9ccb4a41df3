// A local FCM HTTP v1 (HTTP/2 over TLS): `POST /v1/projects/{project}/messages:send` behind OAuth
// access tokens that its own `POST /token` issues (the JWT-bearer grant a service account uses), with
// Google's message validation and error shapes. Failure rules and latency make it misbehave on purpose.
import { createHmac, createPublicKey, randomBytes, timingSafeEqual, verify, type KeyObject } from 'node:crypto';
import {
  base64UrlJson,
  header,
  isObject,
  matchRule,
  startSimulator,
  type Answer,
  type FailureRule,
  type RunningSimulator,
  type SimulatorOptions,
} from './common.ts';

export type FcmSimulatorOptions = SimulatorOptions & {
  /**
   * Service accounts whose key may obtain a token: client_email → public key PEM. Unset: any
   * well-formed assertion gets one (its signature is not checked).
   */
  serviceAccounts?: Record<string, string>;
  /** How an access token the simulator did not issue is refused. Default UNAUTHENTICATED. */
  unknownTokenError?: 'UNAUTHENTICATED' | 'THIRD_PARTY_AUTH_ERROR';
};

export type FcmReceived = {
  projectId: string;
  /** `message.token` as sent (undefined when missing). */
  token?: string;
  /** The whole `message` object as it came over the wire (snake_case, ttl as "Ns"). */
  message: unknown;
  validateOnly: boolean;
  status: number;
  /** The FCM error code (or the status name when Google gives none). */
  errorCode?: string;
  at: number;
};

export type FcmSimulator = RunningSimulator<FcmReceived> & {
  /** Access tokens issued by `/token` since the start. */
  tokensIssued(): number;
};

type GoogleError = { code: number; status: string; message: string; fcm: boolean };

/** Google's answer for each FCM error code; `fcm: false` are plain Google API errors with no FcmError detail. */
const errors: Record<string, GoogleError> = {
  UNSPECIFIED_ERROR: { code: 500, status: 'INTERNAL', message: 'Unspecified error.', fcm: true },
  INVALID_ARGUMENT: { code: 400, status: 'INVALID_ARGUMENT', message: 'The registration token is not a valid FCM registration token', fcm: true },
  UNREGISTERED: { code: 404, status: 'NOT_FOUND', message: 'Requested entity was not found.', fcm: true },
  SENDER_ID_MISMATCH: { code: 403, status: 'PERMISSION_DENIED', message: 'SenderId mismatch', fcm: true },
  QUOTA_EXCEEDED: { code: 429, status: 'RESOURCE_EXHAUSTED', message: 'Quota exceeded for quota metric \'Send requests\'.', fcm: true },
  UNAVAILABLE: { code: 503, status: 'UNAVAILABLE', message: 'The service is currently unavailable.', fcm: true },
  INTERNAL: { code: 500, status: 'INTERNAL', message: 'Internal error encountered.', fcm: true },
  THIRD_PARTY_AUTH_ERROR: { code: 401, status: 'UNAUTHENTICATED', message: 'Auth error from APNS or Web Push Service', fcm: true },
  UNAUTHENTICATED: {
    code: 401,
    status: 'UNAUTHENTICATED',
    message:
      'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
    fcm: false,
  },
  PERMISSION_DENIED: { code: 403, status: 'PERMISSION_DENIED', message: "Permission 'cloudmessaging.messages.create' denied.", fcm: false },
};

const sendPath = /^\/v1\/projects\/([^/]+)\/messages:send$/;
const tokenLifetimeSeconds = 3600;
const payloadLimit = 4096;
const messageFields = new Set(['name', 'data', 'notification', 'android', 'webpush', 'apns', 'fcm_options', 'token', 'topic', 'condition']);
const notificationFields = new Set(['title', 'body', 'image']);
const androidFields = new Set([
  'collapse_key',
  'priority',
  'ttl',
  'restricted_package_name',
  'data',
  'notification',
  'fcm_options',
  'direct_boot_ok',
  'bandwidth_constrained_ok',
  'restricted_satellite_ok',
]);
const androidNotificationFields = new Set([
  'title',
  'body',
  'icon',
  'color',
  'sound',
  'tag',
  'click_action',
  'body_loc_key',
  'body_loc_args',
  'title_loc_key',
  'title_loc_args',
  'channel_id',
  'ticker',
  'sticky',
  'event_time',
  'local_only',
  'notification_priority',
  'default_sound',
  'default_vibrate_timings',
  'default_light_settings',
  'vibrate_timings',
  'visibility',
  'notification_count',
  'light_settings',
  'image',
  'bypass_proxy_notification',
  'proxy',
]);

type Violation = { field: string; description: string };

export async function startFcmSimulator(options: FcmSimulatorOptions = {}): Promise<FcmSimulator> {
  const tokens = accessTokens(options.serviceAccounts ?? {});
  const running = await startSimulator<FcmReceived>('FCM', options, async (request, body, state) => {
    const path = request.url.split('?')[0];
    if (path === '/token' && request.method === 'POST') return { answer: tokens.issue(body) };
    const match = sendPath.exec(path);
    if (!match) return undefined;
    const projectId = decodeURIComponent(match[1]);
    if (request.method !== 'POST') return undefined;
    const received: FcmReceived = { projectId, message: undefined, validateOnly: false, status: 200, at: Date.now() };
    const tokenProject = tokens.check(header(request.headers, 'authorization'));
    if (tokenProject === undefined) return refuse(received, options.unknownTokenError ?? 'UNAUTHENTICATED');
    if (tokenProject !== '' && tokenProject !== projectId) {
      return refuse(received, 'PERMISSION_DENIED', { message: `Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/${projectId}' (or it may not exist).` });
    }
    return answerMessage(received, body, state.rules);
  });
  return Object.assign(running, { tokensIssued: tokens.issued });
}

/** The answer to an authorised send: Google's validation, then the failure rules. */
function answerMessage(received: FcmReceived, body: Buffer, rules: FailureRule[]) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return refuse(received, 'INVALID_ARGUMENT', { message: 'Invalid JSON payload received.' });
  }
  if (isObject(parsed)) {
    received.message = parsed.message;
    received.validateOnly = parsed.validate_only === true;
    if (isObject(parsed.message) && typeof parsed.message.token === 'string') received.token = parsed.message.token;
  }
  const violation = validate(parsed);
  if (violation) return refuse(received, 'INVALID_ARGUMENT', { violation });
  const token = received.token!;
  if (token.trim() === '' || /\s/.test(token)) {
    return refuse(received, 'INVALID_ARGUMENT', { violation: { field: 'message.token', description: errors.INVALID_ARGUMENT.message } });
  }
  const rule = matchRule(rules, token);
  if (rule) {
    const violation = rule.reason === 'INVALID_ARGUMENT' && rule.message === undefined ? { field: 'message.token', description: errors.INVALID_ARGUMENT.message } : undefined;
    return refuse(received, rule.reason, { ...rule, violation });
  }
  const id = `0:${Date.now()}${randomBytes(8).toString('hex')}`;
  return { answer: { status: 200, body: { name: `projects/${received.projectId}/messages/${id}` } }, received };
}

/** Google's error answer for an FCM error code; the send is recorded with it. */
function refuse(
  received: FcmReceived,
  errorCode: string,
  extra: { status?: number; retryAfter?: number; message?: string; violation?: Violation } = {},
): { answer: Answer; received: FcmReceived } {
  const known = errors[errorCode] ?? errors.UNSPECIFIED_ERROR;
  const code = extra.status ?? known.code;
  received.status = code;
  received.errorCode = errorCode;
  const details: unknown[] = [];
  if (known.fcm) details.push({ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode });
  if (extra.violation) {
    details.push({ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [extra.violation] });
  }
  const answer: Answer = {
    status: code,
    body: {
      error: {
        code,
        message: extra.message ?? extra.violation?.description ?? known.message,
        status: known.status,
        ...(details.length > 0 ? { details } : {}),
      },
    },
  };
  if (extra.retryAfter !== undefined) answer.headers = { 'retry-after': String(extra.retryAfter) };
  return { answer, received };
}

/**
 * The OAuth side: `issue` answers `POST /token` (the JWT-bearer grant, checked against
 * `serviceAccounts` when any are given); `check` reads an access token it issued.
 */
function accessTokens(serviceAccounts: Record<string, string>) {
  const accounts = new Map<string, KeyObject>(Object.entries(serviceAccounts).map(([email, pem]) => [email, createPublicKey(pem)]));
  // Access tokens are self-verifying (HMAC), so the simulator keeps no per-token state.
  const secret = randomBytes(32);
  const sign = (data: string) => createHmac('sha256', secret).update(data).digest('base64url');
  let issued = 0;

  function issue(body: Buffer): Answer {
    const form = new URLSearchParams(body.toString('utf8'));
    const assertion = form.get('assertion');
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer' || !assertion) {
      return { status: 400, body: { error: 'unsupported_grant_type', error_description: 'Invalid grant_type' } };
    }
    const [head, claims, signature] = assertion.split('.');
    const email = assertionIssuer(head, claims);
    if (email === undefined) return { status: 400, body: { error: 'invalid_grant', error_description: 'Invalid JWT.' } };
    if (accounts.size > 0) {
      const key = accounts.get(email);
      const valid =
        key !== undefined && signature !== undefined && verify('sha256', Buffer.from(`${head}.${claims}`), key, Buffer.from(signature, 'base64url'));
      if (!valid) return { status: 400, body: { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' } };
    }
    // A service account belongs to the project named in its e-mail; its tokens may only send there.
    const project = /@([^.]+)\.iam\.gserviceaccount\.com$/.exec(email)?.[1];
    issued += 1;
    const grant = Buffer.from(JSON.stringify({ sub: email, project, exp: Math.floor(Date.now() / 1000) + tokenLifetimeSeconds })).toString('base64url');
    return {
      status: 200,
      body: { access_token: `sim.${grant}.${sign(grant)}`, expires_in: tokenLifetimeSeconds, token_type: 'Bearer' },
    };
  }

  /** The project the token may send to ('' when unbound), or undefined when the token is not ours or expired. */
  function check(authorization: string | undefined): string | undefined {
    const match = /^Bearer sim\.([\w-]+)\.([\w-]+)$/i.exec(authorization ?? '');
    if (!match) return undefined;
    const expected = Buffer.from(sign(match[1]));
    const given = Buffer.from(match[2]);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    const grant = base64UrlJson(match[1]) as { project?: string; exp: number };
    if (grant.exp * 1000 < Date.now()) return undefined;
    return grant.project ?? '';
  }

  return { issue, check, issued: () => issued };
}

/** The service account an unexpired RS256 assertion is from; undefined when it is malformed. */
function assertionIssuer(head: string, claims: string): string | undefined {
  try {
    const parsedHead = base64UrlJson(head);
    const parsedClaims = base64UrlJson(claims);
    if (!isObject(parsedHead) || !isObject(parsedClaims) || parsedHead.alg !== 'RS256') return undefined;
    const email = parsedClaims.iss;
    if (typeof email !== 'string' || typeof parsedClaims.exp !== 'number' || parsedClaims.exp * 1000 < Date.now()) return undefined;
    return email;
  } catch {
    return undefined;
  }
}

/** Google's checks on a send request, as far as Herald's messages can break them. */
function validate(body: unknown): Violation | undefined {
  if (!isObject(body) || !isObject(body.message)) return { field: 'message', description: 'Request contains an invalid argument.' };
  const message = body.message;
  const unknown = unknownField(message, messageFields, 'message');
  if (unknown) return unknown;
  const targets = ['token', 'topic', 'condition'].filter((key) => message[key] !== undefined);
  if (targets.length === 0) return { field: 'message', description: 'Recipient of the message is not set.' };
  if (targets.length > 1) return { field: 'message', description: 'Exactly one of token, topic or condition must be set.' };
  if (message.token !== undefined && typeof message.token !== 'string') return invalidValue('message.token', 'TYPE_STRING', message.token);
  const data = stringMap(message.data, 'message.data');
  if (data) return data;
  if (message.notification !== undefined) {
    if (!isObject(message.notification)) return invalidValue('message.notification', 'type.googleapis.com/google.firebase.fcm.v1.Notification', message.notification);
    const field = unknownField(message.notification, notificationFields, 'message.notification');
    if (field) return field;
  }
  if (message.android !== undefined) {
    const android = message.android;
    if (!isObject(android)) return invalidValue('message.android', 'type.googleapis.com/google.firebase.fcm.v1.AndroidConfig', android);
    const field = unknownField(android, androidFields, 'message.android');
    if (field) return field;
    if (android.priority !== undefined && !(typeof android.priority === 'string' && /^(normal|high)$/i.test(android.priority))) {
      return invalidValue('message.android.priority', 'type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority', android.priority);
    }
    if (android.ttl !== undefined && !(typeof android.ttl === 'string' && /^\d+(\.\d{1,9})?s$/.test(android.ttl))) {
      return invalidValue('message.android.ttl', 'type.googleapis.com/google.protobuf.Duration', android.ttl);
    }
    if (android.collapse_key !== undefined && typeof android.collapse_key !== 'string') {
      return invalidValue('message.android.collapse_key', 'TYPE_STRING', android.collapse_key);
    }
    const androidData = stringMap(android.data, 'message.android.data');
    if (androidData) return androidData;
    if (android.notification !== undefined) {
      const notification = android.notification;
      if (!isObject(notification)) return invalidValue('message.android.notification', 'type.googleapis.com/google.firebase.fcm.v1.AndroidNotification', notification);
      const unknownKey = unknownField(notification, androidNotificationFields, 'message.android.notification');
      if (unknownKey) return unknownKey;
      const count = notification.notification_count;
      // A protobuf int32, as FCM parses it: a number past its range is refused like a non-integer.
      if (count !== undefined && !(Number.isInteger(count) && Math.abs(count as number) <= 2 ** 31 - 1)) {
        return invalidValue('message.android.notification.notification_count', 'TYPE_INT32', notification.notification_count);
      }
    }
  }
  const size = Buffer.byteLength(JSON.stringify({ data: message.data, notification: message.notification }));
  if (size > payloadLimit) return { field: 'message', description: 'Android message is too big' };
  return undefined;
}

function unknownField(object: Record<string, unknown>, known: Set<string>, at: string): Violation | undefined {
  const key = Object.keys(object).find((name) => !known.has(name));
  return key === undefined
    ? undefined
    : { field: at, description: `Invalid JSON payload received. Unknown name "${key}" at '${at}': Cannot find field.` };
}

function stringMap(value: unknown, at: string): Violation | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) return invalidValue(at, 'TYPE_MAP', value);
  const entries = Object.entries(value);
  const index = entries.findIndex(([, entry]) => typeof entry !== 'string');
  return index === -1 ? undefined : invalidValue(`${at}[${index}].value`, 'TYPE_STRING', entries[index][1]);
}

function invalidValue(field: string, type: string, value: unknown): Violation {
  return { field, description: `Invalid value at '${field}' (${type}), ${JSON.stringify(value)}` };
}

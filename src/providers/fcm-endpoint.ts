// The one seam into firebase-admin's HTTP/2 sessions. The SDK hard-codes fcm.googleapis.com and
// opens its sessions with `http2.connect` and no agent option (firebase-admin-node#2980), so
// http2.connect itself is wrapped (RECIPES.md), for that authority only and only for the sessions
// opened inside a provider's `route(...)`: sendEach opens its session synchronously, so an
// AsyncLocalStorage scopes the route to that provider's calls, and providers with different
// settings share a process. A route may point the sessions at another host (the simulator; this
// keeps the SDK's real code path: auth, error parsing) and lend them from a provider's kept
// sessions (fcm-sessions.ts). The wrapper is installed once.
import { AsyncLocalStorage } from 'node:async_hooks';
import { request as httpsRequest } from 'node:https';
import type { ClientHttp2Session, OutgoingHttpHeaders, SecureClientSessionOptions } from 'node:http2';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { createSign } from 'node:crypto';
import type { FcmCredentials } from '../domain/credentials.ts';
import type { FcmSessions } from './fcm-sessions.ts';
import { parseJsonOrUndefined, socketHost } from './support.ts';

const fcmAuthority = 'https://fcm.googleapis.com';

type Connect = (authority: string | URL, ...rest: unknown[]) => ClientHttp2Session;
type Target = { host: string; port: number; ca?: string };
/** What a provider's calls do with the FCM sessions they open. */
type Scope = { target?: Target; sessions?: FcmSessions };
type Route = { storage: AsyncLocalStorage<Scope>; original: Connect };
// Kept on the CommonJS http2 object itself (the very one firebase-admin's `require('http2')` holds),
// so that a second copy of this module (jest loads one per test file) finds and reuses it.
const routeKey = Symbol.for('herald.fcm-endpoint');
const http2Module = createRequire(import.meta.url)('node:http2') as { connect: Connect; [routeKey]?: Route };

/** Runs `fn` with the FCM sessions it opens routed as the provider says. */
export type FcmRoute = <T>(fn: () => T) => T;

/**
 * The route of one provider's calls: to `endpoint` (trusting `ca`) when given, Google otherwise;
 * sessions lent from `sessions` when given. Installs the wrapper once; idempotent.
 */
export function fcmRoute(options: { endpoint?: string; ca?: string; sessions?: FcmSessions }): FcmRoute {
  const url = options.endpoint ? new URL(options.endpoint) : undefined;
  const scope: Scope = {
    target: url && { host: socketHost(url), port: Number(url.port || 443), ca: options.ca },
    sessions: options.sessions,
  };
  const { storage } = installRoute();
  return (fn) => storage.run(scope, fn);
}

function installRoute(): Route {
  const existing = http2Module[routeKey];
  if (existing) return existing;
  const original = http2Module.connect;
  const route: Route = { storage: new AsyncLocalStorage(), original };
  http2Module[routeKey] = route;
  http2Module.connect = function connect(this: unknown, authority: string | URL, ...rest: unknown[]): ClientHttp2Session {
    const scope = route.storage.getStore();
    if (!scope || originOf(authority) !== fcmAuthority) return original.call(this, authority, ...rest);
    // A session lent again has connected long ago: a connect listener would never be called.
    const pooled = scope.sessions && typeof rest[rest.length - 1] !== 'function' ? scope.sessions : undefined;
    const open = () => (scope.target ? connectTo(scope.target, original, authority, rest) : original.call(this, authority, ...rest));
    return pooled ? pooled.lend(open) : open();
  };
  return route;
}

/** An FCM session whose connection goes to `target` instead. */
function connectTo(target: Target, original: Connect, authority: string | URL, rest: unknown[]): ClientHttp2Session {
  const listener = typeof rest[rest.length - 1] === 'function' ? rest[rest.length - 1] : undefined;
  const options = (rest[0] ?? {}) as SecureClientSessionOptions;
  const session = original.call(
    http2Module,
    authority,
    {
      ...options,
      createConnection: () =>
        tlsConnect({
          host: target.host,
          port: target.port,
          // SNI cannot carry an IP address; the certificate is then checked against the IP.
          ...(isIP(target.host) ? {} : { servername: target.host }),
          ...(target.ca ? { ca: target.ca } : {}),
          ALPNProtocols: ['h2'],
        }),
    },
    ...(listener ? [listener] : []),
  );
  // The SDK sends `:scheme: https:` (a URL's protocol); Google tolerates it, a Node HTTP/2 server
  // resets the stream with NGHTTP2_PROTOCOL_ERROR.
  const request = session.request;
  session.request = function (this: ClientHttp2Session, headers?: OutgoingHttpHeaders, ...more: unknown[]) {
    const fixed = headers?.[':scheme'] === 'https:' ? { ...headers, ':scheme': 'https' } : headers;
    return (request as (...args: unknown[]) => ReturnType<ClientHttp2Session['request']>).call(this, fixed, ...more);
  } as ClientHttp2Session['request'];
  return session;
}

function originOf(authority: unknown): string | undefined {
  try {
    if (typeof authority === 'string' || authority instanceof URL) return new URL(authority).origin;
    const { protocol, host, hostname, port } = authority as { protocol?: string; host?: string; hostname?: string; port?: string | number };
    return new URL(`${protocol ?? 'https:'}//${host ?? `${hostname}${port ? `:${port}` : ''}`}`).origin;
  } catch {
    return undefined;
  }
}

/** Removes the wrapper (tests). */
export function resetFcmEndpoint(): void {
  const route = http2Module[routeKey];
  if (!route) return;
  http2Module.connect = route.original;
  delete http2Module[routeKey];
}

/**
 * A firebase-admin credential that obtains its access token from the endpoint's `/token`.
 * `cert(serviceAccount)` cannot be used there: google-auth-library always asks
 * oauth2.googleapis.com, ignoring both the http agent and the key file's token_uri (RECIPES.md).
 * The request is the one Google's token endpoint takes: a JWT-bearer grant signed with the
 * service account's key, so a wrong key fails as it would in production.
 */
export function endpointCredential(
  serviceAccount: FcmCredentials['serviceAccount'],
  endpoint: string,
  ca?: string,
): { getAccessToken(): Promise<{ access_token: string; expires_in: number }> } {
  const tokenUrl = new URL('/token', endpoint);
  return {
    async getAccessToken() {
      const now = Math.floor(Date.now() / 1000);
      const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const unsigned = `${encode({ alg: 'RS256', typ: 'JWT' })}.${encode({
        iss: serviceAccount.client_email,
        scope: 'https://www.googleapis.com/auth/firebase.messaging',
        aud: tokenUrl.href,
        iat: now,
        exp: now + 3600,
      })}`;
      const signature = createSign('RSA-SHA256').update(unsigned).sign(serviceAccount.private_key, 'base64url');
      const form = new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
        assertion: `${unsigned}.${signature}`,
      }).toString();
      const { status, body } = await post(tokenUrl, form, ca);
      const answer = (parseJsonOrUndefined(body) ?? {}) as { access_token?: string; expires_in?: number; error?: string; error_description?: string };
      if (status !== 200 || typeof answer.access_token !== 'string') {
        // firebase-admin recognises `invalid_grant` in the message (revoked or wrong key).
        throw Object.assign(new Error(`${answer.error ?? `HTTP ${status}`}: ${answer.error_description ?? body}`), { status });
      }
      return { access_token: answer.access_token, expires_in: answer.expires_in ?? 3600 };
    },
  };
}

function post(url: URL, form: string, ca?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpsRequest(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(form) },
        ...(ca ? { ca } : {}),
        timeout: 10_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error('token request timed out')));
    request.on('error', reject);
    request.end(form);
  });
}

// OAuth access tokens for FCM's send, cached until they near their expiry. From Google, through
// google-auth-library (the service account's JWT-bearer grant, signed and refreshed by the library);
// from a simulator's `/token`, through endpointCredential below: google-auth-library always asks
// oauth2.googleapis.com, whatever the key file's token_uri says.
import { request as httpsRequest } from 'node:https';
import { createPrivateKey, createSign } from 'node:crypto';
import { JWT } from 'google-auth-library';
import type { FcmCredentials } from '../domain/credentials.ts';
import { parseJsonOrUndefined } from './support.ts';

const scope = 'https://www.googleapis.com/auth/firebase.messaging';
/** A token this close to its expiry is replaced before it is used. */
const refreshBeforeMs = 5 * 60_000;

type Grant = { access_token: string; expires_in: number };

/** An access token for each call: the one obtained before while it lasts, one request at a time. */
export type AccessTokens = () => Promise<string>;

export function cachedTokens(obtain: () => Promise<Grant>, now = Date.now): AccessTokens {
  let current: { token: string; expiresAt: number } | undefined;
  let pending: Promise<string> | undefined;
  return () => {
    if (current && current.expiresAt - refreshBeforeMs > now()) return Promise.resolve(current.token);
    pending ??= obtain()
      .then((grant) => {
        current = { token: grant.access_token, expiresAt: now() + grant.expires_in * 1000 };
        return grant.access_token;
      })
      .finally(() => (pending = undefined));
    return pending;
  };
}

/**
 * Tokens for the service account: from `endpoint`'s `/token` (trusting `ca`) when given, Google's
 * otherwise. Undefined when the account cannot sign anything (no key, or not a key), as
 * firebase-admin's cert() refused it.
 */
export function fcmAccessTokens(serviceAccount: FcmCredentials['serviceAccount'], endpoint?: string, ca?: string): AccessTokens | undefined {
  if (endpoint) {
    const credential = endpointCredential(serviceAccount, endpoint, ca);
    return cachedTokens(() => credential.getAccessToken());
  }
  const { client_email: email, private_key: key, project_id: projectId } = serviceAccount;
  if (![email, key, projectId].every((field) => typeof field === 'string' && field !== '')) return undefined;
  try {
    createPrivateKey(key);
  } catch {
    return undefined;
  }
  const jwt = new JWT({ email, key, scopes: [scope] });
  return cachedTokens(async () => {
    const granted = await jwt.authorize();
    if (!granted.access_token) throw new Error('Google granted no access token');
    const expiresIn = granted.expiry_date ? Math.floor((granted.expiry_date - Date.now()) / 1000) : 3600;
    return { access_token: granted.access_token, expires_in: expiresIn };
  });
}

/**
 * An access token from the endpoint's `/token`: the request Google's token endpoint takes, a
 * JWT-bearer grant signed with the service account's key, so a wrong key fails as it would there.
 */
export function endpointCredential(
  serviceAccount: FcmCredentials['serviceAccount'],
  endpoint: string,
  ca?: string,
): { getAccessToken(): Promise<Grant> } {
  const tokenUrl = new URL('/token', endpoint);
  return {
    async getAccessToken() {
      const now = Math.floor(Date.now() / 1000);
      const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const unsigned = `${encode({ alg: 'RS256', typ: 'JWT' })}.${encode({
        iss: serviceAccount.client_email,
        scope,
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

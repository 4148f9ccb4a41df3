// Applications and their tokens: issued and revoked by the CLI, checked on every request.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { ApiToken, Application } from '../db/entities.ts';
import { LRUCache } from 'lru-cache';
import { findApplicationOverview, findToken, writeAllowedOrigins, writeTokenLastUse, type CredentialHealthRow } from '../db/sql/tokens.ts';
import { credentialHealth } from './credentials.ts';
import { unauthenticated } from './errors.ts';
import { isUuid } from './ids.ts';
import { providerOf, type Platform } from './platforms.ts';
import { effectiveSendPolicy, type SendPolicy } from './rate-limits.ts';
import { generateToken, grants, hashSecret, isAbility, parseToken, secretMatches } from './tokens.ts';
import { allowedOriginProblem } from './web-push.ts';

export type Principal = {
  applicationId: string;
  tokenId: string;
  abilities: readonly string[];
  /** When the token was last used, as read with it: recordTokenUse writes only when it is a minute old. */
  lastUsedAt: Date | null;
  /** The application's own send policy, read with the token; null parts: the service default. */
  sendPolicy: { quota: number | null; windowSeconds: number | null };
  /** The origins whose pages may call the app-token operations from a browser (http/cors.ts), read with the token. */
  allowedOrigins: readonly string[];
};

/**
 * Replaces the origins whose pages may call the application from a browser (http/cors.ts), each
 * checked (domain/web-push.ts allowedOriginProblem); answers them, blanks and repeats left out.
 */
export async function setAllowedOrigins(em: EntityManager, applicationId: string, given: readonly string[]): Promise<string[]> {
  const origins = [...new Set(given.map((origin) => origin.trim()).filter((origin) => origin !== ''))];
  const problems = origins.map(allowedOriginProblem).filter((problem) => problem !== null);
  if (problems.length > 0) throw new Error(problems.join('\n'));
  await writeAllowedOrigins(em, applicationId, origins);
  return origins;
}

export async function createApplication(em: EntityManager, name: string): Promise<Application> {
  const application = em.create(Application, { name });
  await em.flush();
  return application;
}

export async function listApplications(em: EntityManager): Promise<Application[]> {
  return em.find(Application, {}, { orderBy: { createdAt: 'asc' } });
}

export async function findApplication(em: EntityManager, id: string): Promise<Application | null> {
  return isUuid(id) ? em.findOne(Application, { id }) : null;
}

export async function createToken(
  em: EntityManager,
  input: { applicationId: string; name: string; abilities: string[] },
): Promise<{ token: ApiToken; plaintext: string }> {
  const unknown = input.abilities.filter((ability) => !isAbility(ability));
  if (unknown.length > 0) throw new Error(`Unknown abilities: ${unknown.join(', ')}`);
  if (input.abilities.length === 0) throw new Error('A token needs at least one ability.');
  const generated = generateToken();
  const token = em.create(ApiToken, {
    applicationId: input.applicationId,
    name: input.name,
    publicId: generated.publicId,
    secretHash: generated.secretHash,
    abilities: [...new Set(input.abilities)],
  });
  await em.flush();
  return { token, plaintext: generated.plaintext };
}

export async function listTokens(em: EntityManager, applicationId?: string): Promise<ApiToken[]> {
  return em.find(ApiToken, applicationId ? { applicationId } : {}, { orderBy: { createdAt: 'asc' } });
}

/** Returns false when no such token exists. Revoking twice keeps the first revocation time. */
export async function revokeToken(em: EntityManager, tokenId: string): Promise<boolean> {
  if (!isUuid(tokenId)) return false;
  const token = await em.findOne(ApiToken, { id: tokenId });
  if (!token) return false;
  token.revokedAt ??= new Date();
  await em.flush();
  return true;
}

// Compared against when the public id is unknown (no token's secret hashes to it), so that an
// unknown public id costs the same as a wrong secret.
const decoyHash = hashSecret('decoy');

/**
 * How long an API process trusts a token it has read (and its application's send policy): a
 * revocation or a new policy takes effect within this. It saves the hot paths a round trip.
 */
export const tokenCacheMs = 5_000;

type KnownToken = { secretHash: string; revoked: boolean; principal: Principal };

export type Authenticator = (em: EntityManager, bearer: string) => Promise<Principal | null>;

/**
 * Resolves a bearer token to its application, or null when it is malformed, unknown, wrong or
 * revoked. A token read from the database is kept for `cacheMs` (0: read on every request); the
 * secret is checked on every request. Unknown public ids are not kept: they cannot fill the cache.
 */
export function createAuthenticator(cacheMs: number): Authenticator {
  const known = cacheMs > 0 ? new LRUCache<string, KnownToken>({ max: 10_000, ttl: cacheMs }) : null;
  return async (em, bearer) => {
    const parts = parseToken(bearer);
    if (!parts) return null;
    let token = known?.get(parts.publicId);
    if (!token) {
      const row = await findToken(em, parts.publicId);
      token = row && {
        secretHash: row.secretHash,
        revoked: row.revokedAt !== null,
        principal: {
          applicationId: row.applicationId,
          tokenId: row.tokenId,
          abilities: row.abilities,
          lastUsedAt: row.lastUsedAt,
          sendPolicy: { quota: row.sendQuota, windowSeconds: row.sendWindowSeconds },
          allowedOrigins: row.allowedOrigins,
        },
      };
      if (token) known?.set(parts.publicId, token);
    }
    const matches = secretMatches(parts.secret, token?.secretHash ?? decoyHash);
    if (!token || !matches || token.revoked) return null;
    return token.principal;
  };
}

const lastUseGranularityMs = 60_000;

/**
 * A token's last use is kept to the minute: a request writes it only when the value read with the
 * token is a minute old, so a busy token costs one cheap update a minute, not one per request. The
 * condition in SQL (on the database's clock) makes concurrent requests write it once between them.
 */
export async function recordTokenUse(em: EntityManager, principal: Principal, now = new Date()): Promise<void> {
  if (principal.lastUsedAt && now.getTime() - principal.lastUsedAt.getTime() < lastUseGranularityMs) return;
  // The principal is shared by the requests a cached token serves: the next ones need not write.
  principal.lastUsedAt = now;
  await writeTokenLastUse(em, principal.tokenId);
}

type Schemas = components['schemas'];
export type ApplicationView = Schemas['Application'];
type ProviderStatusView = Schemas['ProviderStatus'];

/** A platform's credentials and their health (credentialHealth), as `GET /api/v1/app` shows them. */
function providerStatus(platform: Platform, credential: CredentialHealthRow | undefined): ProviderStatusView {
  const provider = providerOf[platform];
  const publicKey = platform === 'web' ? { public_key: credential?.publicKey ?? null } : {};
  if (!credential) return { provider, ...publicKey, status: 'not_configured', since: null, reason: null, updated_at: null };
  const { status, since, reason } = credentialHealth(credential);
  return { provider, ...publicKey, status, since: since?.toISOString() ?? null, reason, updated_at: credential.updatedAt.toISOString() };
}

/**
 * The application a token belongs to, as that token sees it: what the token may do, and what
 * concerns what it may do. The send policy in force (its own or the service default) only to a
 * token that sends; whether each platform can push only to one that sends or reads notifications.
 * A mobile app's token, which can be extracted from the app, learns neither the quota a flood
 * would have to stay under nor which platform is failing.
 */
export async function describeApplication(em: EntityManager, principal: Principal, defaultSendPolicy: SendPolicy): Promise<ApplicationView> {
  const found = await findApplicationOverview(em, principal.applicationId, principal.tokenId);
  // Tokens are revoked, never deleted: only a token removed by hand since it was read gets here.
  if (!found) throw unauthenticated('invalid_token');
  const view: ApplicationView = {
    id: found.id,
    name: found.name,
    created_at: found.createdAt.toISOString(),
    // A page needs it to subscribe, and it is public by design: every token sees it.
    vapid_public_key: found.credentials.find((c) => c.provider === 'webpush')?.publicKey ?? null,
    token: { name: found.tokenName, abilities: found.abilities as Schemas['Ability'][] },
  };
  const sends = grants(found.abilities, ['notifications:send']);
  if (sends) {
    const policy = effectiveSendPolicy({ quota: found.sendQuota, windowSeconds: found.sendWindowSeconds }, defaultSendPolicy);
    view.send_policy = { quota: policy.quota, window_seconds: policy.windowSeconds };
  }
  if (sends || grants(found.abilities, ['notifications:read'])) {
    const credential = (platform: Platform) => found.credentials.find((c) => c.provider === providerOf[platform]);
    view.credentials = {
      ios: providerStatus('ios', credential('ios')),
      android: providerStatus('android', credential('android')),
      web: providerStatus('web', credential('web')),
    };
  }
  return view;
}

// Applications and their tokens: issued and revoked by the CLI, checked on every request.
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiToken, Application } from '../db/entities.ts';
import { writeTokenLastUse } from '../db/sql.ts';
import { isUuid } from './ids.ts';
import { generateToken, hashSecret, isAbility, parseToken, secretMatches } from './tokens.ts';

export type Principal = {
  applicationId: string;
  tokenId: string;
  abilities: readonly string[];
  /** When the token was last used, as read with it: recordTokenUse writes only when it is a minute old. */
  lastUsedAt: Date | null;
};

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
 * Resolves a bearer token to its application, or null when it is malformed, unknown, wrong or
 * revoked. No cache: a revocation takes effect on the very next request.
 */
export async function authenticate(em: EntityManager, bearer: string): Promise<Principal | null> {
  const parts = parseToken(bearer);
  if (!parts) return null;
  const token = await em.findOne(ApiToken, { publicId: parts.publicId }, { disableIdentityMap: true });
  const matches = secretMatches(parts.secret, token?.secretHash ?? decoyHash);
  if (!token || !matches || token.revokedAt) return null;
  return { applicationId: token.applicationId, tokenId: token.id, abilities: token.abilities, lastUsedAt: token.lastUsedAt ?? null };
}

const lastUseGranularityMs = 60_000;

/**
 * A token's last use is kept to the minute: a request writes it only when the value read with the
 * token is a minute old, so a busy token costs one cheap update a minute, not one per request. The
 * condition in SQL (on the database's clock) makes concurrent requests write it once between them.
 */
export async function recordTokenUse(em: EntityManager, principal: Principal, now = new Date()): Promise<void> {
  if (principal.lastUsedAt && now.getTime() - principal.lastUsedAt.getTime() < lastUseGranularityMs) return;
  await writeTokenLastUse(em, principal.tokenId);
}

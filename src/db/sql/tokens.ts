// API tokens, and an application as one of its tokens sees it.
import { sql } from 'kysely';
import { arrayLiteral } from '../array-literal.ts';
import { type Db, asDate, rows, run } from './execute.ts';

export type TokenRow = {
  tokenId: string;
  applicationId: string;
  secretHash: string;
  abilities: string[];
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  sendQuota: number | null;
  sendWindowSeconds: number | null;
  /** The origins whose pages may call the app-token operations (CORS). */
  allowedOrigins: string[];
};

/** A token by its public id, with what a request needs of its application (the send policy). */
export async function findToken(db: Db, publicId: string): Promise<TokenRow | undefined> {
  const [found] = await rows(
    db,
    sql<TokenRow>`
      select t.id as "tokenId", t.application_id as "applicationId", t.secret_hash as "secretHash", t.abilities,
             t.revoked_at as "revokedAt", t.last_used_at as "lastUsedAt",
             a.send_quota as "sendQuota", a.send_window_seconds as "sendWindowSeconds", a.allowed_origins as "allowedOrigins"
        from api_tokens t join applications a on a.id = t.application_id
       where t.public_id = ${publicId}`,
  );
  return found && { ...found, revokedAt: found.revokedAt && asDate(found.revokedAt), lastUsedAt: found.lastUsedAt && asDate(found.lastUsedAt) };
}

export type CredentialHealthRow = {
  provider: 'apns' | 'fcm' | 'webpush';
  /** The VAPID public key of `webpush` credentials; null for the others. */
  publicKey: string | null;
  updatedAt: Date;
  unhealthySince: Date | null;
  lastError: string | null;
  unreachableSince: Date | null;
  verifiedAt: Date | null;
};

export type ApplicationOverviewRow = {
  id: string;
  name: string;
  createdAt: Date;
  sendQuota: number | null;
  sendWindowSeconds: number | null;
  tokenName: string;
  abilities: string[];
  credentials: CredentialHealthRow[];
};

/**
 * An application as one of its tokens sees it: the token's name and abilities, the application's
 * own send policy (null parts: the service default), and its credentials' health, never their
 * secrets. Undefined when the token is not the application's.
 */
export async function findApplicationOverview(db: Db, applicationId: string, tokenId: string): Promise<ApplicationOverviewRow | undefined> {
  const [found] = await rows(
    db,
    sql<Omit<ApplicationOverviewRow, 'credentials'> & { credentials: Record<keyof CredentialHealthRow, string | null>[] }>`
      select a.id, a.name, a.created_at as "createdAt", a.send_quota as "sendQuota", a.send_window_seconds as "sendWindowSeconds",
             t.name as "tokenName", t.abilities,
             coalesce((select json_agg(json_build_object(
                                'provider', c.provider, 'publicKey', c.settings->>'publicKey', 'updatedAt', c.updated_at, 'unhealthySince', c.unhealthy_since,
                                'lastError', c.last_error, 'unreachableSince', c.unreachable_since, 'verifiedAt', c.verified_at))
                         from provider_credentials c where c.application_id = a.id), '[]'::json) as credentials
        from applications a join api_tokens t on t.application_id = a.id
       where a.id = ${applicationId} and t.id = ${tokenId}`,
  );
  if (!found) return undefined;
  // json_build_object gives timestamps as text.
  const credentials = found.credentials.map((c) => ({
    provider: c.provider as CredentialHealthRow['provider'],
    publicKey: c.publicKey,
    updatedAt: new Date(c.updatedAt!),
    unhealthySince: c.unhealthySince === null ? null : new Date(c.unhealthySince),
    lastError: c.lastError,
    unreachableSince: c.unreachableSince === null ? null : new Date(c.unreachableSince),
    verifiedAt: c.verifiedAt === null ? null : new Date(c.verifiedAt),
  }));
  return { ...found, createdAt: asDate(found.createdAt), credentials };
}

/** Whether any application lets pages of this origin call it (a CORS preflight names no application). */
export async function originAllowedByAny(db: Db, origin: string): Promise<boolean> {
  const [found] = await rows(db, sql<{ allowed: boolean }>`select exists (select 1 from applications where ${origin} = any(allowed_origins)) as allowed`);
  return found.allowed;
}

/** Replaces an application's allowed origins; false when there is no such application. */
export async function writeAllowedOrigins(db: Db, applicationId: string, origins: string[]): Promise<boolean> {
  const updated = await rows(db, sql<{ id: string }>`update applications set allowed_origins = ${arrayLiteral(origins)}::text[] where id = ${applicationId} returning id`);
  return updated.length > 0;
}

/**
 * A token's last use, to the minute: the condition on the database's clock makes concurrent
 * requests write it once between them.
 */
export async function writeTokenLastUse(db: Db, tokenId: string): Promise<void> {
  await run(
    db,
    sql`
      update api_tokens set last_used_at = now()
       where id = ${tokenId} and (last_used_at is null or last_used_at < now() - interval '1 minute')`,
  );
}

// Provider credentials: their health as pushes find it, and re-sealing every stored secret.
import { sql } from 'kysely';
import { arrayLiteral } from '../array-literal.ts';
import { type Db, rows, run } from './execute.ts';

export type SealedRow = { id: string; application_id: string; provider: 'apns' | 'fcm'; secret: string };

/**
 * Blocks writes (and another re-seal) but not reads, until the transaction ends: a credential or a
 * webhook secret stored meanwhile would be sealed with a key the re-seal is moving away from.
 */
export async function lockCredentialsForReseal(db: Db): Promise<void> {
  await run(db, sql`lock table provider_credentials, webhook_endpoints in share row exclusive mode`);
}

/** Stored credentials, or only those still sealed the v1 way; `limit` to ask whether there are any. */
export async function sealedCredentials(db: Db, options: { onlyV1?: boolean; limit?: number } = {}): Promise<SealedRow[]> {
  const where = options.onlyV1 ? sql`where secret like 'v1.%'` : sql``;
  const limit = options.limit === undefined ? sql`` : sql`limit ${options.limit}`;
  return rows(db, sql<SealedRow>`select id, application_id, provider, secret from provider_credentials ${where} order by application_id, provider ${limit}`);
}

// updated_at stays: the credentials did not change, and a running worker's clients (keyed on it) stay valid.
export async function writeSecrets(db: Db, resealed: { id: string; secret: string }[]): Promise<void> {
  if (resealed.length === 0) return;
  await run(
    db,
    sql`
      update provider_credentials set secret = resealed.secret
        from unnest(${arrayLiteral(resealed.map((row) => row.id))}::uuid[], ${arrayLiteral(resealed.map((row) => row.secret))}::text[]) as resealed(id, secret)
       where provider_credentials.id = resealed.id`,
  );
}

export type SealedWebhookSecrets = { id: string; secret: string; previousSecret: string | null };

export async function sealedWebhookSecrets(db: Db): Promise<SealedWebhookSecrets[]> {
  return rows(db, sql<SealedWebhookSecrets>`select id, secret, previous_secret as "previousSecret" from webhook_endpoints order by id`);
}

/** Every endpoint's sealed secrets, with the application it belongs to: what a worker's start tries to open. */
export async function storedWebhookSecrets(db: Db): Promise<(SealedWebhookSecrets & { applicationId: string })[]> {
  return rows(
    db,
    sql<SealedWebhookSecrets & { applicationId: string }>`
      select id, application_id as "applicationId", secret, previous_secret as "previousSecret" from webhook_endpoints order by application_id, id`,
  );
}

export async function writeWebhookSecrets(db: Db, resealed: SealedWebhookSecrets[]): Promise<void> {
  if (resealed.length === 0) return;
  await run(
    db,
    sql`
      update webhook_endpoints e set secret = r.secret, previous_secret = r.previous_secret
        from unnest(${arrayLiteral(resealed.map((row) => row.id))}::uuid[], ${arrayLiteral(resealed.map((row) => row.secret))}::text[],
                    ${arrayLiteral(resealed.map((row) => row.previousSecret))}::text[]) as r(id, secret, previous_secret)
       where e.id = r.id`,
  );
}

/** A provider refused our credentials: its deliveries fail, and `credentials show` says why. */
export async function markCredentialUnhealthy(db: Db, credentialId: string, reason: string): Promise<void> {
  await run(db, sql`update provider_credentials set unhealthy_since = coalesce(unhealthy_since, now()), last_error = ${reason} where id = ${credentialId}`);
}

/**
 * At a worker's start: the credentials its key does not open are unhealthy for `reason`; those it
 * opens lose that mark (and only that one: a provider's refusal stays until a push is accepted).
 */
export async function markUnopenableCredentials(db: Db, ids: { opened: string[]; unopenable: string[] }, reason: string): Promise<void> {
  if (ids.unopenable.length > 0) {
    await run(
      db,
      sql`update provider_credentials set unhealthy_since = coalesce(unhealthy_since, now()), last_error = ${reason}
           where id = any(${arrayLiteral(ids.unopenable)}::uuid[])`,
    );
  }
  if (ids.opened.length > 0) {
    await run(
      db,
      sql`update provider_credentials set unhealthy_since = null, last_error = null
           where last_error = ${reason} and id = any(${arrayLiteral(ids.opened)}::uuid[])`,
    );
  }
}

/**
 * A push was accepted: the credential is verified, and whatever was wrong with it or the way to the
 * provider is over. Writes only when something changes: a verified, healthy credential's row is
 * not touched by every accepted push.
 */
export async function markCredentialHealthy(db: Db, credentialId: string): Promise<void> {
  await run(
    db,
    sql`
      update provider_credentials set unhealthy_since = null, last_error = null, unreachable_since = null, verified_at = coalesce(verified_at, now())
       where id = ${credentialId} and (unhealthy_since is not null or unreachable_since is not null or verified_at is null)`,
  );
}

/** A whole batch failed to reach the provider (refused, timed out, cut): `credentials show` says since when. */
export async function markCredentialUnreachable(db: Db, credentialId: string): Promise<void> {
  await run(db, sql`update provider_credentials set unreachable_since = now() where id = ${credentialId} and unreachable_since is null`);
}

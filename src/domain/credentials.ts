// Provider credentials per application: the non-secret settings in clear (for `credentials
// show`), the key material AES-256-GCM encrypted with HERALD_CREDENTIALS_KEY.
import { createCipheriv, createDecipheriv, createPrivateKey, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ApnsCredentials, FcmCredentials } from '../providers/provider.ts';
import { ProviderCredential } from './entities.ts';

export type Provider = ProviderCredential['provider'];
export type ProviderSecrets = { apns: ApnsCredentials; fcm: FcmCredentials };

const algorithm = 'aes-256-gcm';

export function encryptSecret(plaintext: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv(algorithm, key, iv);
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64'), cipher.getAuthTag().toString('base64'), sealed.toString('base64')].join('.');
}

export function decryptSecret(stored: string, key: Buffer): string {
  const [version, iv, tag, sealed] = stored.split('.');
  if (version !== 'v1') throw new Error(`Unknown credential encryption version ${version}`);
  const decipher = createDecipheriv(algorithm, key, Buffer.from(iv, 'base64'));
  decipher.setAuthTag(Buffer.from(tag, 'base64'));
  try {
    return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    throw new Error('Cannot decrypt provider credentials: HERALD_CREDENTIALS_KEY is not the key they were stored with.');
  }
}

export function credentialsKey(base64: string | undefined): Buffer | null {
  return base64 ? Buffer.from(base64, 'base64') : null;
}

async function store(
  em: EntityManager,
  applicationId: string,
  provider: Provider,
  settings: Record<string, string | boolean>,
  secret: string,
  key: Buffer,
): Promise<ProviderCredential> {
  const existing = await em.findOne(ProviderCredential, { applicationId, provider });
  const fields = { settings, secret: encryptSecret(secret, key), unhealthySince: null, lastError: null };
  const credential = existing ? em.assign(existing, fields) : em.create(ProviderCredential, { applicationId, provider, ...fields });
  await em.flush();
  return credential;
}

export async function setApnsCredentials(
  em: EntityManager,
  applicationId: string,
  credentials: ApnsCredentials,
  key: Buffer,
): Promise<ProviderCredential> {
  // Refuse a key APNs would refuse anyway, now rather than at the first push.
  const parsed = createPrivateKey(credentials.key);
  if (parsed.asymmetricKeyType !== 'ec') throw new Error('The APNs key must be an EC (ES256) .p8 key.');
  const { keyId, teamId, bundleId, sandbox } = credentials;
  return store(em, applicationId, 'apns', { keyId, teamId, bundleId, sandbox }, credentials.key, key);
}

export async function setFcmCredentials(
  em: EntityManager,
  applicationId: string,
  credentials: FcmCredentials,
  key: Buffer,
): Promise<ProviderCredential> {
  const account = credentials.serviceAccount;
  for (const field of ['project_id', 'client_email', 'private_key'] as const) {
    if (typeof account[field] !== 'string' || account[field].length === 0) {
      throw new Error(`The service account has no ${field}.`);
    }
  }
  createPrivateKey(account.private_key);
  const settings = { projectId: account.project_id, clientEmail: account.client_email };
  return store(em, applicationId, 'fcm', settings, JSON.stringify(account), key);
}

export async function listCredentials(em: EntityManager, applicationId: string): Promise<ProviderCredential[]> {
  return em.find(ProviderCredential, { applicationId }, { orderBy: { provider: 'asc' } });
}

export function openCredential<P extends Provider>(credential: ProviderCredential & { provider: P }, key: Buffer): ProviderSecrets[P];
export function openCredential(credential: ProviderCredential, key: Buffer): ApnsCredentials | FcmCredentials {
  const secret = decryptSecret(credential.secret, key);
  if (credential.provider === 'fcm') return { serviceAccount: JSON.parse(secret) };
  const { keyId, teamId, bundleId, sandbox } = credential.settings as Record<string, string> & { sandbox: boolean };
  return { key: secret, keyId, teamId, bundleId, sandbox };
}

/** At start: stored credentials without the key to open them is a configuration error. */
export async function assertCredentialsReadable(em: EntityManager, key: Buffer | null): Promise<void> {
  if (key) return;
  const count = await em.count(ProviderCredential, {});
  if (count > 0) {
    throw new Error(
      `${count} provider credential(s) are stored but HERALD_CREDENTIALS_KEY is not set: set it to the key they were stored with.`,
    );
  }
}

/** A provider refused our credentials: its deliveries fail, and `credentials show` says why. */
export async function markUnhealthy(em: EntityManager, credentialId: string, reason: string): Promise<void> {
  await em.execute(
    `update provider_credentials set unhealthy_since = coalesce(unhealthy_since, now()), last_error = ? where id = ?`,
    [reason, credentialId],
  );
}

/** A push was accepted: whatever was wrong with the credential or the way to the provider is over. */
export async function markHealthy(em: EntityManager, credentialId: string): Promise<void> {
  await em.execute(
    `update provider_credentials set unhealthy_since = null, last_error = null, unreachable_since = null
      where id = ? and (unhealthy_since is not null or unreachable_since is not null)`,
    [credentialId],
  );
}

/** A whole batch failed to reach the provider (refused, timed out, cut): `credentials show` says since when. */
export async function markUnreachable(em: EntityManager, credentialId: string): Promise<void> {
  await em.execute('update provider_credentials set unreachable_since = now() where id = ? and unreachable_since is null', [credentialId]);
}

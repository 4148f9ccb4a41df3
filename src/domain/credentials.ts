// Provider credentials per application: the non-secret settings in clear (for `credentials
// show`), the key material AES-256-GCM encrypted with HERALD_CREDENTIALS_KEY.
import { createCipheriv, createDecipheriv, createPrivateKey, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logging/logger.ts';
import { ProviderCredential } from '../db/entities.ts';
import { lockCredentialsForReseal, sealedCredentials, writeSecrets, type SealedRow } from '../db/sql.ts';

export type ApnsCredentials = {
  /** PEM of the .p8 signing key. */
  key: string;
  keyId: string;
  teamId: string;
  bundleId: string;
  sandbox: boolean;
};

export type FcmCredentials = {
  /** The service account JSON (project_id, client_email, private_key...). */
  serviceAccount: { project_id: string; client_email: string; private_key: string; [key: string]: unknown };
};

export type Provider = ProviderCredential['provider'];
export type ProviderSecrets = { apns: ApnsCredentials; fcm: FcmCredentials };
/** The row a sealed secret belongs to. */
export type CredentialOwner = { applicationId: string; provider: Provider };

const algorithm = 'aes-256-gcm';

// v2 seals the secret with its owner as associated data: a secret copied onto another
// application's or provider's row does not open there. v1 (no owner) is still read, and re-sealed
// as v2 by a worker's start (upgradeSealedCredentials) or by `herald credentials rotate-key`.
function associatedData(owner: CredentialOwner): Buffer {
  return Buffer.from(`herald:credential:${owner.applicationId}:${owner.provider}`, 'utf8');
}

export function encryptSecret(plaintext: string, key: Buffer, owner: CredentialOwner): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv(algorithm, key, iv);
  cipher.setAAD(associatedData(owner));
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v2', iv.toString('base64'), cipher.getAuthTag().toString('base64'), sealed.toString('base64')].join('.');
}

export function decryptSecret(stored: string, key: Buffer, owner: CredentialOwner): string {
  const parts = stored.split('.');
  const [version, iv, tag, sealed] = parts;
  const which = `the ${owner.provider} credentials of application ${owner.applicationId}`;
  if (parts.length !== 4 || (version !== 'v1' && version !== 'v2')) {
    throw new Error(`Cannot open ${which}: unknown encryption format ${version}.`);
  }
  const decipher = createDecipheriv(algorithm, key, Buffer.from(iv, 'base64'));
  decipher.setAuthTag(Buffer.from(tag, 'base64'));
  if (version === 'v2') decipher.setAAD(associatedData(owner));
  try {
    return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    // GCM cannot tell a wrong key from a wrong owner: both are named.
    throw new Error(
      version === 'v2'
        ? `Cannot open ${which}: HERALD_CREDENTIALS_KEY is not the key they were sealed with, or they were sealed for another application or provider.`
        : `Cannot open ${which}: HERALD_CREDENTIALS_KEY is not the key they were sealed with.`,
    );
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
  const fields = { settings, secret: encryptSecret(secret, key, { applicationId, provider }), unhealthySince: null, lastError: null };
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
  const secret = decryptSecret(credential.secret, key, credential);
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


const ownerOf = (row: SealedRow): CredentialOwner => ({ applicationId: row.application_id, provider: row.provider });

function reseal(row: SealedRow, from: Buffer, to: Buffer): { id: string; secret: string } {
  return { id: row.id, secret: encryptSecret(decryptSecret(row.secret, from, ownerOf(row)), to, ownerOf(row)) };
}

/**
 * At a worker's start (it holds the key): re-seals v1 credentials as v2, in one transaction, and
 * returns how many. One that does not open with this key is left as it is and logged: it fails its
 * own application's pushes, as it would have before, rather than keeping every worker from starting.
 */
export async function upgradeSealedCredentials(em: EntityManager, key: Buffer | null, logger: Logger): Promise<number> {
  if (!key) return 0;
  // Checked before locking, so that a start with nothing to upgrade takes no lock.
  if ((await sealedCredentials(em, { onlyV1: true, limit: 1 })).length === 0) return 0;
  return em.transactional(async (tx) => {
    await lockCredentialsForReseal(tx);
    const resealed: { id: string; secret: string }[] = [];
    for (const row of await sealedCredentials(tx, { onlyV1: true })) {
      try {
        resealed.push(reseal(row, key, key));
      } catch (error) {
        logger.warn({ ...ownerOf(row), reason: (error as Error).message }, 'stored credentials left as they are');
      }
    }
    await writeSecrets(tx, resealed);
    if (resealed.length > 0) logger.info({ count: resealed.length }, 'provider credentials re-sealed, bound to their application and provider');
    return resealed.length;
  });
}

/**
 * `herald credentials rotate-key`: re-seals every stored credential under a new key, in one
 * transaction, and returns how many. If any does not open with the current key, nothing changes.
 */
export async function rotateCredentialsKey(em: EntityManager, currentKey: Buffer, newKey: Buffer): Promise<number> {
  if (currentKey.equals(newKey)) throw new Error('The new key is HERALD_CREDENTIALS_KEY itself: nothing to rotate.');
  return em.transactional(async (tx) => {
    await lockCredentialsForReseal(tx);
    const rows = await sealedCredentials(tx);
    const resealed: { id: string; secret: string }[] = [];
    const unreadable: string[] = [];
    for (const row of rows) {
      try {
        resealed.push(reseal(row, currentKey, newKey));
      } catch {
        unreadable.push(`${row.provider} of application ${row.application_id}`);
      }
    }
    if (unreadable.length > 0) {
      throw new Error(
        `${unreadable.length} of ${rows.length} stored credential(s) do not open with HERALD_CREDENTIALS_KEY (${unreadable.join(', ')}): ` +
          'nothing was re-encrypted. Set HERALD_CREDENTIALS_KEY to the key they were stored with, or store those credentials again.',
      );
    }
    await writeSecrets(tx, resealed);
    return resealed.length;
  });
}


// Provider credentials per application: the non-secret settings in clear (for `credentials
// show`), the key material AES-256-GCM encrypted with HERALD_CREDENTIALS_KEY; and the webhook
// endpoints' signing secrets, sealed with the same key.
import { createCipheriv, createDecipheriv, createECDH, createPrivateKey, randomBytes, type KeyObject } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../logging/logger.ts';
import type { PushOutcome } from './delivery-rules.ts';
import { ProviderCredential } from '../db/entities.ts';
import {
  lockCredentialsForReseal,
  markUnopenableCredentials,
  sealedCredentials,
  storedWebhookSecrets,
  sealedWebhookSecrets,
  writeSecrets,
  writeWebhookSecrets,
  type SealedRow,
  type SealedWebhookSecrets,
} from '../db/sql/credentials.ts';

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

/** An application's VAPID key pair (RFC 8292), base64url as browsers and web-push take them, and its contact. */
export type WebPushCredentials = {
  /** `mailto:` or an `https:` URL: whom a push service contacts about this sender. */
  subject: string;
  /** The uncompressed P-256 point, 65 bytes. */
  publicKey: string;
  /** The private scalar, 32 bytes. */
  privateKey: string;
};

export type Provider = ProviderCredential['provider'];
export type ProviderSecrets = { apns: ApnsCredentials; fcm: FcmCredentials; webpush: WebPushCredentials };
/** The row a sealed secret belongs to. */
export type CredentialOwner = { applicationId: string; provider: Provider };

const algorithm = 'aes-256-gcm';

/**
 * What a sealed secret is bound to: the AES-GCM associated data, which must be the same to open it,
 * and how an error names the secret and the other owners it might have been sealed for.
 */
type Binding = { associatedData: string; what: string; others: string };

// v2 seals the secret with its owner as associated data: a secret copied onto another
// application's or provider's row does not open there. v1 (no owner) is still read, and re-sealed
// as v2 by a worker's start (upgradeSealedCredentials) or by `herald credentials rotate-key`.
function credentialBinding(owner: CredentialOwner): Binding {
  return {
    associatedData: `herald:credential:${owner.applicationId}:${owner.provider}`,
    what: `the ${owner.provider} credentials of application ${owner.applicationId}`,
    others: 'another application or provider',
  };
}

// A webhook endpoint's signing secret, bound to its endpoint (always v2).
function webhookSecretBinding(endpointId: string): Binding {
  return { associatedData: `herald:webhook-secret:${endpointId}`, what: `the signing secret of webhook endpoint ${endpointId}`, others: 'another endpoint' };
}

function seal(plaintext: string, key: Buffer, binding: Binding): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv(algorithm, key, iv);
  cipher.setAAD(Buffer.from(binding.associatedData, 'utf8'));
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v2', iv.toString('base64'), cipher.getAuthTag().toString('base64'), sealed.toString('base64')].join('.');
}

/** What health and deliveries say of a stored secret this process's HERALD_CREDENTIALS_KEY does not open. */
export const unopenableReason = 'cannot be opened with this key';

/** A sealed secret that does not open: another key, another owner, or a damaged row. */
export class UnopenableSecret extends Error {}

function unseal(stored: string, key: Buffer, binding: Binding): string {
  const parts = stored.split('.');
  const [version, iv, tag, sealed] = parts;
  if (parts.length !== 4 || (version !== 'v1' && version !== 'v2')) {
    throw new UnopenableSecret(`Cannot open ${binding.what}: unknown encryption format ${version}.`);
  }
  try {
    // Inside the try: a damaged iv or tag throws here, and is a secret that does not open too.
    const decipher = createDecipheriv(algorithm, key, Buffer.from(iv, 'base64'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    if (version === 'v2') decipher.setAAD(Buffer.from(binding.associatedData, 'utf8'));
    return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    // GCM cannot tell a wrong key from a wrong owner: both are named.
    throw new UnopenableSecret(
      version === 'v2'
        ? `Cannot open ${binding.what}: HERALD_CREDENTIALS_KEY is not the key they were sealed with, or they were sealed for ${binding.others}.`
        : `Cannot open ${binding.what}: HERALD_CREDENTIALS_KEY is not the key they were sealed with.`,
    );
  }
}

export function encryptSecret(plaintext: string, key: Buffer, owner: CredentialOwner): string {
  return seal(plaintext, key, credentialBinding(owner));
}

export function decryptSecret(stored: string, key: Buffer, owner: CredentialOwner): string {
  return unseal(stored, key, credentialBinding(owner));
}

/** A webhook endpoint's signing secret, sealed with HERALD_CREDENTIALS_KEY like the provider credentials. */
export function sealWebhookSecret(secret: string, key: Buffer, endpointId: string): string {
  return seal(secret, key, webhookSecretBinding(endpointId));
}

export function openWebhookSecret(stored: string, key: Buffer, endpointId: string): string {
  return unseal(stored, key, webhookSecretBinding(endpointId));
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
  // New credentials: no provider has accepted them yet, whatever it thought of the ones they replace.
  const fields = {
    settings,
    secret: encryptSecret(secret, key, { applicationId, provider }),
    unhealthySince: null,
    lastError: null,
    verifiedAt: null,
  };
  const credential = existing ? em.assign(existing, fields) : em.create(ProviderCredential, { applicationId, provider, ...fields });
  await em.flush();
  return credential;
}

/** Apple's key ids and team ids: 10 letters and digits, as the developer site shows them. */
const appleId = /^[A-Za-z0-9]{10}$/;

/** A private key from its PEM, or an error in words (OpenSSL's is `error:1E08010C:DECODER routines::unsupported`). */
function parsePrivateKey(pem: string, what: string): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch {
    throw new Error(`${what} is not a private key in PEM form (a block beginning "-----BEGIN PRIVATE KEY-----").`);
  }
}

export async function setApnsCredentials(
  em: EntityManager,
  applicationId: string,
  credentials: ApnsCredentials,
  key: Buffer,
): Promise<ProviderCredential> {
  // Refuse what APNs would refuse anyway, now rather than at the first push.
  for (const [name, value] of [['key id', credentials.keyId], ['team id', credentials.teamId]] as const) {
    if (!appleId.test(value)) {
      throw new Error(`The ${name} must be the 10 letters and digits Apple shows for it (e.g. ABC123DEFG); got ${JSON.stringify(value)}.`);
    }
  }
  const parsed = parsePrivateKey(credentials.key, "The key file (the .p8 downloaded from Apple's developer site, under Keys)");
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
  if (typeof account !== 'object' || account === null || Array.isArray(account)) {
    throw new Error('The service account must be the JSON object of a key file from the Firebase console.');
  }
  if (account.type !== undefined && account.type !== 'service_account') {
    throw new Error(`The file is not a service account key: its "type" is ${JSON.stringify(account.type)}, not "service_account".`);
  }
  for (const field of ['project_id', 'client_email', 'private_key'] as const) {
    if (typeof account[field] !== 'string' || account[field].length === 0) {
      throw new Error(`The service account has no ${field}: use the key file the Firebase console downloads (Project settings, Service accounts).`);
    }
  }
  if (!/^[^@\s]+@[^@\s]+$/.test(account.client_email)) {
    throw new Error(`The service account's client_email is not an email address: ${JSON.stringify(account.client_email)}.`);
  }
  const parsed = parsePrivateKey(account.private_key, "The service account's private_key");
  if (parsed.asymmetricKeyType !== 'rsa') throw new Error("The service account's private_key must be an RSA key, as Google issues them.");
  const settings = { projectId: account.project_id, clientEmail: account.client_email };
  return store(em, applicationId, 'fcm', settings, JSON.stringify(account), key);
}

/** A VAPID subject a push service accepts (RFC 8292 §2.1): a `mailto:` address or an `https:` URL. */
function vapidSubjectProblem(subject: string): string | null {
  if (/^mailto:[^@\s]+@[^@\s]+$/.test(subject)) return null;
  if (URL.canParse(subject) && new URL(subject).protocol === 'https:') return null;
  return `The subject must be a mailto: address or an https: URL (whom a push service contacts about these pushes); got ${JSON.stringify(subject)}.`;
}

/** A fresh VAPID key pair, base64url: the private scalar padded to its 32 bytes. */
export function generateVapidKeys(): Pick<WebPushCredentials, 'publicKey' | 'privateKey'> {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  // The scalar comes without its leading zero bytes (one key in 256 has one): padded as bytes, not
  // as text, since a base64url character holds 6 bits, not 8.
  const scalar = ecdh.getPrivateKey();
  const privateKey = Buffer.concat([Buffer.alloc(32 - scalar.length), scalar]);
  return { publicKey: ecdh.getPublicKey().toString('base64url'), privateKey: privateKey.toString('base64url') };
}

/** Whether the private key is 32 bytes of base64url whose public key is the one given. */
function vapidPairProblem(publicKey: string, privateKey: string): string | null {
  const privateBytes = /^[A-Za-z0-9_-]+$/.test(privateKey) ? Buffer.from(privateKey, 'base64url') : Buffer.alloc(0);
  if (privateBytes.length !== 32) return 'The VAPID private key must be base64url of 32 bytes (what `web-push generate-vapid-keys` prints).';
  const ecdh = createECDH('prime256v1');
  try {
    ecdh.setPrivateKey(privateBytes);
  } catch {
    return 'The VAPID private key is not a P-256 private key.';
  }
  if (ecdh.getPublicKey().toString('base64url') !== publicKey) return 'The VAPID public key is not the private key\'s: give the two keys of one pair.';
  return null;
}

/**
 * Stores an application's VAPID key pair: the one given, or a new one. Replacing a pair needs
 * `force`: every subscription a browser made holds the old public key, and a push service refuses
 * pushes signed with another, so each of those installations stops receiving until its page
 * subscribes again with the new key.
 */
export async function setWebPushCredentials(
  em: EntityManager,
  applicationId: string,
  given: { subject: string; keys?: Pick<WebPushCredentials, 'publicKey' | 'privateKey'>; force: boolean },
  key: Buffer,
): Promise<{ credential: ProviderCredential; replaced: boolean; publicKey: string }> {
  const subjectProblem = vapidSubjectProblem(given.subject);
  if (subjectProblem) throw new Error(subjectProblem);
  const pair = given.keys ?? generateVapidKeys();
  const pairProblem = vapidPairProblem(pair.publicKey, pair.privateKey);
  if (pairProblem) throw new Error(pairProblem);
  const existing = await em.findOne(ProviderCredential, { applicationId, provider: 'webpush' });
  const replaced = existing !== null && (existing.settings as Record<string, string>).publicKey !== pair.publicKey;
  if (replaced && !given.force) {
    throw new Error(
      `Application ${applicationId} already has a VAPID key pair. Replacing it makes every existing web subscription stop ` +
        'working (each was made with the current public key) until its page subscribes again; run again with --force to replace it.',
    );
  }
  const credential = await store(em, applicationId, 'webpush', { subject: given.subject, publicKey: pair.publicKey }, pair.privateKey, key);
  return { credential, replaced, publicKey: pair.publicKey };
}

/** What a provider said of credentials asked directly (`herald credentials check`). */
export type CheckVerdict =
  | { kind: 'accepted'; answer: string }
  | { kind: 'refused'; reason: string }
  | { kind: 'unreachable'; reason: string };

/**
 * The answer to a push no device receives, as a verdict on the credentials: only a refusal of the
 * credentials refuses them, and a network failure says nothing of them; any other answer (accepted,
 * or the made-up token refused) means the provider took the credentials.
 */
export function checkVerdict(outcome: PushOutcome): CheckVerdict {
  if (outcome.kind === 'credentials') return { kind: 'refused', reason: outcome.reason };
  if (outcome.kind === 'transient') return { kind: 'unreachable', reason: outcome.reason };
  return { kind: 'accepted', answer: outcome.kind === 'accepted' ? 'accepted' : outcome.reason };
}

/** What health shows of a credential: its status, since when, and why (see credentialHealth). */
export type CredentialHealth = { status: 'healthy' | 'unverified' | 'unhealthy' | 'unreachable'; since: Date | null; reason: string | null };

/**
 * A credential's health as the workers last found it: refused by the provider or not opened by
 * the key (unhealthy) wins over a provider that could not be reached; then whether a provider has
 * accepted them yet (unverified until one has).
 */
export function credentialHealth(credential: {
  unhealthySince?: Date | null;
  lastError?: string | null;
  unreachableSince?: Date | null;
  verifiedAt?: Date | null;
}): CredentialHealth {
  if (credential.unhealthySince) return { status: 'unhealthy', since: credential.unhealthySince, reason: credential.lastError ?? null };
  if (credential.unreachableSince) return { status: 'unreachable', since: credential.unreachableSince, reason: null };
  return { status: credential.verifiedAt ? 'healthy' : 'unverified', since: null, reason: null };
}

export async function listCredentials(em: EntityManager, applicationId: string): Promise<ProviderCredential[]> {
  return em.find(ProviderCredential, { applicationId }, { orderBy: { provider: 'asc' } });
}

export function openCredential<P extends Provider>(credential: ProviderCredential & { provider: P }, key: Buffer): ProviderSecrets[P];
export function openCredential(credential: ProviderCredential, key: Buffer): ApnsCredentials | FcmCredentials | WebPushCredentials {
  const secret = decryptSecret(credential.secret, key, credential);
  if (credential.provider === 'fcm') return { serviceAccount: JSON.parse(secret) };
  if (credential.provider === 'webpush') {
    const { subject, publicKey } = credential.settings as Record<string, string>;
    return { subject, publicKey, privateKey: secret };
  }
  const { keyId, teamId, bundleId, sandbox } = credential.settings as Record<string, string> & { sandbox: boolean };
  return { key: secret, keyId, teamId, bundleId, sandbox };
}

/** Why a worker refuses to start: the key it was given opens none of the stored secrets. */
export class KeyOpensNothing extends Error {}

/**
 * At a worker's start: tries every stored credential and webhook signing secret with the key. A
 * key that opens none of them is the wrong key, and every push and webhook would fail with it: the
 * worker refuses to start (KeyOpensNothing) and changes nothing. A key that opens some is right, and
 * the others are damaged or stored with another key: they are marked unhealthy with
 * `unopenableReason` (wherever health is shown), each application's logged once, and the worker
 * starts; credentials that open again lose that mark. Without a key, anything stored is an error.
 */
export async function checkStoredSecrets(em: EntityManager, key: Buffer | null, logger: Logger): Promise<void> {
  const credentials = await sealedCredentials(em);
  const endpoints = await storedWebhookSecrets(em);
  if (!key) {
    const stored = [
      ...(credentials.length > 0 ? [`${credentials.length} provider credential(s)`] : []),
      ...(endpoints.length > 0 ? [`${endpoints.length} webhook signing secret(s)`] : []),
    ];
    if (stored.length > 0) {
      throw new Error(`${stored.join(' and ')} are stored but HERALD_CREDENTIALS_KEY is not set: set it to the key they were stored with.`);
    }
    return;
  }
  const opens = (open: () => unknown) => {
    try {
      open();
      return true;
    } catch (error) {
      if (error instanceof UnopenableSecret) return false;
      throw error;
    }
  };
  const [opened, unopenable] = partition(credentials, (row) => opens(() => decryptSecret(row.secret, key, ownerOf(row))));
  const [openedEndpoints, unopenableEndpoints] = partition(endpoints, (endpoint) =>
    [endpoint.secret, endpoint.previousSecret].every((stored) => stored === null || opens(() => openWebhookSecret(stored, key, endpoint.id))),
  );
  if (opened.length + openedEndpoints.length === 0 && unopenable.length + unopenableEndpoints.length > 0) {
    const stored = [
      ...(unopenable.length > 0 ? [`${unopenable.length} stored provider credential(s)`] : []),
      ...(unopenableEndpoints.length > 0 ? [`${unopenableEndpoints.length} webhook signing secret(s)`] : []),
    ];
    throw new KeyOpensNothing(
      `HERALD_CREDENTIALS_KEY opens none of the ${stored.join(' and ')}: it is not the key they were stored with, and every push ` +
        'would fail. Set HERALD_CREDENTIALS_KEY to that key. To move to a new key, run `herald credentials rotate-key` with the ' +
        'current one set, then start the workers with the new one.',
    );
  }
  await markUnopenableCredentials(em, { opened: opened.map((row) => row.id), unopenable: unopenable.map((row) => row.id) }, unopenableReason);
  const applications = new Set([...unopenable.map((row) => row.application_id), ...unopenableEndpoints.map((endpoint) => endpoint.applicationId)]);
  for (const applicationId of applications) {
    logger.warn(
      {
        applicationId,
        credentials: unopenable.filter((row) => row.application_id === applicationId).map((row) => row.provider),
        webhookEndpoints: unopenableEndpoints.filter((endpoint) => endpoint.applicationId === applicationId).map((endpoint) => endpoint.id),
      },
      `stored secrets ${unopenableReason}: store them again (herald credentials set-apns/set-fcm, webhooks rotate-secret)`,
    );
  }
}

function partition<T>(items: T[], test: (item: T) => boolean): [T[], T[]] {
  const passed: T[] = [];
  const failed: T[] = [];
  for (const item of items) (test(item) ? passed : failed).push(item);
  return [passed, failed];
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

export type Rotated = { credentials: number; webhookSecrets: number };

/**
 * `herald credentials rotate-key`: re-seals every stored credential and webhook signing secret
 * under a new key, in one transaction, and says how many. If any does not open with the current
 * key, nothing changes.
 */
export async function rotateCredentialsKey(em: EntityManager, currentKey: Buffer, newKey: Buffer): Promise<Rotated> {
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
    const endpoints = await sealedWebhookSecrets(tx);
    const resealedEndpoints: SealedWebhookSecrets[] = [];
    for (const endpoint of endpoints) {
      const move = (stored: string | null) => stored && sealWebhookSecret(openWebhookSecret(stored, currentKey, endpoint.id), newKey, endpoint.id);
      try {
        resealedEndpoints.push({ id: endpoint.id, secret: move(endpoint.secret)!, previousSecret: move(endpoint.previousSecret) });
      } catch {
        unreadable.push(`webhook endpoint ${endpoint.id}`);
      }
    }
    if (unreadable.length > 0) {
      const credentialsUnreadable = rows.length - resealed.length;
      const secretsUnreadable = endpoints.length - resealedEndpoints.length;
      const counted = [
        ...(credentialsUnreadable > 0 ? [`${credentialsUnreadable} of ${rows.length} stored credential(s)`] : []),
        ...(secretsUnreadable > 0 ? [`${secretsUnreadable} of ${endpoints.length} webhook signing secret(s)`] : []),
      ];
      throw new Error(
        `${counted.join(' and ')} do not open with HERALD_CREDENTIALS_KEY (${unreadable.join(', ')}): ` +
          'nothing was re-encrypted. Set HERALD_CREDENTIALS_KEY to the key they were stored with, or store those credentials again.',
      );
    }
    await writeSecrets(tx, resealed);
    await writeWebhookSecrets(tx, resealedEndpoints);
    return { credentials: resealed.length, webhookSecrets: resealedEndpoints.length };
  });
}

// Installation rules: PUT is a full replace that keeps history fields, PATCH changes the user or
// the permission, and another application's installation does not exist.
import { LockMode, UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { notFound } from './errors.ts';
import { providerIdentifierType } from './platforms.ts';
import { Installation, type DeviceDetails } from '../db/entities.ts';

type Schemas = components['schemas'];
export type InstallationInput = Schemas['InstallationPut'];
export type InstallationPatch = Schemas['InstallationPatch'];
export type InstallationView = Schemas['Installation'];

const deviceFields = ['app_version', 'os_version', 'model', 'locale', 'timezone'] as const;

function deviceDetails(input: InstallationInput['device']): DeviceDetails {
  return Object.fromEntries(deviceFields.map((field) => [field, input?.[field] ?? null])) as DeviceDetails;
}

/**
 * The fields a PUT writes. A replace keeps `registered_at`, moves `identifier_updated_at` and
 * `permission_updated_at` only when those values change, and a new identifier re-activates an
 * installation a provider had invalidated (the app got a fresh token).
 */
export function replacement(existing: Installation | null, input: InstallationInput, now: Date) {
  const permission = input.permission ?? 'unknown';
  const identifier = input.provider.identifier;
  const identifierChanged = !existing || existing.providerIdentifier !== identifier;
  const keepsInvalidation = existing && !identifierChanged && existing.status === 'invalid';
  return {
    platform: input.platform,
    providerIdentifier: identifier,
    permission,
    userId: input.user_id ?? null,
    device: deviceDetails(input.device),
    registeredAt: existing?.registeredAt ?? now,
    lastSeenAt: now,
    identifierUpdatedAt: identifierChanged ? now : existing.identifierUpdatedAt,
    permissionUpdatedAt: !existing || existing.permission !== permission ? now : existing.permissionUpdatedAt,
    status: keepsInvalidation ? existing.status : 'active',
    invalidatedAt: keepsInvalidation ? existing.invalidatedAt : null,
    invalidReason: keepsInvalidation ? existing.invalidReason : null,
  };
}

/**
 * Whether a provider's report that a push address is dead is stale. APNs dates its 410 (when it
 * found the token no longer valid); a date older than the installation's last identifier change
 * concerns an identifier the device has replaced since, so it must not invalidate the
 * installation. A report without a date (FCM, APNs's other reasons) is never stale. The worker
 * applies this rule in SQL (db/sql.ts invalidateInstallations), where the identifier's date is.
 */
export function isStaleInvalidation(providerTimestamp: Date | null, identifierUpdatedAt: Date): boolean {
  return providerTimestamp !== null && providerTimestamp.getTime() < identifierUpdatedAt.getTime();
}

export async function registerInstallation(
  em: EntityManager,
  applicationId: string,
  installationId: string,
  input: InstallationInput,
): Promise<{ installation: Installation; created: boolean }> {
  const attempt = () =>
    em.transactional(async (tx) => {
      const existing = await tx.findOne(
        Installation,
        { applicationId, installationId },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      const fields = replacement(existing, input, new Date());
      if (existing) {
        tx.assign(existing, fields);
        return { installation: existing, created: false };
      }
      return { installation: tx.create(Installation, { applicationId, installationId, ...fields }), created: true };
    });
  try {
    return await attempt();
  } catch (error) {
    // Two first registrations raced: the loser now finds the row and replaces it.
    if (error instanceof UniqueConstraintViolationException) return attempt();
    throw error;
  }
}

export async function findInstallation(
  em: EntityManager,
  applicationId: string,
  installationId: string,
): Promise<Installation> {
  const installation = await em.findOne(Installation, { applicationId, installationId });
  if (!installation) throw notFound();
  return installation;
}

/** The fields a PATCH writes: the user as given, and `permission_updated_at` only on a new permission. */
export function patchedFields(existing: Installation, patch: InstallationPatch, now: Date) {
  const permissionChanged = patch.permission !== undefined && patch.permission !== existing.permission;
  return {
    userId: patch.user_id !== undefined ? patch.user_id : existing.userId,
    permission: permissionChanged ? patch.permission! : existing.permission,
    permissionUpdatedAt: permissionChanged ? now : existing.permissionUpdatedAt,
    lastSeenAt: now,
  };
}

export async function updateInstallation(
  em: EntityManager,
  applicationId: string,
  installationId: string,
  patch: InstallationPatch,
): Promise<Installation> {
  return em.transactional(async (tx) => {
    const installation = await tx.findOne(
      Installation,
      { applicationId, installationId },
      { lockMode: LockMode.PESSIMISTIC_WRITE },
    );
    if (!installation) throw notFound();
    tx.assign(installation, patchedFields(installation, patch, new Date()));
    return installation;
  });
}

export async function deleteInstallation(
  em: EntityManager,
  applicationId: string,
  installationId: string,
): Promise<void> {
  const deleted = await em.nativeDelete(Installation, { applicationId, installationId });
  if (deleted === 0) throw notFound();
}

export function installationView(installation: Installation): InstallationView {
  return {
    id: installation.id,
    installation_id: installation.installationId,
    platform: installation.platform,
    provider_identifier_type: providerIdentifierType[installation.platform],
    status: installation.status,
    permission: installation.permission,
    device: deviceDetails(installation.device),
    registered_at: installation.registeredAt.toISOString(),
    last_seen_at: installation.lastSeenAt.toISOString(),
    identifier_updated_at: installation.identifierUpdatedAt.toISOString(),
    user_id: installation.userId ?? null,
    permission_updated_at: installation.permissionUpdatedAt.toISOString(),
    invalidated_at: installation.invalidatedAt?.toISOString() ?? null,
    invalid_reason: installation.invalidReason ?? null,
  };
}

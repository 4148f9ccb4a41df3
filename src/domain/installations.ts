// Installation rules: PUT is a full replace that keeps history fields (and the tags, unless it
// gives them), PATCH changes the user, the permission or some tags, and another application's
// installation does not exist. Each write is one statement (db/sql/installations.ts:
// upsertInstallation and patchInstallation state what they keep and move). Writing tags takes
// `installations:tag` besides the operation's own ability.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../generated/api.ts';
import { decodeCursor, toPage } from './cursor.ts';
import { notFound, validationFailed } from './errors.ts';
import { demand } from './tokens.ts';
import { providerIdentifierType } from './platforms.ts';
import { subscriptionKeyProblems, webPushEndpointProblem, type EndpointRules } from './web-push.ts';
import type { DeviceDetails, PushKeys } from '../db/entities.ts';
import {
  deleteInstallationRow,
  findInstallationRow,
  listUserInstallationRows,
  patchInstallation,
  upsertInstallation,
  type InstallationRow,
  type Invalidation,
} from '../db/sql/installations.ts';
import { retriedOnDeadlock } from '../db/sql/execute.ts';

type Schemas = components['schemas'];
export type InstallationInput = Schemas['InstallationPut'];
export type InstallationPatch = Schemas['InstallationPatch'];
export type InstallationView = Schemas['Installation'];

const deviceFields = ['app_version', 'os_version', 'model', 'locale', 'timezone'] as const;

/**
 * Whether a provider's report that an identifier is dead invalidates the installation: only an
 * active one still registered with the identifier the push went to, and, when the provider dates
 * its report (APNs dates a 410: when it found the token invalid), only a report dated at or after
 * the identifier's last change. An older one concerns an identifier the device has replaced since:
 * it is stale. A report without a date (FCM, APNs's other reasons) is never stale. The statement
 * that writes the invalidation (db/sql/installations.ts invalidateInstallations) decides, against
 * the row as it is at that moment; this is its twin, and the two must agree
 * (test/installation-invalidation.test.ts checks both on the same cases).
 */
export function invalidates(
  installation: Pick<InstallationRow, 'status' | 'providerIdentifier' | 'identifierUpdatedAt'>,
  report: Pick<Invalidation, 'providerIdentifier' | 'providerTimestamp'>,
): boolean {
  if (installation.status !== 'active' || installation.providerIdentifier !== report.providerIdentifier) return false;
  return report.providerTimestamp === null || report.providerTimestamp.getTime() >= installation.identifierUpdatedAt.getTime();
}

/** A replace is full: a device field left out becomes null. */
function deviceDetails(input: InstallationInput['device']): DeviceDetails {
  return Object.fromEntries(deviceFields.map((field) => [field, input?.[field] ?? null])) as DeviceDetails;
}

/** The most tags an installation holds (the document's Tags; a PATCH's merge is checked against it too). */
export const maxTags = 64;

/** Who writes an installation: its application, and the abilities of the token it came with. */
export type Writer = { applicationId: string; abilities: readonly string[] };

/**
 * A `web` installation's subscription keys, or a 422: its endpoint must be a push service's
 * (domain/web-push.ts) and both keys given and well formed; the other platforms take neither keys
 * nor an expiry.
 */
export function pushKeysOf(provider: InstallationInput['provider'], platform: InstallationInput['platform'], rules: EndpointRules): PushKeys | null {
  if (platform !== 'web') {
    if (provider.keys !== undefined) throw validationFailed({ 'provider.keys': ['The keys field is only for platform web (a browser subscription).'] });
    if (provider.expirationTime !== undefined) {
      throw validationFailed({ 'provider.expirationTime': ['The expirationTime field is only for platform web (a browser subscription).'] });
    }
    return null;
  }
  const endpointProblem = webPushEndpointProblem(provider.identifier, rules);
  if (endpointProblem) throw validationFailed({ 'provider.identifier': [endpointProblem] });
  if (!provider.keys) throw validationFailed({ 'provider.keys': ['The keys field is required for platform web: the p256dh and auth of the subscription.'] });
  const problems = subscriptionKeyProblems(provider.keys);
  if (Object.keys(problems).length > 0) throw validationFailed(problems);
  return { p256dh: provider.keys.p256dh, auth: provider.keys.auth, expirationTime: provider.expirationTime ?? null };
}

export async function registerInstallation(
  em: EntityManager,
  writer: Writer,
  installationId: string,
  input: InstallationInput,
  endpointRules: EndpointRules,
): Promise<{ installation: InstallationRow; created: boolean }> {
  const { applicationId } = writer;
  if (input.tags !== undefined) demand(writer.abilities, 'installations:tag');
  const pushKeys = pushKeysOf(input.provider, input.platform, endpointRules);
  const replacement = {
    platform: input.platform,
    providerIdentifier: input.provider.identifier,
    pushKeys,
    permission: input.permission ?? 'unknown',
    userId: input.user_id ?? null,
    device: deviceDetails(input.device),
    tags: input.tags,
  } as const;
  const now = new Date();
  return retriedOnDeadlock(() => upsertInstallation(em, { applicationId, installationId }, replacement, now));
}

/** The longest installation id a registration takes (the document's InstallationId), in code points. */
export const maxInstallationIdLength = 255;

/**
 * Whether an installation could have this id. Reads and deletes take any id (one no registration
 * could make names nothing: 404), and Postgres text cannot hold U+0000, so such an id is never looked up.
 */
function couldExist(installationId: string): boolean {
  return !installationId.includes('\0') && (installationId.length <= maxInstallationIdLength || Array.from(installationId).length <= maxInstallationIdLength);
}

export async function findInstallation(em: EntityManager, applicationId: string, installationId: string): Promise<InstallationRow> {
  if (!couldExist(installationId)) throw notFound();
  const installation = await findInstallationRow(em, { applicationId, installationId });
  if (!installation) throw notFound();
  return installation;
}

/**
 * A user's installations, invalid ones included (why a push did not reach a device starts here),
 * newest registration first. The cursor is the last row id of the previous page.
 */
export async function listUserInstallations(
  em: EntityManager,
  applicationId: string,
  page: { userId: string; limit: number; cursor?: string },
): Promise<{ installations: InstallationRow[]; nextCursor: string | null }> {
  const before = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const rows = await listUserInstallationRows(em, applicationId, page.userId, { limit: page.limit + 1, before });
  const { items: installations, nextCursor } = toPage(rows, page.limit);
  return { installations, nextCursor };
}

export async function updateInstallation(
  em: EntityManager,
  writer: Writer,
  installationId: string,
  patch: InstallationPatch,
): Promise<InstallationRow> {
  if (patch.tags !== undefined) demand(writer.abilities, 'installations:tag');
  const key = { applicationId: writer.applicationId, installationId };
  const changes = { userId: patch.user_id, permission: patch.permission, tags: patch.tags };
  const now = new Date();
  const installation = await retriedOnDeadlock(() => patchInstallation(em, key, changes, now, maxTags));
  if (installation) return installation;
  // Nothing written: no such installation, or too many tags once merged.
  if (patch.tags !== undefined && (await findInstallationRow(em, key))) {
    throw validationFailed({ tags: [`The tags field must have at most ${maxTags} tags once merged with the installation's.`] });
  }
  throw notFound();
}

export async function deleteInstallation(em: EntityManager, applicationId: string, installationId: string): Promise<void> {
  if (!couldExist(installationId)) throw notFound();
  if (!(await deleteInstallationRow(em, { applicationId, installationId }))) throw notFound();
}

export function installationView(installation: InstallationRow): InstallationView {
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
    tags: installation.tags,
  };
}

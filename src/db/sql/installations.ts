// Installations: a client's registration (PUT, PATCH), its reads, and a provider's invalidations.
import { sql } from 'kysely';
import type { components } from '../../generated/api.ts';
import { arrayLiteral } from '../array-literal.ts';
import type { DeviceDetails, PushKeys, Tags } from '../entities.ts';
import { newId } from '../ids.ts';
import { type Db, asDate, rows } from './execute.ts';
import { markTagsChanged } from './tags.ts';

export type InstallationRow = {
  id: string;
  installationId: string;
  platform: components['schemas']['Platform'];
  providerIdentifier: string;
  /** A `web` installation's subscription keys; null for the other platforms. */
  pushKeys: PushKeys | null;
  status: components['schemas']['Installation']['status'];
  permission: components['schemas']['Permission'];
  userId: string | null;
  device: DeviceDetails;
  registeredAt: Date;
  lastSeenAt: Date;
  identifierUpdatedAt: Date;
  permissionUpdatedAt: Date;
  invalidatedAt: Date | null;
  invalidReason: string | null;
  tags: Tags;
};

const installationColumns = sql`
  id, installation_id as "installationId", platform, provider_identifier as "providerIdentifier", push_keys as "pushKeys", status, permission,
  user_id as "userId", device, registered_at as "registeredAt", last_seen_at as "lastSeenAt",
  identifier_updated_at as "identifierUpdatedAt", permission_updated_at as "permissionUpdatedAt",
  invalidated_at as "invalidatedAt", invalid_reason as "invalidReason", tags`;

const installationRow = (row: InstallationRow): InstallationRow => ({
  ...row,
  registeredAt: asDate(row.registeredAt),
  lastSeenAt: asDate(row.lastSeenAt),
  identifierUpdatedAt: asDate(row.identifierUpdatedAt),
  permissionUpdatedAt: asDate(row.permissionUpdatedAt),
  invalidatedAt: row.invalidatedAt && asDate(row.invalidatedAt),
});

export type InstallationKey = { applicationId: string; installationId: string };
/** `tags` undefined: the stored ones are kept (a new installation has none). */
export type InstallationReplacement = Pick<InstallationRow, 'platform' | 'providerIdentifier' | 'permission' | 'userId' | 'device'> & { pushKeys?: PushKeys | null; tags?: Tags };

/**
 * A PUT, in one statement: a full replace of what the client gives that keeps `registered_at`,
 * moves `identifier_updated_at` and `permission_updated_at` only when those values change, and
 * keeps an installation a provider invalidated invalid unless the identifier is new (the app got
 * a fresh token). A web subscription's identifier is its endpoint and its keys together: new keys
 * on the same endpoint are a new subscription (the expiry alone is not). Concurrent first registrations meet on the unique key: one creates, the others
 * replace. `created`: no row existed (xmax is 0 on a freshly inserted row version). Tags are
 * replaced only when given: an app re-registers at every launch, and its backend set them. A
 * tagged installation, or tags given, marks the application's tag summary changed (db/sql/tags.ts).
 * An identifier another installation of the application holds marks both as sharing it
 * (`identifier_shared`, which audience counts read). Two installations registering one identifier
 * at the same instant may each miss the other, until either registers again (at its next launch).
 */
export async function upsertInstallation(
  db: Db,
  key: InstallationKey,
  replacement: InstallationReplacement,
  now: Date,
): Promise<{ installation: InstallationRow; created: boolean }> {
  const tags = replacement.tags === undefined ? null : JSON.stringify(replacement.tags);
  const pushKeys = replacement.pushKeys ? JSON.stringify(replacement.pushKeys) : null;
  const sameIdentifier = sql`(i.provider_identifier = excluded.provider_identifier
    and (i.push_keys - 'expirationTime') is not distinct from (excluded.push_keys - 'expirationTime'))`;
  const [row] = await rows(
    db,
    sql<InstallationRow & { created: boolean }>`
      with holders as (
        select o.id, o.identifier_shared from installations o
         where o.application_id = ${key.applicationId} and o.provider_identifier = ${replacement.providerIdentifier}
           and o.installation_id <> ${key.installationId}
      ), flagged as (
        update installations o set identifier_shared = true from holders h where o.id = h.id and not h.identifier_shared
      ), upserted as (
      insert into installations as i
        (id, application_id, installation_id, platform, provider_identifier, push_keys, status, permission, user_id, device,
         registered_at, last_seen_at, identifier_updated_at, permission_updated_at, invalidated_at, invalid_reason, tags,
         identifier_shared)
      values (${newId()}, ${key.applicationId}, ${key.installationId}, ${replacement.platform}, ${replacement.providerIdentifier},
              ${pushKeys}::jsonb, 'active', ${replacement.permission}, ${replacement.userId}, ${JSON.stringify(replacement.device)}::jsonb,
              ${now}, ${now}, ${now}, ${now}, null, null, coalesce(${tags}::jsonb, '{}'), exists (select from holders))
      on conflict (application_id, installation_id) do update set
        identifier_shared = i.identifier_shared or excluded.identifier_shared,
        platform = excluded.platform, provider_identifier = excluded.provider_identifier, push_keys = excluded.push_keys,
        permission = excluded.permission,
        user_id = excluded.user_id, device = excluded.device, last_seen_at = excluded.last_seen_at,
        tags = coalesce(${tags}::jsonb, i.tags),
        identifier_updated_at = case when ${sameIdentifier} then i.identifier_updated_at else excluded.identifier_updated_at end,
        permission_updated_at = case when i.permission = excluded.permission then i.permission_updated_at else excluded.permission_updated_at end,
        status = case when ${sameIdentifier} then i.status else 'active' end,
        invalidated_at = case when ${sameIdentifier} then i.invalidated_at end,
        invalid_reason = case when ${sameIdentifier} then i.invalid_reason end
      returning i.*, (xmax = 0) as created
      ), marked as (
        -- Untagged before and after (tags are kept unless given): the summary cannot have changed.
        ${markTagsChanged(sql`select application_id from upserted where tags <> '{}' or ${tags}::jsonb is not null`)}
      )
      select ${installationColumns}, created from upserted`,
  );
  const { created, ...installation } = row;
  return { installation: installationRow(installation), created };
}

/** `tags`: a string value sets the key, null removes it, keys left out are kept. */
export type InstallationPatch = { userId?: string | null; permission?: InstallationRow['permission']; tags?: Record<string, string | null> };

/**
 * A PATCH: the user as given (null detaches it), `permission_updated_at` only on a new permission,
 * and the tags merged. Undefined, with nothing written, when there is no such installation or
 * when the merged tags would be more than `maxTags` (the caller tells the two apart). A patch of
 * tags marks the application's tag summary changed.
 */
export async function patchInstallation(
  db: Db,
  key: InstallationKey,
  patch: InstallationPatch,
  now: Date,
  maxTags: number,
): Promise<InstallationRow | undefined> {
  const permission = patch.permission ?? null;
  const entries = Object.entries(patch.tags ?? {});
  const set = JSON.stringify(Object.fromEntries(entries.filter(([, value]) => value !== null)));
  const removed = arrayLiteral(entries.filter(([, value]) => value === null).map(([name]) => name));
  const merged = patch.tags === undefined ? sql`i.tags` : sql`((i.tags || ${set}::jsonb) - ${removed}::text[])`;
  // Only a patch of tags can change the tag summary.
  const marked = patch.tags === undefined ? sql`` : sql`, marked as (${markTagsChanged(sql`select application_id from patched`)})`;
  const [row] = await rows(
    db,
    sql<InstallationRow>`
      with patched as (
      update installations i set
        tags = ${merged},
        user_id = ${patch.userId === undefined ? sql`i.user_id` : sql`${patch.userId}`},
        permission = coalesce(${permission}, i.permission),
        permission_updated_at = case when ${permission}::text is distinct from i.permission::text and ${permission}::text is not null
                                     then ${now} else i.permission_updated_at end,
        last_seen_at = ${now}
       where application_id = ${key.applicationId} and installation_id = ${key.installationId}
         and (select count(*) from jsonb_object_keys(${merged})) <= ${maxTags}
      returning i.*
      )${marked}
      select ${installationColumns} from patched`,
  );
  return row && installationRow(row);
}

/** Deletes the installation; false when there was none. A tagged one marks the tag summary changed. */
export async function deleteInstallationRow(db: Db, key: InstallationKey): Promise<boolean> {
  const [{ deleted }] = await rows(
    db,
    sql<{ deleted: number }>`
      with gone as (
        delete from installations where application_id = ${key.applicationId} and installation_id = ${key.installationId}
        returning application_id, tags
      ), marked as (
        ${markTagsChanged(sql`select application_id from gone where tags <> '{}'`)}
      )
      select count(*)::int as deleted from gone`,
  );
  return deleted > 0;
}

export async function findInstallationRow(db: Db, key: InstallationKey): Promise<InstallationRow | undefined> {
  const [row] = await rows(
    db,
    sql<InstallationRow>`select ${installationColumns} from installations where application_id = ${key.applicationId} and installation_id = ${key.installationId}`,
  );
  return row && installationRow(row);
}

/**
 * A user's installations, newest registration first, after the cursor's id: the row id is a
 * UUIDv7 made at the first registration (a replace keeps it), so id order is registration order.
 * The (application_id, user_id, id) index gives a page in order, however many the user has.
 */
export async function listUserInstallationRows(
  db: Db,
  applicationId: string,
  userId: string,
  page: { limit: number; before?: string },
): Promise<InstallationRow[]> {
  const before = page.before === undefined ? sql`` : sql`and id < ${page.before}`;
  const found = await rows(
    db,
    sql<InstallationRow>`
      select ${installationColumns} from installations
       where application_id = ${applicationId} and user_id = ${userId} ${before}
       order by id desc limit ${page.limit}`,
  );
  return found.map(installationRow);
}

export type Invalidation = { installationRowId: string; providerIdentifier: string; reason: string; providerTimestamp: Date | null };

/**
 * Invalidates installations whose identifier the provider declared dead, unless the device has
 * registered a new one since: the identifier must still be the one we sent to, and a provider's
 * date (APNs dates its 410: when it found the token invalid) older than the last identifier change
 * concerns an identifier the device has replaced, so it is stale. A report without a date (FCM,
 * APNs's other reasons) is never stale. Returns the installations it invalidated, as they now are;
 * tagged ones mark their application's tag summary changed (db/sql/tags.ts), in the same statement.
 * The rule has a pure twin, domain/installations.ts invalidates: the two must agree
 * (test/installation-invalidation.test.ts checks both on the same cases).
 */
export async function invalidateInstallations(db: Db, invalidations: Invalidation[]): Promise<InstallationRow[]> {
  if (invalidations.length === 0) return [];
  const invalidated = await rows(
    db,
    sql<InstallationRow>`
      with invalidated as (
      update installations i
         set status = 'invalid', invalidated_at = now(), invalid_reason = v.reason
        from unnest(${arrayLiteral(invalidations.map((v) => v.installationRowId))}::uuid[],
                    ${arrayLiteral(invalidations.map((v) => v.providerIdentifier))}::text[],
                    ${arrayLiteral(invalidations.map((v) => v.reason))}::text[],
                    ${arrayLiteral(invalidations.map((v) => v.providerTimestamp?.toISOString() ?? null))}::timestamptz[])
          as v(row_id, sent_identifier, reason, provider_timestamp)
       where i.id = v.row_id and i.status = 'active' and i.provider_identifier = v.sent_identifier
         and (v.provider_timestamp is null or v.provider_timestamp >= i.identifier_updated_at)
      returning i.*
      ), marked as (
        ${markTagsChanged(sql`select application_id from invalidated where tags <> '{}'`)}
      )
      select ${installationColumns} from invalidated`,
  );
  return invalidated.map(installationRow);
}

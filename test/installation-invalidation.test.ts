// The statement that invalidates installations on a provider's report decides at write time; its
// pure twin (domain/installations.ts invalidates) must decide the same on the same cases.
import { randomUUID } from 'node:crypto';
import { migrate, openOrm, type Orm } from '../src/db/orm.ts';
import { invalidateInstallations, upsertInstallation } from '../src/db/sql/installations.ts';
import { createApplication } from '../src/domain/applications.ts';
import { invalidates } from '../src/domain/installations.ts';
import { databaseUrl } from './support/harness.ts';
import { identifierChangedAt, invalidationCases } from './support/invalidation-cases.ts';

const noDevice = { app_version: null, os_version: null, model: null, locale: null, timezone: null };

let orm: Orm;
let applicationId: string;

beforeAll(async () => {
  orm = await openOrm(databaseUrl(), 2);
  await migrate(orm);
  applicationId = (await createApplication(orm.em.fork(), 'installation-invalidation')).id;
});
afterAll(() => orm.close());

test.each(invalidationCases)('$name: the statement and its twin both answer $invalidates', async ({ installation, report, invalidates: expected }) => {
  const em = orm.em.fork();
  const { installation: row } = await upsertInstallation(
    em,
    { applicationId, installationId: randomUUID() },
    { platform: 'ios', providerIdentifier: installation.providerIdentifier, permission: 'authorized', userId: 'user', device: noDevice },
    identifierChangedAt,
  );
  if (installation.status === 'invalid') await em.execute(`update installations set status = 'invalid' where id = ?`, [row.id]);
  const invalidated = await invalidateInstallations(em, [{ installationRowId: row.id, reason: 'Unregistered', ...report }]);
  expect(invalidated.map((found) => found.id)).toEqual(expected ? [row.id] : []);
  expect(invalidates({ ...installation, identifierUpdatedAt: row.identifierUpdatedAt }, report)).toBe(expected);
});

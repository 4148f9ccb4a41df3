// A provider's report that an identifier is dead, against the installation as it stands: the
// cases on which the statement that invalidates (db/sql/installations.ts invalidateInstallations)
// and its pure twin (domain/installations.ts invalidates) must agree.
export const identifierChangedAt = new Date('2026-03-01T12:00:00.000Z');
const minutes = (n: number) => new Date(identifierChangedAt.getTime() + n * 60_000);

export type InvalidationCase = {
  name: string;
  installation: { status: 'active' | 'invalid'; providerIdentifier: string };
  report: { providerIdentifier: string; providerTimestamp: Date | null };
  invalidates: boolean;
};

export const invalidationCases: InvalidationCase[] = [
  {
    name: 'an undated report (FCM) on the identifier the push went to',
    installation: { status: 'active', providerIdentifier: 'sent' },
    report: { providerIdentifier: 'sent', providerTimestamp: null },
    invalidates: true,
  },
  {
    name: 'an APNs 410 dated after the identifier was registered',
    installation: { status: 'active', providerIdentifier: 'sent' },
    report: { providerIdentifier: 'sent', providerTimestamp: minutes(5) },
    invalidates: true,
  },
  {
    name: 'an APNs 410 dated the very moment the identifier was registered',
    installation: { status: 'active', providerIdentifier: 'sent' },
    report: { providerIdentifier: 'sent', providerTimestamp: minutes(0) },
    invalidates: true,
  },
  {
    name: 'a stale APNs 410, dated before the identifier was registered again',
    installation: { status: 'active', providerIdentifier: 'sent' },
    report: { providerIdentifier: 'sent', providerTimestamp: minutes(-60) },
    invalidates: false,
  },
  {
    name: 'a report on an identifier the device has replaced since the push',
    installation: { status: 'active', providerIdentifier: 'fresh' },
    report: { providerIdentifier: 'sent', providerTimestamp: null },
    invalidates: false,
  },
  {
    name: 'a report on an installation already invalid',
    installation: { status: 'invalid', providerIdentifier: 'sent' },
    report: { providerIdentifier: 'sent', providerTimestamp: minutes(5) },
    invalidates: false,
  },
];

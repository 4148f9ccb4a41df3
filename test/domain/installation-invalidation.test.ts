// Whether a provider's report that a device's identifier is dead invalidates its installation, on
// plain values (test/installation-invalidation.test.ts checks the statement agrees on each case).
import { invalidates } from '../../src/domain/installations.ts';
import { identifierChangedAt, invalidationCases } from '../support/invalidation-cases.ts';

test.each(invalidationCases)('$name: invalidates is $invalidates', ({ installation, report, invalidates: expected }) => {
  expect(invalidates({ ...installation, identifierUpdatedAt: identifierChangedAt }, report)).toBe(expected);
});

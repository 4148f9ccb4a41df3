// The audience rules a schema cannot state alone, as plain values: something to match, `all` alone,
// and each tag operator's operand (the document states them too; the CLI and other callers rely on these).
import { allWithConditionsMessage, audienceErrors, emptyAudienceMessage, isEveryone, type Audience } from '../../src/domain/audiences.ts';

const errorsOf = (audience: Audience) => ({ ...audienceErrors(audience, 'audience') });

test('an audience with no condition, and not all: true, is refused: a broadcast is never an accident', () => {
  expect(errorsOf({})).toEqual({ audience: [emptyAudienceMessage] });
  expect(errorsOf({ platforms: [], tags: [], locales: [] })).toEqual({ audience: [emptyAudienceMessage] });
  expect(errorsOf({ all: true })).toEqual({});
});

test('all: true stands alone', () => {
  expect(errorsOf({ all: true, active_within_days: 3 })).toEqual({ audience: [allWithConditionsMessage] });
  expect(isEveryone({ all: true })).toBe(true);
  expect(isEveryone({ platforms: ['ios'] })).toBe(false);
});

test.each<[string, Audience['tags'], Record<string, string[]>]>([
  ['eq with value', [{ key: 'k', op: 'eq', value: 'v' }], {}],
  ['ne without value', [{ key: 'k', op: 'ne' }], { 'audience.tags.0.value': ['The value field is required when op is ne.'] }],
  ['in with values', [{ key: 'k', op: 'in', values: ['a'] }], {}],
  [
    'in with value instead',
    [{ key: 'k', op: 'in', value: 'a' }],
    { 'audience.tags.0.value': ['The value field is not allowed when op is in.'], 'audience.tags.0.values': ['The values field is required when op is in.'] },
  ],
  ['exists alone', [{ key: 'k', op: 'exists' }], {}],
  ['not_exists with values', [{ key: 'k', op: 'not_exists', values: ['a'] }], { 'audience.tags.0.values': ['The values field is not allowed when op is not_exists.'] }],
  ['the second condition named by its index', [{ key: 'k', op: 'exists' }, { key: 'k', op: 'eq' }], { 'audience.tags.1.value': ['The value field is required when op is eq.'] }],
])('a tag condition: %s', (_, tags, expected) => {
  expect(errorsOf({ tags })).toEqual(expected);
});

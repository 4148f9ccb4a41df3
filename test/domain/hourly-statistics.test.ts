// The hourly statistics' range and the hours it answers, without I/O: the defaults, the 31-day
// bound and the rule of every date-time, and every hour of the range present, zeros included.
import { everyHour, hourRange, maxRangeDays } from '../../src/domain/hourly-statistics.ts';

const now = new Date('2026-12-04T10:37:12.345Z');
const hour = 3_600_000;

describe('hourRange', () => {
  test('to defaults to now and from to 24 hours before to; from is cut to the start of its UTC hour', () => {
    expect(hourRange({}, now)).toEqual({ range: { from: new Date('2026-12-03T10:00:00Z'), to: now } });
    expect(hourRange({ to: '2026-12-02T00:00:00Z' }, now)).toEqual({
      range: { from: new Date('2026-12-01T00:00:00Z'), to: new Date('2026-12-02T00:00:00Z') },
    });
    expect(hourRange({ from: '2026-12-04T03:59:59.999+02:00' }, now)).toEqual({ range: { from: new Date('2026-12-04T01:00:00Z'), to: now } });
  });

  test(`a range of exactly ${maxRangeDays} days is answered; a millisecond more is 422 naming to, or from when to was left out`, () => {
    expect('range' in hourRange({ from: '2026-11-01T00:00:00Z', to: '2026-12-02T00:00:00Z' }, now)).toBe(true);
    expect(hourRange({ from: '2026-11-01T00:00:00Z', to: '2026-12-02T00:00:00.001Z' }, now)).toEqual({
      errors: { to: [`The to field must be at most ${maxRangeDays} days after from.`] },
    });
    expect(hourRange({ from: '2026-10-01T00:00:00Z' }, now)).toEqual({
      errors: { from: [`The from field must be at most ${maxRangeDays} days before to (now, when to is left out).`] },
    });
  });

  test('to not after from is 422', () => {
    expect(hourRange({ from: '2026-12-01T00:00:00Z', to: '2026-12-01T00:00:00Z' }, now)).toEqual({ errors: { to: ['The to field must be after from.'] } });
    expect(hourRange({ from: '2026-12-05T00:00:00Z' }, now)).toEqual({
      errors: { from: ['The from field must be before to (now, when to is left out).'] },
    });
  });

  test('each date-time follows the rule of every date-time a client gives, and each problem names its field', () => {
    const refused = hourRange({ from: '0000-12-31T00:00:00Z', to: '2026-12-31T23:59:60Z' }, now);
    expect(Object.keys('errors' in refused ? refused.errors : {})).toEqual(['from', 'to']);
  });
});

describe('everyHour', () => {
  test('answers every hour of the range oldest first, the counted ones with their counts, the others zeros', () => {
    const range = { from: new Date('2026-12-04T07:00:00Z'), to: new Date('2026-12-04T10:00:00.001Z') };
    const hours = everyHour(range, [{ hour: new Date('2026-12-04T09:00:00Z'), sends: 2, accepted: 5, failed: 1, skipped: 3, opens: 4 }]);
    expect(hours).toEqual([
      { hour: '2026-12-04T07:00:00.000Z', sends: 0, accepted: 0, failed: 0, skipped: 0, opens: 0 },
      { hour: '2026-12-04T08:00:00.000Z', sends: 0, accepted: 0, failed: 0, skipped: 0, opens: 0 },
      { hour: '2026-12-04T09:00:00.000Z', sends: 2, accepted: 5, failed: 1, skipped: 3, opens: 4 },
      { hour: '2026-12-04T10:00:00.000Z', sends: 0, accepted: 0, failed: 0, skipped: 0, opens: 0 },
    ]);
  });

  test('the widest range answers at most 745 hours', () => {
    const asked = hourRange({ from: '2026-11-01T00:30:00Z', to: '2026-12-02T00:30:00Z' }, now);
    if (!('range' in asked)) throw new Error('refused');
    expect(everyHour(asked.range, [])).toHaveLength(31 * 24 + 1);
    expect(asked.range.to.getTime() - asked.range.from.getTime()).toBeLessThanOrEqual(745 * hour);
  });
});

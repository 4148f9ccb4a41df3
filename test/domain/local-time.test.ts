// Delivery at each device's local time, on fixed instants: the same-minute rule, the next
// occurrence, daylight saving's gap and overlap, offsets of 30 and 45 minutes, the fallback zone,
// and the option rules a send is checked against.
import {
  dueByTimezone,
  dueInstant,
  isTimeZone,
  localTimeProblems,
  localTimeRule,
  parseLocalTime,
  planWaves,
  zoneOf,
} from '../../src/domain/local-time.ts';

const at = (iso: string) => new Date(iso);
const time = (text: string) => parseLocalTime(text)!;
const due = (localTime: string, zone: string, start: string) => dueInstant(time(localTime), zone, at(start)).toISOString();

describe('dueInstant', () => {
  test('within the minute at the start: the start itself, to the millisecond', () => {
    // 09:00:00 and 09:00:59.999 in Berlin (CET, UTC+1).
    expect(due('09:00', 'Europe/Berlin', '2027-01-15T08:00:00.000Z')).toBe('2027-01-15T08:00:00.000Z');
    expect(due('09:00', 'Europe/Berlin', '2027-01-15T08:00:59.999Z')).toBe('2027-01-15T08:00:59.999Z');
  });

  test('a second after the minute: the next day; a second before it: the minute itself', () => {
    expect(due('09:00', 'Europe/Berlin', '2027-01-15T08:01:00.000Z')).toBe('2027-01-16T08:00:00.000Z');
    expect(due('09:00', 'Europe/Berlin', '2027-01-15T07:59:59.000Z')).toBe('2027-01-15T08:00:00.000Z');
  });

  test("the issue's campaign: sent at 08:00 UTC for 09:00, Berlin now and New York five hours later", () => {
    expect(due('09:00', 'Europe/Berlin', '2027-01-15T08:00:00Z')).toBe('2027-01-15T08:00:00.000Z');
    expect(due('09:00', 'America/New_York', '2027-01-15T08:00:00Z')).toBe('2027-01-15T14:00:00.000Z');
  });

  test('later today, and tomorrow when today\'s has passed, across midnight and the new year', () => {
    expect(due('18:30', 'Asia/Tokyo', '2027-01-15T00:00:00Z')).toBe('2027-01-15T09:30:00.000Z');
    expect(due('08:00', 'Asia/Tokyo', '2027-01-15T00:00:00Z')).toBe('2027-01-15T23:00:00.000Z');
    expect(due('00:00', 'UTC', '2027-12-31T23:59:00Z')).toBe('2028-01-01T00:00:00.000Z');
    expect(due('23:59', 'UTC', '2028-01-01T00:00:00Z')).toBe('2028-01-01T23:59:00.000Z');
  });

  test('Berlin springs forward (2027-03-28, 02:00 CET → 03:00 CEST): 02:30 goes at 03:00 CEST, the first minute after the gap', () => {
    expect(due('02:30', 'Europe/Berlin', '2027-03-27T12:00:00Z')).toBe('2027-03-28T01:00:00.000Z');
    // Within that first minute after the gap: at once.
    expect(due('02:30', 'Europe/Berlin', '2027-03-28T01:00:30Z')).toBe('2027-03-28T01:00:30.000Z');
    // Past it: the next day's 02:30, which exists (CEST).
    expect(due('02:30', 'Europe/Berlin', '2027-03-28T01:01:00Z')).toBe('2027-03-29T00:30:00.000Z');
    // Times either side of the gap are unmoved.
    expect(due('01:59', 'Europe/Berlin', '2027-03-27T12:00:00Z')).toBe('2027-03-28T00:59:00.000Z');
    expect(due('03:00', 'Europe/Berlin', '2027-03-27T12:00:00Z')).toBe('2027-03-28T01:00:00.000Z');
  });

  test('Berlin falls back (2027-10-31, 03:00 CEST → 02:00 CET): 02:30 happens twice and goes at the first', () => {
    expect(due('02:30', 'Europe/Berlin', '2027-10-30T12:00:00Z')).toBe('2027-10-31T00:30:00.000Z');
    // Between the two: the second is no new occurrence, so the next is the day after.
    expect(due('02:30', 'Europe/Berlin', '2027-10-31T01:00:00Z')).toBe('2027-11-01T01:30:00.000Z');
    // The wall clock reads 02:30 during the second too: the same-minute rule sends at once.
    expect(due('02:30', 'Europe/Berlin', '2027-10-31T01:30:10Z')).toBe('2027-10-31T01:30:10.000Z');
    expect(due('03:00', 'Europe/Berlin', '2027-10-30T12:00:00Z')).toBe('2027-10-31T02:00:00.000Z');
  });

  test('a gap at midnight (Santiago, 2027-09-05, 00:00 → 01:00): 00:30 goes at 01:00 the same day', () => {
    expect(due('00:30', 'America/Santiago', '2027-09-04T12:00:00Z')).toBe('2027-09-05T04:00:00.000Z');
  });

  test('New York, whose clocks change at 02:00 local too (2027-03-14 and 2027-11-07)', () => {
    expect(due('02:15', 'America/New_York', '2027-03-13T12:00:00Z')).toBe('2027-03-14T07:00:00.000Z');
    expect(due('01:30', 'America/New_York', '2027-11-06T12:00:00Z')).toBe('2027-11-07T05:30:00.000Z');
  });

  test('zones 45 and 30 minutes off the hour (Kathmandu UTC+05:45, Adelaide UTC+10:30 in January)', () => {
    expect(due('09:00', 'Asia/Kathmandu', '2027-01-10T00:00:00Z')).toBe('2027-01-10T03:15:00.000Z');
    expect(due('05:45', 'Asia/Kathmandu', '2027-01-10T00:00:00Z')).toBe('2027-01-10T00:00:00.000Z');
    expect(due('09:00', 'Australia/Adelaide', '2027-01-10T00:00:00Z')).toBe('2027-01-10T22:30:00.000Z');
  });

  test('a name Node knows in any letter case or as an alias gives the same instant', () => {
    const start = '2027-07-01T00:00:00Z';
    expect(due('09:00', 'US/Eastern', start)).toBe(due('09:00', 'America/New_York', start));
    expect(due('09:00', 'europe/berlin', start)).toBe(due('09:00', 'Europe/Berlin', start));
    expect(due('09:00', 'Etc/UTC', start)).toBe('2027-07-01T09:00:00.000Z');
  });
});

describe('zones', () => {
  test('IANA names and their aliases are zones; offsets, unknown names and empty text are not', () => {
    for (const zone of ['UTC', 'Etc/UTC', 'GMT', 'US/Eastern', 'Europe/Kyiv', 'Asia/Calcutta', 'America/Argentina/ComodRivadavia', 'Etc/GMT+5']) {
      expect([zone, isTimeZone(zone)]).toEqual([zone, true]);
    }
    for (const zone of ['+05:00', '-0300', '\u221205:00', 'Mars/Olympus_Mons', 'Europe', '', 'Europe/Berlin ']) {
      expect([zone, isTimeZone(zone)]).toEqual([zone, false]);
    }
  });

  test("an installation without a time zone, or with one that is not a zone, takes the send's", () => {
    expect(zoneOf('Asia/Tokyo', 'Europe/Berlin')).toBe('Asia/Tokyo');
    expect(zoneOf(null, 'Europe/Berlin')).toBe('Europe/Berlin');
    expect(zoneOf(undefined, 'Europe/Berlin')).toBe('Europe/Berlin');
    expect(zoneOf('Berlin', 'Europe/Berlin')).toBe('Europe/Berlin');
    expect(zoneOf('+01:00', 'UTC')).toBe('UTC');
  });

  test('the fallback zone is options.timezone, UTC by default', () => {
    expect(localTimeRule({})).toBeNull();
    expect(localTimeRule({ local_time: '09:00' })).toEqual({ localTime: { hour: 9, minute: 0 }, fallbackZone: 'UTC' });
    expect(localTimeRule({ local_time: '09:00', timezone: 'America/Chicago' })).toEqual({ localTime: { hour: 9, minute: 0 }, fallbackZone: 'America/Chicago' });
    const start = at('2027-01-15T08:00:00Z');
    const dueOf = dueByTimezone(localTimeRule({ local_time: '09:00' })!, start);
    expect(dueOf(null).toISOString()).toBe('2027-01-15T09:00:00.000Z');
    expect(dueOf('not a zone').toISOString()).toBe('2027-01-15T09:00:00.000Z');
    expect(dueOf('Europe/Berlin')).toBe(start);
    const chicago = dueByTimezone(localTimeRule({ local_time: '09:00', timezone: 'America/Chicago' })!, start);
    expect(chicago(null).toISOString()).toBe('2027-01-15T15:00:00.000Z');
    expect(chicago('Europe/Paris')).toBe(start);
  });
});

describe('planWaves', () => {
  test("a broadcast's distinct time zones grouped by the instant they are due, earliest first", () => {
    const rule = localTimeRule({ local_time: '09:00' })!;
    const waves = planWaves(['Europe/Paris', 'America/New_York', null, 'Europe/Berlin', 'bogus', 'US/Eastern', 'Etc/UTC'], rule, at('2027-01-15T08:00:00Z'));
    expect(waves).toEqual([
      { dueAt: at('2027-01-15T08:00:00Z'), timezones: ['Europe/Berlin', 'Europe/Paris'], coversNull: false },
      // The fallback zone (UTC): installations without a zone or with an invalid one.
      { dueAt: at('2027-01-15T09:00:00Z'), timezones: ['Etc/UTC', 'bogus'], coversNull: true },
      { dueAt: at('2027-01-15T14:00:00Z'), timezones: ['America/New_York', 'US/Eastern'], coversNull: false },
    ]);
  });
});

describe('option rules', () => {
  test('local_time is HH:MM, 24-hour', () => {
    expect(parseLocalTime('00:00')).toEqual({ hour: 0, minute: 0 });
    expect(parseLocalTime('23:59')).toEqual({ hour: 23, minute: 59 });
    for (const bad of ['24:00', '9:00', '09:60', '09:00:00', '0900', ' 09:00', '09:00 ', '٠٩:٠٠']) expect([bad, parseLocalTime(bad)]).toEqual([bad, null]);
    expect(Object.keys(localTimeProblems({ local_time: '25:00' }))).toEqual(['options.local_time']);
    expect(localTimeProblems({ local_time: '09:00' })).toEqual({});
  });

  test('timezone must be a zone, and needs local_time', () => {
    expect(localTimeProblems({ local_time: '09:00', timezone: 'Europe/Berlin' })).toEqual({});
    expect(localTimeProblems({ local_time: '09:00', timezone: 'Mars/Olympus_Mons' })['options.timezone'][0]).toMatch(/IANA.*"Mars\/Olympus_Mons" is not one/);
    expect(localTimeProblems({ timezone: 'Europe/Berlin' })['options.timezone'][0]).toMatch(/needs options\.local_time/);
    expect(localTimeProblems(undefined)).toEqual({});
    expect(localTimeProblems({})).toEqual({});
  });
});

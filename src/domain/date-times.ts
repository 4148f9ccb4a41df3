// One rule for every date-time a client gives (options.send_at, an event's occurred_at): RFC 3339
// with an offset (the document's format), naming an instant Herald can store and answer back in
// UTC: years 0001 to 9999 in UTC, no leap second. The format admits values that break it: a leap
// second (UTC as Postgres and JavaScript keep it has none), year 0000, or the last day of year
// 9999 with a negative offset (year 10000 in UTC). Each is refused, for every field alike, with a
// message that says which; what a field then does with an instant in range is its own rule.

const earliest = Date.parse('0001-01-01T00:00:00.000Z');
const latest = Date.parse('9999-12-31T23:59:59.999Z');

/** What a date-time may name: an instant of years 0001 to 9999 in UTC. */
export const dateTimeRange = '0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z in UTC';

const leapSecond = /T\d\d:\d\d:60/i;

/** The instant a client's date-time names, or the field error that refuses it. */
export function readDateTime(field: string, dateTime: string): { at: Date } | { problem: string } {
  if (leapSecond.test(dateTime)) {
    return { problem: `The ${field} field names a leap second (${dateTime}), which Herald cannot store: it keeps UTC without leap seconds; give the second before or after it.` };
  }
  const at = Date.parse(dateTime);
  if (at >= earliest && at <= latest) return { at: new Date(at) };
  return { problem: `The ${field} field is out of range: a date-time must name an instant from ${dateTimeRange}, and ${dateTime} does not.` };
}

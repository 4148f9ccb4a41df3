// Client date-times are RFC 3339 with an offset; what Herald stores of them it answers in UTC.
// The format admits values no UTC date-time can write back, or no Date or Postgres can hold: a
// leap second, year 0000, or the last day of year 9999 with a negative offset (year 10000 in UTC).

const earliest = Date.parse('0001-01-01T00:00:00.000Z');
const latest = Date.parse('9999-12-31T23:59:59.999Z');

/** What a date-time may name: an instant of years 0001 to 9999 in UTC. */
export const dateTimeRange = '0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z in UTC';

/** The instant a date-time names, or undefined when it is outside `dateTimeRange` or names none. */
export function instantOf(dateTime: string): Date | undefined {
  const at = Date.parse(dateTime);
  return at >= earliest && at <= latest ? new Date(at) : undefined;
}

/**
 * The one check of an RFC 3339 date-time, shared by the `DateTime` scalar (what a client sends) and
 * the webhook route (an event's `occurredAt`), so both accept exactly the same timestamps.
 */

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * Whether `value` is an RFC 3339 date-time with a real calendar date and an offset.
 * A `Date.parse` check alone accepts far too much (`"2026-02-30"`, `"Nov 22"`).
 */
export function isRfc3339DateTime(value: string): boolean {
  const match = RFC3339.exec(value);
  if (!match) return false;
  const [, year, month, day, hour, minute, second, , offsetHour, offsetMinute] = match.map(Number);
  if (month! < 1 || month! > 12 || day! < 1 || day! > daysInMonth(year!, month!)) return false;
  // Second 60 is a leap second, which RFC 3339 allows.
  if (hour! > 23 || minute! > 59 || second! > 60) return false;
  if (offsetHour !== undefined && !Number.isNaN(offsetHour) && (offsetHour > 23 || offsetMinute! > 59)) {
    return false;
  }
  return true;
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

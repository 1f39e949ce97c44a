// A token entry's `created_at` (ledger order: created_at, then file order), read exactly.
import { FormatError, show } from "../values.js";

/** A point in time: whole epoch seconds, and the digits after the decimal point (exact). */
export interface Time {
  seconds: number;
  fraction: string;
}

export function compareTimes(a: Time, b: Time): number {
  if (a.seconds !== b.seconds) return a.seconds - b.seconds;
  const digits = Math.max(a.fraction.length, b.fraction.length);
  const x = a.fraction.padEnd(digits, "0");
  const y = b.fraction.padEnd(digits, "0");
  return x < y ? -1 : x > y ? 1 : 0;
}

// Date and time with seconds and a zone (Z or ±hh:mm); any number of fractional digits.
const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:([Zz])|([+-])(\d{2}):?(\d{2}))$/;

/**
 * `created_at` as epoch seconds (a number) or an ISO 8601 time with a zone. Read exactly, not
 * through Date.parse: that keeps milliseconds only (calls a microsecond apart would tie), reads
 * a time without a zone in the machine's zone, and takes strings like "5" for a date.
 */
export function timeOf(value: unknown, label: string): Time {
  if (typeof value === "number" && Number.isFinite(value)) {
    // The digits as written (JSON numbers read back to their shortest text): 1764478800.1 and
    // "...T05:00:00.1Z" are the same instant, and 1.9999999999 stays before 2.
    const plain = /^(\d+)(?:\.(\d+))?$/.exec(String(value));
    if (plain !== null) return { seconds: Number(plain[1]), fraction: plain[2] ?? "" };
    // Negative, or in exponent form: rare enough for nanoseconds. A fraction that rounds up to a
    // whole second (-1e-10 is 0.9999999999 past -1) is the next second.
    const seconds = Math.floor(value);
    const fraction = (value - seconds).toFixed(9);
    return fraction.startsWith("1") ? { seconds: seconds + 1, fraction: "" } : { seconds, fraction: fraction.slice(2) };
  }
  const match = typeof value === "string" ? ISO_8601.exec(value) : null;
  if (match !== null) {
    const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
    const offset =
      match[8] !== undefined ? 0 : (match[9] === "-" ? -1 : 1) * (Number(match[10]) * 60 + Number(match[11])) * 60;
    const date = new Date(0);
    date.setUTCFullYear(year, month - 1, day); // (Date.UTC would read years 0–99 as 1900–1999)
    date.setUTCHours(hour, minute);
    // Date rolls over out-of-range fields (month 13, day 32): only real dates are times. Seconds
    // are added after that check, so a leap second (23:59:60 on a month's last day) is one too.
    if (date.getUTCMonth() === month - 1 && date.getUTCDate() === day && hour < 24 && minute < 60 && second <= 60) {
      return { seconds: date.getTime() / 1000 + second - offset, fraction: match[7] ?? "" };
    }
  }
  throw new FormatError(
    "missing_field",
    `${label}created_at is ${show(value)}, expected a number or an ISO 8601 time with a zone`,
  );
}

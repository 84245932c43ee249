import { ValidationError } from '../errors/index.ts';

/**
 * RFC 3339 timestamps (`2026-12-01T09:00:00Z`, `2026-12-01T11:00:00.5+02:00`). The offset is
 * mandatory: a time without one means different instants on different hosts, which a scheduler
 * cannot act on. Leap seconds (`:60`) are refused because neither JS nor Go can represent them.
 */

/** The syntax as a regular expression (JSON Schema `pattern`); the calendar is checked in code. */
export const RFC3339_PATTERN =
  '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$';

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

interface Fields {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  millis: number;
  offsetSign: 1 | -1;
  offsetHour: number;
  offsetMinute: number;
}

export type Rfc3339Parse = { ok: true; epochMs: number } | { ok: false; message: string };

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const;

function daysInMonth(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  if (month === 2 && leap) return 29;
  return DAYS_IN_MONTH[month - 1] ?? 0;
}

// Field by field, without intermediate arrays or closures: every request's times are parsed here
// at each role's validation (a drain of wake-ups parses hundreds of thousands), and its garbage
// was a share of the collector's time.
function readFields(match: RegExpExecArray): Fields {
  // Sub-millisecond digits are dropped: a JS Date (and our schedulers) count milliseconds.
  const fraction = match[7];
  const millis =
    fraction === undefined
      ? 0
      : Number(fraction.length >= 3 ? fraction.slice(0, 3) : fraction.padEnd(3, '0'));
  return {
    year: Number(match[1]),
    month: Number(match[2]),
    day: Number(match[3]),
    hour: Number(match[4]),
    minute: Number(match[5]),
    second: Number(match[6]),
    millis,
    offsetSign: match[9] === '-' ? -1 : 1,
    offsetHour: match[10] === undefined ? 0 : Number(match[10]),
    offsetMinute: match[11] === undefined ? 0 : Number(match[11]),
  };
}

/** Why the fields do not name a real instant, or undefined when they do. */
function calendarProblem(f: Fields): string | undefined {
  if (f.month < 1 || f.month > 12) return `month ${f.month} is not 01-12`;
  if (f.day < 1 || f.day > daysInMonth(f.year, f.month)) return `day ${f.day} does not exist in that month`;
  if (f.hour > 23) return `hour ${f.hour} is not 00-23`;
  if (f.minute > 59) return `minute ${f.minute} is not 00-59`;
  if (f.second > 59) return `second ${f.second} is not 00-59`;
  if (f.offsetHour > 23 || f.offsetMinute > 59) return 'the UTC offset is not within ±23:59';
  return undefined;
}

function toEpochMs(f: Fields): number {
  const offsetMs = f.offsetSign * (f.offsetHour * 60 + f.offsetMinute) * 60_000;
  if (f.year >= 100)
    return Date.UTC(f.year, f.month - 1, f.day, f.hour, f.minute, f.second, f.millis) - offsetMs;
  // setUTCFullYear, unlike Date.UTC, does not map years 0-99 to 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(f.year, f.month - 1, f.day);
  date.setUTCHours(f.hour, f.minute, f.second, f.millis);
  return date.getTime() - offsetMs;
}

/** Parses an RFC 3339 date-time with offset into epoch milliseconds, without throwing. */
export function tryParseRfc3339(text: string): Rfc3339Parse {
  const match = RFC3339.exec(text);
  if (!match) {
    return {
      ok: false,
      message: `invalid RFC 3339 time ${JSON.stringify(text)}: expected e.g. 2026-12-01T09:00:00Z or +02:00`,
    };
  }
  const fields = readFields(match);
  const problem = calendarProblem(fields);
  if (problem) return { ok: false, message: `invalid RFC 3339 time ${JSON.stringify(text)}: ${problem}` };
  return { ok: true, epochMs: toEpochMs(fields) };
}

/** Parses an RFC 3339 date-time with offset into epoch milliseconds; throws a ValidationError if invalid. */
export function parseRfc3339(text: string): number {
  const parsed = tryParseRfc3339(text);
  if (!parsed.ok) throw new ValidationError([{ path: '', message: parsed.message }]);
  return parsed.epochMs;
}

/** Epoch milliseconds as RFC 3339 in UTC with millisecond precision (what the service stamps). */
export function formatRfc3339(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

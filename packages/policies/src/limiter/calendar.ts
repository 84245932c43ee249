import type { QuotaPeriod, QuotaSpec } from '@requester/shared/contract';

/** The calendar period of a quota that holds an instant: [startMs, endMs), epoch ms. */
export interface QuotaPeriodSpan {
  startMs: number;
  endMs: number;
}

const DAY_MS = 86_400_000;

interface LocalDate {
  year: number;
  /** 1–12. */
  month: number;
  day: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, format);
  }
  return format;
}

/** The wall clock of `zone` at an instant, as if it were UTC (epoch ms, whole seconds). */
function wallClockMs(atMs: number, zone: string): number {
  const parts: Record<string, number> = {};
  for (const part of formatter(zone).formatToParts(atMs))
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  return Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
}

function localDate(atMs: number, zone: string): LocalDate {
  const wall = new Date(wallClockMs(atMs, zone));
  return { year: wall.getUTCFullYear(), month: wall.getUTCMonth() + 1, day: wall.getUTCDate() };
}

/** The date `days` after `date` (negative: before), in the proleptic Gregorian calendar. */
function addDays(date: LocalDate, days: number): LocalDate {
  const moved = new Date(Date.UTC(date.year, date.month - 1, date.day) + days * DAY_MS);
  return { year: moved.getUTCFullYear(), month: moved.getUTCMonth() + 1, day: moved.getUTCDate() };
}

const sameDate = (a: LocalDate, b: LocalDate) => a.year === b.year && a.month === b.month && a.day === b.day;

/**
 * The first instant of `date` in `zone`: its midnight, or, where the clocks jump over midnight,
 * the end of the jump. Each offset the zone has around that day is tried; of the instants that
 * fall on the date, the earliest is its start. A date the zone skipped whole (Pacific/Apia's
 * 30 December 2011, as it moved across the date line) has no instant: it starts where the jump
 * ends, with the next date, so that the periods still tile time.
 */
function startOfDay(date: LocalDate, zone: string): number {
  // No zone has skipped more than one date at once (crossing the date line westward).
  const start = firstInstantOn(date, zone) ?? firstInstantOn(addDays(date, 1), zone);
  if (start === undefined) {
    const named = new Date(Date.UTC(date.year, date.month - 1, date.day)).toISOString().slice(0, 10);
    throw new RangeError(`the time zone ${zone} has no instant on ${named} nor on the next date`);
  }
  return start;
}

/** The earliest instant on `date` in `zone`, or undefined where the zone skipped the date whole. */
function firstInstantOn(date: LocalDate, zone: string): number | undefined {
  const wallMidnight = Date.UTC(date.year, date.month - 1, date.day);
  let start: number | undefined;
  for (const probe of [wallMidnight - DAY_MS, wallMidnight, wallMidnight + DAY_MS]) {
    const offset = wallClockMs(probe, zone) - Math.floor(probe / 1000) * 1000;
    const candidate = wallMidnight - offset;
    if ((start === undefined || candidate < start) && sameDate(localDate(candidate, zone), date))
      start = candidate;
  }
  return start;
}

const daysInMonth = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate();

/** A month's reset date: the reset day, or the month's last day when it has no such day. */
function monthReset(year: number, month: number, resetDay: number): LocalDate {
  return { year, month, day: Math.min(resetDay, daysInMonth(year, month)) };
}

function shiftMonth(year: number, month: number, by: number): { year: number; month: number } {
  const index = year * 12 + (month - 1) + by;
  return { year: Math.floor(index / 12), month: (index % 12) + 1 };
}

/** The first date of the period holding `today`. */
function periodStartDate(period: QuotaPeriod, resetDay: number, today: LocalDate): LocalDate {
  if (period === 'day') return today;
  if (period === 'week') {
    const isoWeekday = new Date(Date.UTC(today.year, today.month - 1, today.day)).getUTCDay() || 7;
    return addDays(today, -((isoWeekday - resetDay + 7) % 7));
  }
  const reset = monthReset(today.year, today.month, resetDay);
  if (today.day >= reset.day) return reset;
  const previous = shiftMonth(today.year, today.month, -1);
  return monthReset(previous.year, previous.month, resetDay);
}

/** The first date of the period after the one starting on `start`. */
function nextStartDate(period: QuotaPeriod, resetDay: number, start: LocalDate): LocalDate {
  if (period === 'day') return addDays(start, 1);
  if (period === 'week') return addDays(start, 7);
  const next = shiftMonth(start.year, start.month, 1);
  return monthReset(next.year, next.month, resetDay);
}

/**
 * The period of `quota` holding the instant `atMs`: it starts at midnight of its reset day in the
 * quota's zone (UTC by default) and ends where the next one starts. Computed here rather than in
 * Redis, which knows no time zones.
 */
export function quotaPeriod(
  quota: Pick<QuotaSpec, 'period' | 'resetDay' | 'timeZone'>,
  atMs: number,
): QuotaPeriodSpan {
  const zone = quota.timeZone ?? 'UTC';
  const resetDay = quota.resetDay ?? 1;
  const start = periodStartDate(quota.period, resetDay, localDate(atMs, zone));
  return {
    startMs: startOfDay(start, zone),
    endMs: startOfDay(nextStartDate(quota.period, resetDay, start), zone),
  };
}

/** The longest period of a quota (ms): its longest wait. A day gains an hour where clocks go back. */
export function longestQuotaPeriodMs(period: QuotaPeriod): number {
  const days = period === 'day' ? 1 : period === 'week' ? 7 : 31;
  return days * DAY_MS + 3_600_000;
}

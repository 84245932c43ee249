import { QUOTA_PERIODS, type QuotaSpec } from '@requester/shared/contract';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { longestQuotaPeriodMs, quotaPeriod } from './calendar.ts';

const at = (iso: string) => Date.parse(iso);
const span = (quota: Partial<QuotaSpec> & Pick<QuotaSpec, 'period'>, iso: string) => {
  const { startMs, endMs } = quotaPeriod(quota, at(iso));
  return [new Date(startMs).toISOString(), new Date(endMs).toISOString()];
};

/** The wall clock of a zone at an instant: `YYYY-MM-DD HH:mm`. */
function wall(ms: number, timeZone: string): { date: string; time: string; weekday: string; day: number } {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      weekday: 'short',
    })
      .formatToParts(ms)
      .map((p) => [p.type, p.value]),
  );
  return {
    date: `${parts.year}-${parts.month}-${parts.day}`,
    time: `${parts.hour}:${parts.minute}`,
    weekday: String(parts.weekday),
    day: Number(parts.day),
  };
}

const DAY_MS = 86_400_000;
/** The date after `YYYY-MM-DD`. */
const dayAfter = (date: string) =>
  new Date(Date.parse(`${date}T00:00:00Z`) + DAY_MS).toISOString().slice(0, 10);

describe('quotaPeriod', () => {
  it('starts a month on its reset day, or on the last day of a month without it', () => {
    expect(span({ period: 'month', resetDay: 31 }, '2027-02-15T12:00:00Z')).toEqual([
      '2027-01-31T00:00:00.000Z',
      '2027-02-28T00:00:00.000Z',
    ]);
    expect(span({ period: 'month', resetDay: 30 }, '2028-02-29T00:00:00Z')).toEqual([
      '2028-02-29T00:00:00.000Z',
      '2028-03-30T00:00:00.000Z',
    ]);
    expect(span({ period: 'month' }, '2026-12-31T23:59:59.999Z')).toEqual([
      '2026-12-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
  });

  it('counts midnight in the quota’s zone, across a change of the clocks', () => {
    // Paris is UTC+1 on 14 March and UTC+2 from 29 March.
    expect(span({ period: 'month', resetDay: 15, timeZone: 'Europe/Paris' }, '2027-03-20T00:00:00Z')).toEqual(
      ['2027-03-14T23:00:00.000Z', '2027-04-14T22:00:00.000Z'],
    );
    // ISO week from Sunday in New York.
    expect(
      span({ period: 'week', resetDay: 7, timeZone: 'America/New_York' }, '2026-12-06T03:00:00Z'),
    ).toEqual(['2026-11-29T05:00:00.000Z', '2026-12-06T05:00:00.000Z']);
  });

  it('starts a day whose midnight the clocks jump over when the jump ends', () => {
    // Santiago skips from 00:00 to 01:00 on 6 September 2026.
    expect(span({ period: 'day', timeZone: 'America/Santiago' }, '2026-09-06T12:00:00Z')).toEqual([
      '2026-09-06T04:00:00.000Z',
      '2026-09-07T03:00:00.000Z',
    ]);
  });

  it('starts a period on a date the zone skipped whole where the jump ends, with the next date', () => {
    // Apia went from 29 December 2011 23:59:59 (UTC−10) to 31 December 00:00 (UTC+14).
    const jumpEnd = '2011-12-30T10:00:00.000Z';
    expect(span({ period: 'day', timeZone: 'Pacific/Apia' }, '2011-12-29T12:00:00Z')).toEqual([
      '2011-12-29T10:00:00.000Z',
      jumpEnd,
    ]);
    expect(span({ period: 'day', timeZone: 'Pacific/Apia' }, jumpEnd)).toEqual([
      jumpEnd,
      '2011-12-31T10:00:00.000Z',
    ]);
    expect(span({ period: 'month', resetDay: 30, timeZone: 'Pacific/Apia' }, '2011-11-30T10:00:00Z')).toEqual(
      ['2011-11-30T10:00:00.000Z', jumpEnd],
    );
    // From Friday, the weekday skipped.
    expect(span({ period: 'week', resetDay: 5, timeZone: 'Pacific/Apia' }, '2011-12-30T12:00:00Z')).toEqual([
      jumpEnd,
      '2012-01-05T10:00:00.000Z',
    ]);
  });

  it('tiles time: every instant is in one period starting at midnight of its reset day', () => {
    const zones = [
      'UTC',
      'Europe/Paris',
      'America/Santiago',
      'Asia/Kolkata',
      'Pacific/Apia',
      'Australia/Lord_Howe',
    ];
    const quotas = fc.record({
      period: fc.constantFrom(...QUOTA_PERIODS),
      resetDay: fc.integer({ min: 1, max: 31 }),
      timeZone: fc.constantFrom(...zones),
    });
    const instants = fc.integer({ min: at('1990-01-01T00:00:00Z'), max: at('2090-01-01T00:00:00Z') });
    fc.assert(
      fc.property(quotas, instants, (q, nowMs) => {
        const quota: QuotaSpec = {
          value: 1,
          period: q.period,
          timeZone: q.timeZone,
          ...(q.period === 'day'
            ? {}
            : { resetDay: q.period === 'week' ? ((q.resetDay - 1) % 7) + 1 : q.resetDay }),
        };
        const { startMs, endMs } = quotaPeriod(quota, nowMs);
        expect(startMs).toBeLessThanOrEqual(nowMs);
        expect(endMs).toBeGreaterThan(nowMs);
        expect(endMs - startMs).toBeLessThanOrEqual(longestQuotaPeriodMs(quota.period));
        // The next period starts where this one ends, and an instant before the start is in the one before.
        expect(quotaPeriod(quota, endMs).startMs).toBe(endMs);
        expect(quotaPeriod(quota, startMs - 1).endMs).toBe(startMs);
        // The start is the first instant of its local date: a minute earlier is another date.
        const start = wall(startMs, q.timeZone);
        const before = wall(startMs - 60_000, q.timeZone);
        expect(before.date).not.toBe(start.date);
        // On the reset day, or the day after where the zone skipped the reset day whole.
        const skipped = dayAfter(before.date) !== start.date;
        if (skipped) expect(dayAfter(dayAfter(before.date))).toBe(start.date);
        if (quota.period === 'week') {
          const weekday = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'].indexOf(start.weekday) + 1;
          expect(skipped ? weekday - 1 || 7 : weekday).toBe(quota.resetDay);
        }
        if (quota.period === 'month') {
          const resetDate = skipped ? dayAfter(before.date) : start.date;
          const lastDay = new Date(
            Date.UTC(Number(resetDate.slice(0, 4)), Number(resetDate.slice(5, 7)), 0),
          ).getUTCDate();
          expect(Number(resetDate.slice(8, 10))).toBe(Math.min(quota.resetDay ?? 1, lastDay));
        }
      }),
      {
        numRuns: 500,
        // Found by a run of this property: a month from the 30th, in the month Apia skipped the 30th.
        examples: [[{ period: 'month', resetDay: 30, timeZone: 'Pacific/Apia' }, at('2011-11-30T10:00:00Z')]],
      },
    );
  });
});

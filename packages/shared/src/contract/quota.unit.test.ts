import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../errors/index.ts';
import { QUOTA_PERIODS, smallestLimiterValue } from './quota.ts';
import { type RequestEnvelope, safeParseRequestEnvelope } from './request.ts';

/** A request whose limiter is `limiter`. */
function withLimiter(limiter: unknown): unknown {
  return { request: { uri: 'https://api.partner.example/v1' }, meta: { requestId: 'q-1', limiter } };
}

function issuesOf(limiter: unknown): ReadonlyArray<{ path: string; message: string }> {
  const result = safeParseRequestEnvelope(withLimiter(limiter));
  return result.ok ? [] : result.error.issues;
}

function valid(limiter: unknown): RequestEnvelope {
  const result = safeParseRequestEnvelope(withLimiter(limiter));
  if (!result.ok) throw new Error(result.error.message);
  return result.value;
}

const base = { key: 'partner', algorithm: 'fixed-window-counter' };

describe('meta.limiter.quota', () => {
  it.each([
    [{ value: 1_000_000, period: 'month', resetDay: 31 }],
    [{ value: 5, period: 'week', resetDay: 7, timeZone: 'America/New_York' }],
    [{ value: 5, period: 'day', timeZone: 'UTC' }],
    [{ value: 5, period: 'month' }],
  ])('accepts %j, alone (no rates needed) or with windows', (quota) => {
    expect(valid({ ...base, quota }).meta.limiter?.rates).toEqual([]);
    valid({ ...base, rates: [{ duration: '1s', value: 5 }], quota, cost: 5 });
  });

  it.each<[string, unknown, string, RegExp]>([
    ['a day of the month past 31', { value: 1, period: 'month', resetDay: 32 }, 'quota.resetDay', /<= 31/],
    ['a weekday past Sunday', { value: 1, period: 'week', resetDay: 8 }, 'quota.resetDay', /at most 7/],
    [
      'a reset day for a daily quota',
      { value: 1, period: 'day', resetDay: 2 },
      'quota.resetDay',
      /leave resetDay out/,
    ],
    ['a reset day of 0', { value: 1, period: 'month', resetDay: 0 }, 'quota.resetDay', />= 1/],
    ['an unknown time zone', { value: 1, period: 'day', timeZone: 'Mars/Olympus' }, 'quota.timeZone', /IANA/],
    ['a zero value', { value: 0, period: 'day' }, 'quota.value', /> 0/],
    ['a fractional value', { value: 1.5, period: 'day' }, 'quota.value', /integer/],
    ['a yearly period', { value: 1, period: 'year' }, 'quota.period', /day|week|month/],
    ['an unknown field', { value: 1, period: 'day', reset: 3 }, 'quota', /reset/],
  ])('refuses %s with one issue naming the field', (_, quota, path, message) => {
    const issues = issuesOf({ ...base, quota });
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({
      path: `meta.limiter.${path}`,
      message: expect.stringMatching(message),
    });
  });

  it('refuses a cost the quota could never admit, and a limiter with neither windows nor quota', () => {
    const cost = issuesOf({
      ...base,
      rates: [{ duration: '1s', value: 50 }],
      quota: { value: 10, period: 'day' },
      cost: 11,
    });
    expect(cost).toEqual([{ path: 'meta.limiter.cost', message: expect.stringMatching(/11 > 10/) }]);
    expect(issuesOf({ ...base, rates: [] })).toEqual([
      { path: 'meta.limiter.rates', message: 'needs at least one window, or a quota' },
    ]);
  });

  it('never throws anything but a ValidationError, whatever the quota', () => {
    const quota = fc.oneof(
      fc.anything(),
      fc.record(
        {
          value: fc.oneof(fc.integer(), fc.double(), fc.string()),
          period: fc.oneof(fc.constantFrom(...QUOTA_PERIODS), fc.string()),
          resetDay: fc.oneof(fc.integer({ min: -5, max: 40 }), fc.double()),
          timeZone: fc.oneof(
            fc.constantFrom('UTC', 'Europe/Paris', 'Asia/Kolkata', 'Etc/GMT+12'),
            fc.string(),
          ),
        },
        { requiredKeys: [] },
      ),
    );
    fc.assert(
      fc.property(quota, fc.option(fc.integer({ min: -2, max: 50 }), { nil: undefined }), (q, cost) => {
        const result = safeParseRequestEnvelope(
          withLimiter({ ...base, quota: q, ...(cost === undefined ? {} : { cost }) }),
        );
        if (!result.ok) {
          expect(result.error).toBeInstanceOf(ValidationError);
          return;
        }
        // What passes can be admitted: the cost fits the quota, and the reset day exists in its period.
        const limiter = result.value.meta.limiter!;
        expect(limiter.cost ?? 1).toBeLessThanOrEqual(smallestLimiterValue(limiter));
        const most = { day: 0, week: 7, month: 31 }[limiter.quota!.period];
        expect(limiter.quota!.resetDay ?? 1).toBeLessThanOrEqual(Math.max(1, most));
      }),
    );
  });
});

import { z } from 'zod';
import { strictObject } from './fields.ts';

/**
 * `meta.limiter.quota`, the calendar quota (docs/architecture.md §4): so many units per calendar
 * day, week or month, the way partners sell quotas, counted from a reset day at midnight in a time
 * zone. It is checked and consumed with the limiter's windows in one script, so a take denied by a
 * window spends nothing of the quota and the other way round.
 */

export const QUOTA_PERIODS = ['day', 'week', 'month'] as const;
export type QuotaPeriod = (typeof QUOTA_PERIODS)[number];

/** The longest IANA zone name is about 30 characters; the bound keeps a Redis key small. */
export const MAX_TIME_ZONE_LENGTH = 64;

/** Whether this runtime's ICU knows the zone (the name the limiter computes midnights in). */
export function isKnownTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** A week's reset day is an ISO weekday, a month's a day of the month; a day has none. */
function checkResetDay(quota: { period: QuotaPeriod; resetDay?: number | undefined }, ctx: z.RefinementCtx) {
  // Past 31 the field's own bound has said it.
  if (quota.resetDay === undefined || quota.resetDay > 31) return;
  const most = quota.period === 'month' ? 31 : quota.period === 'week' ? 7 : 0;
  if (most === 0)
    ctx.addIssue({
      code: 'custom',
      path: ['resetDay'],
      message: 'a daily quota resets every midnight: leave resetDay out',
    });
  else if (quota.resetDay > most)
    ctx.addIssue({
      code: 'custom',
      path: ['resetDay'],
      message: `must be at most ${most} for a ${quota.period}ly quota (${quota.period === 'month' ? 'a day of the month' : 'an ISO weekday, 1 Monday to 7 Sunday'})`,
    });
}

export const quotaSchema = strictObject({
  value: z
    .number()
    .int()
    .positive()
    .meta({ description: 'Units allowed per period (calls, or the requests’ `cost`).' }),
  period: z.enum(QUOTA_PERIODS).meta({ description: 'The calendar period the quota counts.' }),
  resetDay: z
    .number()
    .int()
    .min(1)
    .max(31)
    .meta({
      description:
        'When the period starts, at midnight in `timeZone`: for `month` a day of the month, 1 to 31 (a month without that day resets on its last day); for `week` an ISO weekday, 1 Monday to 7 Sunday; not for `day`. 1 when absent.',
    })
    .optional(),
  timeZone: z
    .string()
    .min(1)
    .max(MAX_TIME_ZONE_LENGTH)
    .refine(isKnownTimeZone, { error: 'must be an IANA time zone (Europe/Paris) or UTC' })
    .meta({
      description: 'IANA time zone whose midnight starts a period; UTC when absent.',
      examples: ['UTC', 'Europe/Paris'],
    })
    .optional(),
})
  .superRefine(checkResetDay)
  .meta({
    title: 'Quota',
    description:
      'A calendar quota: at most `value` units per day, week or month from a reset day, checked and consumed together with the windows.',
  });

export type QuotaSpec = z.output<typeof quotaSchema>;

/** The JSON Schema of "at least one window, or a quota" (the validator's own check is in code). */
export const LIMITER_NEEDS_WINDOW_OR_QUOTA = [
  { required: ['quota'] },
  { required: ['rates'], properties: { rates: { minItems: 1 } } },
];

/** The smallest number of units the limiter can ever admit at once: a larger cost never gets in. */
export function smallestLimiterValue(limiter: {
  rates: ReadonlyArray<{ value: number }>;
  quota?: { value: number } | undefined;
}): number {
  return Math.min(
    ...limiter.rates.map((rate) => rate.value),
    limiter.quota?.value ?? Number.POSITIVE_INFINITY,
  );
}

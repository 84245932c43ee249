import { type RetrySpec, safeParseRequestEnvelope } from '@requester/shared/contract';
import { RequesterError } from '@requester/shared/errors';
import { goDurationText } from '@requester/shared/testing';
import { durationToMs } from '@requester/shared/time';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CallOutcome } from '../http/index.ts';
import {
  addWait,
  BUSY_PARKS_MAX,
  backoffMs,
  breakerFailure,
  breakerStep,
  capped,
  heldProbeStep,
  isQueueDelay,
  isRetryable,
  limiterStep,
  MAX_DELAY_MS,
  missesDeadline,
  type OutcomeFacts,
  optsOut,
  outcomeStep,
  PARK_MAX_MS,
  pacedStep,
  parks,
  placeOf,
  retryAfterMs,
  waitCap,
} from './decide.ts';

const RETRY: RetrySpec = { max: 5, delay: '200ms', maxDelay: '1s', multiplier: 2, jitter: 0 };
const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

function answer(status: number, headers: Record<string, string> = {}): CallOutcome {
  return { kind: 'response', status, headers, body: '', durationNs: 1 };
}

function failure(code: 'timeout' | 'transport_error' | 'target_refused' | 'payload_too_large'): CallOutcome {
  return { kind: 'failure', error: new RequesterError(code, code) as never, durationNs: 1 };
}

function after(outcome: CallOutcome, facts: Partial<OutcomeFacts> = {}) {
  return outcomeStep({
    outcome,
    retry: RETRY,
    attempts: 1,
    nowMs: NOW,
    random: 0.5,
    retryAfterMaxMs: 3_600_000,
    ...facts,
  });
}

describe('limiterStep', () => {
  it('calls when allowed, waits retryAfter when limited, fails for good when oversized', () => {
    expect(limiterStep({ outcome: 'allowed', retryAfterMs: 0 })).toEqual({ kind: 'call' });
    expect(limiterStep({ outcome: 'limited', retryAfterMs: 250 })).toEqual({
      kind: 'wait',
      delayMs: 250,
      reason: 'rate_limited',
    });
    expect(limiterStep({ outcome: 'oversized', retryAfterMs: 0 })).toEqual({
      kind: 'deliver',
      deadLetter: 'permanent',
    });
  });
});

describe('breakerStep', () => {
  it('calls when admitted, else waits until the half-open time (at least 1 ms)', () => {
    expect(breakerStep({ admitted: true, probe: false }, NOW)).toEqual({ kind: 'call' });
    expect(breakerStep({ admitted: false, retryAtMs: NOW + 1_500, state: 'open' }, NOW)).toEqual({
      kind: 'wait',
      delayMs: 1_500,
      reason: 'circuit_open',
    });
    expect(breakerStep({ admitted: false, retryAtMs: NOW - 10, state: 'half_open' }, NOW)).toMatchObject({
      delayMs: 1,
    });
  });

  it('says breaker_busy, not circuit_open, when a closed or half-open breaker has no slot free', () => {
    expect(breakerStep({ admitted: false, retryAtMs: NOW + 1_000, state: 'closed' }, NOW)).toMatchObject({
      reason: 'breaker_busy',
    });
    expect(breakerStep({ admitted: false, retryAtMs: NOW + 1_000, state: 'half_open' }, NOW)).toMatchObject({
      reason: 'breaker_busy',
    });
  });
});

describe('held origins', () => {
  it('says origin_held for a held origin, whatever its breaker state; a failed held probe waits for the next instant', () => {
    for (const state of ['open', 'half_open'] as const)
      expect(breakerStep({ admitted: false, retryAtMs: NOW + 30_000, state, held: 'failing' }, NOW)).toEqual({
        kind: 'wait',
        delayMs: 30_000,
        reason: 'origin_held',
      });
    expect(heldProbeStep(NOW + 5_000, NOW)).toEqual({ kind: 'wait', delayMs: 5_000, reason: 'origin_held' });
    expect(heldProbeStep(NOW - 5, NOW)).toMatchObject({ delayMs: 1 });
  });

  it('reads the opt-out from `webhook-delivery: disable` only (any case, in a list), never from a failure', () => {
    expect(optsOut(answer(200, { 'webhook-delivery': 'disable' }))).toBe(true);
    expect(optsOut(answer(410, { 'webhook-delivery': ' Disable ' }))).toBe(true);
    expect(optsOut(answer(200, { 'webhook-delivery': 'abort-message, disable' }))).toBe(true);
    expect(optsOut(answer(200, { 'webhook-delivery': 'abort-message' }))).toBe(false);
    expect(optsOut(answer(200, { 'webhook-delivery': 'disabled' }))).toBe(false);
    expect(optsOut(answer(200))).toBe(false);
    expect(optsOut(failure('timeout'))).toBe(false);
  });
});

describe('outcomeStep', () => {
  it('delivers successes and 3xx without a dead letter', () => {
    expect(after(answer(200))).toEqual({ kind: 'deliver' });
    expect(after(answer(304))).toEqual({ kind: 'deliver' });
  });

  it('retries 429, 408, 5xx, timeouts and transport errors while attempts remain', () => {
    for (const outcome of [answer(429), answer(408), answer(500), answer(503), failure('timeout')]) {
      expect(after(outcome)).toMatchObject({ kind: 'retry', delayMs: 200 });
    }
    expect(after(failure('transport_error'))).toMatchObject({ kind: 'retry', reason: 'transport_error' });
    expect(after(answer(503))).toMatchObject({ reason: 'status_503' });
  });

  it('does not retry other 4xx, SSRF refusals or oversized answers: permanent', () => {
    for (const outcome of [
      answer(400),
      answer(404),
      failure('target_refused'),
      failure('payload_too_large'),
    ]) {
      expect(isRetryable(outcome)).toBe(false);
      expect(after(outcome)).toEqual({ kind: 'deliver', deadLetter: 'permanent' });
    }
  });

  it('stops at retry.max attempts: the last failure is delivered as retries_exhausted', () => {
    expect(after(answer(503), { attempts: 4 })).toMatchObject({ kind: 'retry' });
    expect(after(answer(503), { attempts: 5 })).toEqual({ kind: 'deliver', deadLetter: 'retries_exhausted' });
  });

  it('without meta.retry, one attempt: a retryable failure is exhausted at once', () => {
    expect(after(answer(503), { retry: undefined })).toEqual({
      kind: 'deliver',
      deadLetter: 'retries_exhausted',
    });
    expect(after(answer(200), { retry: undefined })).toEqual({ kind: 'deliver' });
  });

  it('honours a longer Retry-After (seconds or date), never waits less than the backoff', () => {
    expect(after(answer(429, { 'retry-after': '2' }))).toMatchObject({ delayMs: 2_000 });
    const date = new Date(NOW + 7_000).toUTCString();
    expect(after(answer(503, { 'retry-after': date }))).toMatchObject({ delayMs: 7_000 });
    expect(after(answer(429, { 'retry-after': '0' }))).toMatchObject({ delayMs: 200 });
    expect(after(answer(429, { 'retry-after': 'soon' }))).toMatchObject({ delayMs: 200 });
  });

  it('caps Retry-After at RETRY_AFTER_MAX (beyond maxDelay is allowed: the target asked)', () => {
    expect(after(answer(429, { 'retry-after': '86400' }), { retryAfterMaxMs: 60_000 })).toMatchObject({
      delayMs: 60_000,
    });
    expect(after(answer(429, { 'retry-after': '5' }))).toMatchObject({ delayMs: 5_000 });
  });

  it('caps every pause at maxWaitMs (REDIS_HORIZON for a key without the schedule scope): backoff and Retry-After alike', () => {
    const long = { ...RETRY, delay: '10m', maxDelay: '87600h' };
    expect(after(answer(500), { retry: long, maxWaitMs: 1_000 })).toMatchObject({ delayMs: 1_000 });
    expect(after(answer(429, { 'retry-after': '3600' }), { maxWaitMs: 1_000 })).toMatchObject({
      delayMs: 1_000,
    });
    expect(after(answer(500), { maxWaitMs: 1_000 })).toMatchObject({ delayMs: 200 });
  });
});

describe('waitCap', () => {
  it('is the horizon for a task marked withinHorizon, none otherwise', () => {
    expect(waitCap({ withinHorizon: true }, 1_000)).toBe(1_000);
    expect(waitCap({}, 1_000)).toBeUndefined();
    expect(capped(5_000, waitCap({ withinHorizon: true }, 1_000))).toBe(1_000);
    expect(capped(5_000, undefined)).toBe(5_000);
  });
});

describe('backoffMs', () => {
  it('grows by the multiplier from delay and stops at maxDelay', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(RETRY, n, 0.5))).toEqual([200, 400, 800, 1_000, 1_000]);
  });

  it('jitters by up to ±jitter of the pause, never above maxDelay', () => {
    const jittery = { ...RETRY, jitter: 0.5 };
    expect(backoffMs(jittery, 1, 0)).toBe(100);
    expect(backoffMs(jittery, 1, 0.999_999)).toBe(300);
    expect(backoffMs(jittery, 5, 0)).toBe(500);
    expect(backoffMs(jittery, 5, 0.999_999)).toBe(1_000);
    for (let i = 0; i < 200; i++) {
      const pause = backoffMs(jittery, 1 + (i % 6), Math.random());
      expect(pause).toBeGreaterThanOrEqual(100);
      expect(pause).toBeLessThanOrEqual(1_000);
    }
  });

  it('a zero delay retries at once', () => {
    expect(backoffMs({ ...RETRY, delay: '0s' }, 3, 0.9)).toBe(0);
  });

  // delay 0 · multiplier^n = 0 · Infinity was NaN: the queue refused the reschedule and the lease lapsed.
  it('stays finite and within maxDelay at the extremes', () => {
    const huge = {
      max: 100,
      delay: '2562047h',
      maxDelay: '2562047h47m16.854775807s',
      multiplier: 1e308,
      jitter: 1,
    };
    expect(backoffMs({ ...RETRY, delay: '0s', multiplier: 1e308 }, 2, 0.5)).toBe(0);
    expect(backoffMs({ ...RETRY, delay: '0s', multiplier: 1e308, jitter: 1 }, 100, 0.999)).toBe(0);
    expect(backoffMs({ ...RETRY, multiplier: 1e308 }, 100, 0.5)).toBe(1_000);
    expect(backoffMs(huge, 1, 0.5)).toBe(2562047 * 3_600_000);
    expect(backoffMs(huge, 100, 0.999_999)).toBe(MAX_DELAY_MS);
    expect(backoffMs(huge, 100, 0)).toBe(0);
    expect(backoffMs({ ...huge, jitter: 0 }, 100, 0)).toBe(MAX_DELAY_MS);
  });

  it('is whole ms within [0, maxDelay] for every retry spec the contract accepts', () => {
    const retrySpec = fc.record({
      max: fc.integer({ min: 1, max: 100 }),
      delay: goDurationText(0n),
      maxDelay: goDurationText(1n),
      multiplier: fc.oneof(
        fc.constantFrom(1, 2, 1e308, Number.MAX_VALUE),
        fc.double({ min: 1, noNaN: true }),
      ),
      jitter: fc.oneof(fc.constantFrom(0, 1), fc.double({ min: 0, max: 1, noNaN: true })),
    });
    const dice = fc.oneof(
      fc.constantFrom(0, 0.5, 1 - Number.EPSILON),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
    );
    fc.assert(
      fc.property(retrySpec, fc.integer({ min: 0, max: 100 }), dice, (input, attempt, random) => {
        const parsed = safeParseRequestEnvelope({
          request: { uri: '' },
          meta: { requestId: 'r', retry: input },
        });
        fc.pre(parsed.ok);
        if (!parsed.ok || !parsed.value.meta.retry) return;
        const retry = parsed.value.meta.retry;
        const pause = backoffMs(retry, attempt, random);
        expect(isQueueDelay(pause)).toBe(true);
        expect(pause).toBeLessThanOrEqual(durationToMs(retry.maxDelay));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('retryAfterMs', () => {
  it('reads delay-seconds and HTTP-dates; a past date is 0; garbage is ignored', () => {
    expect(retryAfterMs('120', NOW)).toBe(120_000);
    expect(retryAfterMs(' 3 ', NOW)).toBe(3_000);
    expect(retryAfterMs(new Date(NOW + 90_000).toUTCString(), NOW)).toBe(90_000);
    expect(retryAfterMs(new Date(NOW - 90_000).toUTCString(), NOW)).toBe(0);
    expect(retryAfterMs(undefined, NOW)).toBeUndefined();
    expect(retryAfterMs('-5', NOW)).toBeUndefined();
    expect(retryAfterMs('', NOW)).toBeUndefined();
  });

  it('is at most MAX_DELAY_MS, however many digits', () => {
    expect(retryAfterMs('9'.repeat(400), NOW)).toBe(MAX_DELAY_MS);
    expect(retryAfterMs('99999999999999', NOW)).toBe(MAX_DELAY_MS);
    expect(retryAfterMs(new Date(8.64e15).toUTCString(), NOW)).toBe(MAX_DELAY_MS);
    const step = after(answer(503, { 'retry-after': '9'.repeat(400) }), {
      retryAfterMaxMs: Number.POSITIVE_INFINITY,
    });
    expect(step).toMatchObject({ kind: 'retry', delayMs: MAX_DELAY_MS });
  });
});

describe('waits are bounded', () => {
  it('limiter and breaker waits are whole ms in [1, MAX_DELAY_MS]', () => {
    expect(limiterStep({ outcome: 'limited', retryAfterMs: 2 * MAX_DELAY_MS })).toMatchObject({
      delayMs: MAX_DELAY_MS,
    });
    expect(limiterStep({ outcome: 'limited', retryAfterMs: 0.2 })).toMatchObject({ delayMs: 1 });
    const farOpen = breakerStep({ admitted: false, retryAtMs: Number.MAX_VALUE, state: 'open' }, NOW);
    expect(farOpen).toMatchObject({ delayMs: MAX_DELAY_MS });
    expect(breakerStep({ admitted: false, retryAtMs: NOW + 0.5, state: 'open' }, NOW)).toMatchObject({
      delayMs: 1,
    });
  });

  it('the time waited adds up within MAX_DELAY_MS', () => {
    expect(addWait(1_000, 500)).toBe(1_500);
    expect(addWait(MAX_DELAY_MS, MAX_DELAY_MS)).toBe(MAX_DELAY_MS);
  });

  it('isQueueDelay: whole ms within [0, MAX_DELAY_MS] only', () => {
    for (const ok of [0, 1, MAX_DELAY_MS]) expect(isQueueDelay(ok)).toBe(true);
    for (const bad of [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY, MAX_DELAY_MS + 1])
      expect(isQueueDelay(bad)).toBe(false);
  });
});

describe('placeOf', () => {
  it('keeps ordered partitions in Redis at any delay; unordered beyond the horizon go to the outbox', () => {
    expect(placeOf(3_600_000, true, 1_000)).toBe('redis');
    expect(placeOf(1_000, false, 1_000)).toBe('redis');
    expect(placeOf(1_001, false, 1_000)).toBe('outbox');
  });
});

describe('pacing', () => {
  it('a target asking to slow down (429, 503 + Retry-After) is no breaker failure; other 5xx and timeouts are', () => {
    expect(breakerFailure(answer(429))).toBe(false);
    expect(breakerFailure(answer(503, { 'retry-after': '1' }))).toBe(false);
    expect(breakerFailure(answer(503))).toBe(true);
    expect(breakerFailure(answer(500))).toBe(true);
    expect(breakerFailure(answer(404))).toBe(false);
    expect(breakerFailure(answer(200))).toBe(false);
  });

  it('a pacer refusal is a wait carrying its reserved slot, not an attempt', () => {
    expect(pacedStep({ admitted: true })).toEqual({ kind: 'call' });
    expect(pacedStep({ admitted: false, retryInMs: 1_500, slotMs: 42 })).toEqual({
      kind: 'wait',
      delayMs: 1_500,
      reason: 'paced',
      slotMs: 42,
    });
  });
});

describe('parks', () => {
  const budget = { tasks: 48, bytes: 1_000 };
  it('parks a pacing wait within the horizon and the budget, nothing else', () => {
    expect(parks('paced', PARK_MAX_MS, 10, { tasks: 47, bytes: 0 }, budget)).toBe(true);
    expect(parks('paced', PARK_MAX_MS + 1, 10, { tasks: 0, bytes: 0 }, budget)).toBe(false);
    expect(parks('paced', 100, 10, { tasks: 48, bytes: 0 }, budget)).toBe(false);
    for (const reason of ['rate_limited', 'circuit_open', 'origin_held', 'bulkhead', 'paused'])
      expect(parks(reason, 100, 10, { tasks: 0, bytes: 0 }, budget)).toBe(false);
  });

  it('parks a slot more than 10 s ahead (a burst books 13 s of a 31.5/s pace)', () => {
    expect(parks('paced', 13_000, 10, { tasks: 0, bytes: 0 }, budget)).toBe(true);
  });

  it('parks a retry due within the horizon and the budget (it was counted as an attempt already)', () => {
    expect(parks('retry', 1_000, 10, { tasks: 0, bytes: 0 }, budget)).toBe(true);
    expect(parks('retry', PARK_MAX_MS + 1, 10, { tasks: 0, bytes: 0 }, budget)).toBe(false);
    expect(parks('retry', 1_000, 10, { tasks: 48, bytes: 0 }, budget)).toBe(false);
  });

  it('parks a busy breaker refusal for one re-check per wait, at most BUSY_PARKS_MAX in a row', () => {
    const none = { tasks: 0, bytes: 0 };
    for (let done = 0; done < BUSY_PARKS_MAX; done++)
      expect(parks('breaker_busy', 1_000, 10, none, budget, done)).toBe(true);
    expect(parks('breaker_busy', 1_000, 10, none, budget, BUSY_PARKS_MAX)).toBe(false);
    expect(parks('breaker_busy', 1_000, 10, { tasks: 48, bytes: 0 }, budget)).toBe(false);
  });

  it('parks a task only while the records held stay within the bytes budget', () => {
    expect(parks('paced', 100, 600, { tasks: 1, bytes: 400 }, budget)).toBe(true);
    expect(parks('paced', 100, 601, { tasks: 1, bytes: 400 }, budget)).toBe(false);
    // A record bigger than the whole budget is never parked, even alone.
    expect(parks('paced', 100, 1_001, { tasks: 0, bytes: 0 }, budget)).toBe(false);
  });
});

describe('missesDeadline', () => {
  it('is true exactly when the next start is at or after the deadline', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        (deadline, start) => {
          expect(missesDeadline(deadline, start)).toBe(start >= deadline);
        },
      ),
    );
  });
});

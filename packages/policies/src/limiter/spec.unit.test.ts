import { LIMITER_ALGORITHMS, type LimiterSpec, safeParseRequestEnvelope } from '@requester/shared/contract';
import { goDurationText } from '@requester/shared/testing';
import { MAX_DURATION_NS, toMs } from '@requester/shared/time';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { algorithmOfTag, limiterCall, limiterKeyOf, limiterWindows, longestWaitMs } from './spec.ts';

/** The longest wait anything asks for (the executor's MAX_DELAY_MS): the range of a Go duration. */
const MAX_DELAY_MS = toMs(MAX_DURATION_NS);

describe('limiter spec', () => {
  // One truth: a window the contract accepts is one the limiter can count (whole ms, >= 1).
  it('every limiter the contract accepts has windows of 1 ms to MAX_DELAY_MS, and integer script arguments', () => {
    const rate = fc.record({
      duration: goDurationText(),
      value: fc.oneof(fc.constantFrom(1, Number.MAX_SAFE_INTEGER), fc.integer({ min: 1 })),
    });
    const limiter = fc.record({
      key: fc.constant('k'),
      algorithm: fc.constantFrom(...LIMITER_ALGORITHMS),
      rates: fc.array(rate, { minLength: 1, maxLength: 8 }),
      cost: fc.option(fc.oneof(fc.integer({ min: -2, max: 40 }), fc.constant(1.5)), { nil: undefined }),
    });
    fc.assert(
      fc.property(limiter, (input) => {
        const parsed = safeParseRequestEnvelope({
          request: { uri: '' },
          meta: { requestId: 'r', limiter: input },
        });
        if (!parsed.ok) {
          const paths = parsed.error.issues.map((i) => i.path);
          expect(paths.every((p) => p.startsWith('meta.limiter.rates.') || p === 'meta.limiter.cost')).toBe(
            true,
          );
          return;
        }
        const spec = parsed.value.meta.limiter as LimiterSpec;
        for (const window of limiterWindows(spec)) {
          expect(window.durationMs).toBeGreaterThanOrEqual(1);
          expect(window.durationMs).toBeLessThanOrEqual(MAX_DELAY_MS);
          // An accepted cost is never oversized: some wait admits it (the limiter answers no -1).
          expect(spec.cost ?? 1).toBeLessThanOrEqual(window.value);
          expect(longestWaitMs(spec.algorithm, window, spec.cost)).toBeLessThanOrEqual(2 * window.durationMs);
        }
        expect(limiterCall('p:', spec, 1).args.every(Number.isSafeInteger)).toBe(true);
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('algorithmOfTag', () => {
  // `limiter show` finds a limiter's windows by the tag in their key names: each algorithm's own.
  it.each(LIMITER_ALGORITHMS)('reads the tag of every %s key back as that algorithm', (algorithm) => {
    const spec: LimiterSpec = { key: 'k', algorithm, rates: [{ duration: '1s', value: 1 }] };
    for (const key of limiterCall('p:', spec, 1).keys) {
      const [tag] = key.slice('p:{lim:k}:'.length).split(':');
      expect(algorithmOfTag(tag ?? '')).toBe(algorithm);
    }
  });
});

describe('limiterKeyOf', () => {
  const shared = new Set(['partner-quota']);

  it("is the client's own key: another client's same key is another limiter", () => {
    expect(limiterKeyOf('probe-a', 'k', shared)).toBe('k @probe-a');
    expect(limiterKeyOf('probe-b', 'k', shared)).not.toBe(limiterKeyOf('probe-a', 'k', shared));
    expect(limiterKeyOf(undefined, 'k', shared)).toBe('k'); // no client: the key as before
  });

  it('is the one key of its name for every client when the operator declared it shared', () => {
    expect(limiterKeyOf('probe-a', 'partner-quota', shared)).toBe('partner-quota');
    expect(limiterKeyOf('probe-b', 'partner-quota', shared)).toBe('partner-quota');
    expect(limiterKeyOf('probe-a', 'partner-quota', new Set())).toBe('partner-quota @probe-a');
  });
});

describe('longestWaitMs', () => {
  it('grows with the cost for the buckets and the sliding counter, not for whole-window algorithms', () => {
    const window = { durationMs: 1_000, value: 10 };
    expect(longestWaitMs('token-bucket', window, 4)).toBe(400);
    expect(longestWaitMs('leaky-bucket', window)).toBe(100);
    expect(longestWaitMs('sliding-window-counter', window, 4)).toBe(1_400);
    expect(longestWaitMs('fixed-window-counter', window, 4)).toBe(1_000);
    expect(longestWaitMs('sliding-window-log', window, 10)).toBe(1_000);
  });
});

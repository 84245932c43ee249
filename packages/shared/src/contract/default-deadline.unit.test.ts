import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDestinationSpec } from '../destinations/spec.ts';
import { formatRfc3339 } from '../time/rfc3339.ts';
import { defaultDeadlineAt, defaultDeadlineProblem, withDefaultDeadline } from './deadline.ts';
import { MAX_INSTANT_MS } from './fields.ts';

const ACCEPTED = Date.parse('2026-12-06T12:00:00Z');

describe('the operator’s default deadline', () => {
  it('is a Go duration of at least 1ms, nothing else', () => {
    expect(defaultDeadlineProblem('30s')).toBeUndefined();
    expect(defaultDeadlineProblem('1h30m')).toBeUndefined();
    expect(defaultDeadlineProblem('2026-12-01T09:00:00Z')).toMatch(/Go duration/);
    expect(defaultDeadlineProblem('soon')).toMatch(/Go duration/);
    expect(defaultDeadlineProblem('999us')).toMatch(/at least 1ms/);
    expect(defaultDeadlineProblem('-1s')).toBeDefined();
  });

  it('counts from acceptance, or from a scheduled instant after it; the earliest default binds', () => {
    expect(defaultDeadlineAt(['30s', undefined], {}, ACCEPTED)).toBe(ACCEPTED + 30_000);
    expect(defaultDeadlineAt(['30s', '10s'], {}, ACCEPTED)).toBe(ACCEPTED + 10_000);
    const scheduled = formatRfc3339(ACCEPTED + 3_600_000);
    expect(defaultDeadlineAt(['30s'], { scheduled }, ACCEPTED)).toBe(ACCEPTED + 3_630_000);
    // A scheduled instant already past is due at acceptance.
    expect(defaultDeadlineAt(['30s'], { scheduled: formatRfc3339(0) }, ACCEPTED)).toBe(ACCEPTED + 30_000);
  });

  it('never overrides a request’s own deadline, and is none without a default', () => {
    expect(defaultDeadlineAt(['30s'], { deadline: '5m' }, ACCEPTED)).toBeUndefined();
    expect(defaultDeadlineAt([undefined, undefined], {}, ACCEPTED)).toBeUndefined();
    const own = { meta: { deadline: '5m' } };
    expect(withDefaultDeadline(own, ACCEPTED)).toBe(own);
    const none: { meta: { deadline?: string } } = { meta: {} };
    expect(withDefaultDeadline(none, ACCEPTED).meta.deadline).toBe(formatRfc3339(ACCEPTED));
  });

  it('is always after the task is due, whatever the defaults and times (property)', () => {
    const duration = fc.oneof(
      fc.integer({ min: 1, max: 10_000_000 }).map((ms) => `${ms}ms`),
      fc.integer({ min: 1, max: 1_000_000 }).map((h) => `${h}h`),
      fc.string(),
    );
    fc.assert(
      fc.property(
        fc.array(fc.option(duration, { nil: undefined }), { maxLength: 3 }),
        fc.integer({ min: 0, max: MAX_INSTANT_MS - 1 }),
        fc.option(fc.integer({ min: 0, max: MAX_INSTANT_MS }), { nil: undefined }),
        (defaults, accepted, scheduledMs) => {
          const meta = scheduledMs === undefined ? {} : { scheduled: formatRfc3339(scheduledMs) };
          const at = defaultDeadlineAt(defaults, meta, accepted);
          const valid = defaults.filter((d) => d !== undefined && defaultDeadlineProblem(d) === undefined);
          if (valid.length === 0) {
            expect(at).toBeUndefined();
            return;
          }
          const due = Math.max(accepted, scheduledMs ?? accepted);
          expect(at).toBeDefined();
          expect(at!).toBeLessThanOrEqual(MAX_INSTANT_MS);
          if (due < MAX_INSTANT_MS) expect(at!).toBeGreaterThan(due);
        },
      ),
    );
  });

  it('is a field of a destination’s spec, refused when it is no duration', () => {
    expect(parseDestinationSpec({ baseUrl: 'https://p.example', deadline: '10s' }).deadline).toBe('10s');
    expect(() => parseDestinationSpec({ baseUrl: 'https://p.example', deadline: 'tomorrow' })).toThrow(
      /deadline: must be a Go duration/,
    );
  });
});

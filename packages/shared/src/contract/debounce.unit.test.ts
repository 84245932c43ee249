import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tryParseDuration } from '../time/index.ts';
import { safeParseRequestEnvelope } from './request.ts';
import { designRequestExample } from './testing/examples.ts';

/** The §4 example, unordered and unscheduled (debounce takes neither), with `meta.debounce` set. */
function debounced(debounce: unknown, meta: Record<string, unknown> = {}): unknown {
  const envelope = designRequestExample();
  const { partition: _, scheduled: __, ...rest } = envelope.meta;
  return { ...envelope, meta: { ...rest, debounce, ...meta } };
}

function issuesOf(input: unknown): Array<{ path: string; message: string }> {
  const result = safeParseRequestEnvelope(input);
  return result.ok ? [] : [...result.error.issues];
}

describe('meta.debounce', () => {
  it.each([
    [{ key: 'profile-7', delay: '1ms' }],
    [{ key: 'k'.repeat(200), delay: '2s', maxWait: '2s' }],
    [{ key: 'a', delay: '500ms', maxWait: '1h' }],
    [{ key: 'a', delay: '1h' }],
  ])('accepts %j', (debounce) => {
    expect(issuesOf(debounced(debounce))).toEqual([]);
  });

  it('accepts it on an unordered partition', () => {
    expect(issuesOf(debounced({ key: 'a', delay: '1s' }, { partition: 'order-42' }))).toEqual([]);
  });

  it.each([
    [{ key: 'a', delay: '0s' }, 'meta.debounce.delay', /at least 1ms/],
    [{ key: 'a', delay: '-1s' }, 'meta.debounce.delay', /must not be negative/],
    [{ key: 'a' }, 'meta.debounce.delay', /^required$/],
    [{ delay: '1s' }, 'meta.debounce.key', /^required$/],
    [{ key: '', delay: '1s' }, 'meta.debounce.key', /must not be empty/],
    [{ key: 'k'.repeat(201), delay: '1s' }, 'meta.debounce.key', /at most 200/],
    [{ key: 'a b', delay: '1s' }, 'meta.debounce.key', /printable ASCII/],
    [
      { key: 'a', delay: '2s', maxWait: '1s' },
      'meta.debounce.maxWait',
      /not be shorter than delay \(1s < 2s\)/,
    ],
    [{ key: 'a', delay: '1s', maxWait: '0s' }, 'meta.debounce.maxWait', /at least 1ms/],
    [{ key: 'a', delay: '61m' }, 'meta.debounce.delay', /at most 1h/],
    [{ key: 'a', delay: '1s', maxWait: '2h' }, 'meta.debounce.maxWait', /at most 1h/],
    [{ key: 'a', delay: '1s', after: 1 }, 'meta.debounce', /unknown key "after"/],
    ['1s', 'meta.debounce', /expected object/],
  ])('refuses %j with one clear error', (debounce, path, message) => {
    const issues = issuesOf(debounced(debounce));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toEqual({ path, message: expect.stringMatching(message) });
  });

  it('refuses it on an ordered partition, and with meta.scheduled', () => {
    expect(issuesOf(debounced({ key: 'a', delay: '1s' }, { partition: '!order-42' }))).toEqual([
      { path: 'meta.debounce', message: expect.stringMatching(/ordered \("!"\) partition/) },
    ]);
    expect(issuesOf(debounced({ key: 'a', delay: '1s' }, { scheduled: '2026-12-01T09:00:00Z' }))).toEqual([
      { path: 'meta.debounce', message: expect.stringMatching(/meta\.scheduled/) },
    ]);
  });

  it('accepted exactly when its key is printable, 1-200 chars, delay 1ms-1h and maxWait, if any, delay-1h', () => {
    const duration = fc.oneof(
      fc.constantFrom('0s', '1ms', '999us', '1s', '59m', '1h', '1h0m0.001s', '-1s', 'soon', ''),
      fc.integer({ min: 0, max: 5_000_000 }).map((ms) => `${ms}ms`),
    );
    const ms = (text: string) => {
      const parsed = tryParseDuration(text);
      return parsed.ok ? Number(parsed.ns) / 1e6 : Number.NaN;
    };
    const inRange = (text: string) => ms(text) >= 1 && ms(text) <= 3_600_000;
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 220 }), fc.stringMatching(/^[!-~]{1,210}$/)),
        duration,
        fc.option(duration, { nil: undefined }),
        (key, delay, maxWait) => {
          const spec = maxWait === undefined ? { key, delay } : { key, delay, maxWait };
          const result = safeParseRequestEnvelope(debounced(spec));
          const ok =
            /^[!-~]{1,200}$/.test(key) &&
            inRange(delay) &&
            (maxWait === undefined || (inRange(maxWait) && ms(maxWait) >= ms(delay)));
          expect(result.ok).toBe(ok);
          if (!result.ok)
            expect(result.error.issues[0]?.path).toMatch(/^meta\.debounce\.(key|delay|maxWait)$/);
        },
      ),
    );
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatRfc3339 } from '../time/rfc3339.ts';
import { deadlineAt, isDeadlineInstant, resolveDeadline, withDeadlineInstant } from './deadline.ts';
import { safeParseRequestEnvelope } from './request.ts';

const ACCEPTED = Date.UTC(2026, 11, 1, 9, 0, 0);

function envelope(meta: Record<string, unknown>) {
  return {
    request: { uri: '' },
    meta: { requestId: 'd-1', ...meta } as { requestId: string; deadline?: string; scheduled?: string },
  };
}

function issuesOf(meta: Record<string, unknown>) {
  const parsed = safeParseRequestEnvelope(envelope(meta));
  return parsed.ok ? [] : parsed.error.issues;
}

describe('meta.deadline in the contract', () => {
  it('accepts an RFC 3339 instant and a Go duration of at least 1ms', () => {
    for (const deadline of ['2026-12-01T09:05:00Z', '2026-12-01T10:05:00.250+01:00', '30s', '1h30m', '1ms'])
      expect(issuesOf({ deadline }), deadline).toEqual([]);
  });

  it('refuses anything else with one issue naming meta.deadline', () => {
    for (const deadline of ['soon', '-5s', '0', '500us', '2026-13-01T00:00:00Z', '2026-12-01T09:00:00', ''])
      expect(
        issuesOf({ deadline }).map((issue) => issue.path),
        deadline,
      ).toEqual(['meta.deadline']);
    expect(issuesOf({ deadline: 30 })[0]?.path).toBe('meta.deadline');
  });
});

describe('resolveDeadline, at the door', () => {
  it('anchors a duration at acceptance and keeps an instant as it is', () => {
    expect(resolveDeadline({ deadline: '30s' }, ACCEPTED)).toEqual({ ok: true, at: ACCEPTED + 30_000 });
    expect(resolveDeadline({ deadline: '2026-12-01T09:05:00Z' }, ACCEPTED)).toEqual({
      ok: true,
      at: ACCEPTED + 300_000,
    });
    expect(resolveDeadline({}, ACCEPTED)).toEqual({ ok: true, at: undefined });
  });

  it('refuses a deadline that is not after acceptance', () => {
    for (const deadline of ['2026-12-01T08:59:59Z', formatRfc3339(ACCEPTED)]) {
      const resolved = resolveDeadline({ deadline }, ACCEPTED);
      expect(resolved.ok).toBe(false);
      if (resolved.ok) continue;
      expect(resolved.error.code).toBe('invalid_request');
      expect(resolved.error.issues).toEqual([
        { path: 'meta.deadline', message: expect.stringContaining('is in the past') },
      ]);
    }
  });

  it('refuses a scheduled time after the deadline, whichever form the deadline has', () => {
    for (const deadline of ['1m', '2026-12-01T09:01:00Z']) {
      const resolved = resolveDeadline({ deadline, scheduled: '2026-12-01T09:02:00Z' }, ACCEPTED);
      expect(resolved.ok).toBe(false);
      if (!resolved.ok)
        expect(resolved.error.issues).toEqual([
          { path: 'meta.scheduled', message: expect.stringContaining('after meta.deadline') },
        ]);
    }
    expect(resolveDeadline({ deadline: '1m', scheduled: '2026-12-01T09:01:00Z' }, ACCEPTED).ok).toBe(true);
  });

  it('writes the resolved instant into the copy passed on, and resolves it again to the same instant', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 ** 9 }), fc.integer({ min: 0, max: 10 ** 7 }), (ms, later) => {
        const original = envelope({ deadline: `${ms}ms` });
        const resolved = resolveDeadline(original.meta, ACCEPTED);
        if (!resolved.ok) return false;
        const copy = withDeadlineInstant(original, resolved.at);
        expect(isDeadlineInstant(copy.meta.deadline ?? '')).toBe(true);
        expect(safeParseRequestEnvelope(copy).ok).toBe(true);
        // A later reader (another anchor) finds the same instant.
        expect(deadlineAt(copy.meta.deadline, ACCEPTED + later)).toBe(ACCEPTED + ms);
        return true;
      }),
    );
  });
});

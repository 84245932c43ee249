import { describe, expect, it } from 'vitest';
import { type PacedOutcome, paceSignal } from './signals.ts';

const NOW = Date.UTC(2026, 0, 1);
const HOUR = 3_600_000;
const answer = (status: number, headers: Record<string, string> = {}): PacedOutcome => ({
  kind: 'response',
  status,
  headers,
});

describe('paceSignal', () => {
  it('reads a 429 with Retry-After as slow down, held for the time asked', () => {
    expect(paceSignal(answer(429, { 'retry-after': '2' }), NOW, HOUR)).toEqual({
      kind: 'slow',
      holdMs: 2_000,
      ceilingPerSec: undefined,
    });
    const date = new Date(NOW + 5_000).toUTCString();
    expect(paceSignal(answer(429, { 'retry-after': date }), NOW, HOUR).holdMs).toBe(5_000);
    expect(paceSignal(answer(429), NOW, HOUR)).toMatchObject({ kind: 'slow', holdMs: 0 });
  });

  it('reads a 503 as slow down only with Retry-After; without, as overload', () => {
    expect(paceSignal(answer(503, { 'retry-after': '1' }), NOW, HOUR)).toMatchObject({
      kind: 'slow',
      holdMs: 1_000,
    });
    expect(paceSignal(answer(503), NOW, HOUR).kind).toBe('overload');
    expect(paceSignal(answer(500), NOW, HOUR).kind).toBe('overload');
    expect(paceSignal({ kind: 'failure', error: { code: 'timeout' } }, NOW, HOUR).kind).toBe('overload');
    expect(paceSignal({ kind: 'failure', error: { code: 'target_refused' } }, NOW, HOUR).kind).toBe('ok');
    expect(paceSignal(answer(404), NOW, HOUR).kind).toBe('ok');
  });

  it('bounds a hold by RETRY_AFTER_MAX', () => {
    expect(paceSignal(answer(429, { 'retry-after': '86400' }), NOW, 60_000).holdMs).toBe(60_000);
  });

  it('reads the IETF RateLimit-Policy of both draft syntaxes as a ceiling in calls/s', () => {
    expect(paceSignal(answer(200, { 'ratelimit-policy': '50;w=1' }), NOW, HOUR).ceilingPerSec).toBe(50);
    expect(
      paceSignal(answer(200, { 'ratelimit-policy': '"default";q=600;w=60' }), NOW, HOUR).ceilingPerSec,
    ).toBe(10);
    // Two policies: the first is followed.
    expect(
      paceSignal(answer(200, { 'ratelimit-policy': '10;w=1, 1000;w=3600' }), NOW, HOUR).ceilingPerSec,
    ).toBe(10);
  });

  it('holds an origin whose quota is used up until its reset, whichever header says so', () => {
    const old = { ratelimit: 'limit=100, remaining=0, reset=3' };
    expect(paceSignal(answer(200, old), NOW, HOUR)).toMatchObject({ kind: 'ok', holdMs: 3_000 });
    const draft = { ratelimit: '"default";r=0;t=2' };
    expect(paceSignal(answer(200, draft), NOW, HOUR).holdMs).toBe(2_000);
    const x = { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '4' };
    expect(paceSignal(answer(200, x), NOW, HOUR).holdMs).toBe(4_000);
    const epoch = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(NOW / 1000 + 7) };
    expect(paceSignal(answer(200, epoch), NOW, HOUR).holdMs).toBe(7_000);
    expect(paceSignal(answer(200, { ratelimit: 'limit=100, remaining=5, reset=3' }), NOW, HOUR).holdMs).toBe(
      0,
    );
  });

  it('ignores absurd signals', () => {
    for (const policy of ['0;w=1', '50;w=0', '50;w=9999999', '-5;w=1', 'abc;w=1', '1e9;w=1'])
      expect(
        paceSignal(answer(200, { 'ratelimit-policy': policy }), NOW, HOUR).ceilingPerSec,
      ).toBeUndefined();
    expect(paceSignal(answer(429, { 'retry-after': '-3' }), NOW, HOUR).holdMs).toBe(0);
    expect(paceSignal(answer(429, { 'retry-after': 'soon' }), NOW, HOUR).holdMs).toBe(0);
    const farReset = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '999999' };
    expect(paceSignal(answer(200, farReset), NOW, HOUR).holdMs).toBe(0);
  });
});

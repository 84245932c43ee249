import { randomBytes } from 'node:crypto';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { afterAll, describe, expect, it } from 'vitest';
import { OriginPacer, type OriginPacerOptions, type PacedOutcome } from './index.ts';

const redis: RedisClient = createRedis({ url: 'redis://127.0.0.1:6379', commandTimeoutMs: 2_000 });
const prefixes: string[] = [];
const ORIGIN = 'http://127.0.0.1:9';
const ok: PacedOutcome = { kind: 'response', status: 200, headers: {} };
const tooMany = (headers: Record<string, string> = {}): PacedOutcome => ({
  kind: 'response',
  status: 429,
  headers,
});
const MS = 1_000_000; // ns

function pacer(options: Partial<OriginPacerOptions> = {}): OriginPacer {
  const prefix = `t:${randomBytes(6).toString('hex')}:pace:`;
  prefixes.push(prefix);
  return new OriginPacer({ redis, prefix, maxLimit: 8, retryAfterMaxMs: 3_600_000, ...options });
}

afterAll(async () => {
  for (const prefix of prefixes) {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

describe('OriginPacer', () => {
  it('lets an origin nobody asked to slow down go at once', async () => {
    const p = pacer();
    for (let i = 0; i < 20; i++) expect(await p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
    await p.report(ORIGIN, ok, 5 * MS);
    expect(await p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
  });

  it('holds the whole origin for the Retry-After of a 429, and sends its waiters back spaced at the pace', async () => {
    const p = pacer({ maxLocalWaitMs: 0 });
    const report = await p.report(ORIGIN, tooMany({ 'retry-after': '30', 'ratelimit-policy': '10;w=1' }), MS);
    // Paced at 90 % of the advertised 10/s, then at 70 % of that.
    expect(report).toMatchObject({ kind: 'slow', throttled: true });
    expect(report?.rate).toBeCloseTo(6.3);
    const slots: number[] = [];
    for (let i = 0; i < 5; i++) {
      const grant = await p.gate(ORIGIN);
      expect(grant.admitted).toBe(false);
      if (!grant.admitted) {
        expect(grant.retryInMs).toBeGreaterThan(29_000);
        slots.push(grant.slotMs);
      }
    }
    // No start before the hold's end; then one per 1000/6.3 ms (Redis time), not all at once.
    expect(slots[0]).toBe((await p.snapshot(ORIGIN)).holdUntilMs);
    for (let i = 1; i < slots.length; i++)
      expect(Math.abs((slots[i] ?? 0) - (slots[i - 1] ?? 0) - 1000 / 6.3)).toBeLessThanOrEqual(1);
  });

  it('lets a task back at its reserved slot go without taking another; a late one goes in the late lane', async () => {
    const p = pacer({ maxLocalWaitMs: 0 });
    await p.report(ORIGIN, { kind: 'response', status: 200, headers: { 'ratelimit-policy': '1;w=1' } }, MS);
    expect((await p.gate(ORIGIN)).admitted).toBe(true); // the first slot: now
    const refused = await p.gate(ORIGIN);
    if (refused.admitted) throw new Error('expected a refusal');
    const next = (await p.snapshot(ORIGIN)).nextSlotMs;
    // maxLocalWaitMs 0: only a task back exactly at its slot is let through: ask with a wider one.
    const onTime = new OriginPacer({
      redis,
      prefix: prefixes.at(-1) ?? '',
      maxLimit: 8,
      retryAfterMaxMs: 3_600_000,
      maxLocalWaitMs: 60_000,
    });
    expect(await onTime.gate(ORIGIN, refused.slotMs)).toMatchObject({ admitted: true });
    expect((await p.snapshot(ORIGIN)).nextSlotMs).toBe(next); // no slot taken
    expect((await p.gate(ORIGIN, refused.slotMs + 3_600_000)).admitted).toBe(false); // early: a new slot
    const after = (await p.snapshot(ORIGIN)).nextSlotMs ?? 0;
    expect(after - (next ?? 0)).toBeCloseTo(1000 / 0.9); // paced at 90 % of 1/s
    // Late: the first goes now, the next one a slot later (1/s), neither taking a regular slot.
    expect(await p.gate(ORIGIN, refused.slotMs - 3_600_000)).toEqual({ admitted: true, waitMs: 0 });
    expect((await p.gate(ORIGIN, refused.slotMs - 3_600_000)).admitted).toBe(false);
    expect((await p.snapshot(ORIGIN)).nextSlotMs).toBe(after);
  });

  it('bounds a hold by RETRY_AFTER_MAX', async () => {
    const p = pacer({ maxLocalWaitMs: 0, retryAfterMaxMs: 2_000 });
    await p.report(ORIGIN, tooMany({ 'retry-after': '86400' }), MS);
    const grant = await p.gate(ORIGIN);
    expect(grant.admitted).toBe(false);
    if (!grant.admitted) expect(grant.retryInMs).toBeLessThanOrEqual(2_000);
  });

  it('paces at the advertised RateLimit-Policy from the first answer: dispatch slots 1000/rate ms apart', async () => {
    const p = pacer({ maxLocalWaitMs: 10_000 });
    await p.report(ORIGIN, { kind: 'response', status: 200, headers: { 'ratelimit-policy': '20;w=1' } }, MS);
    expect((await p.snapshot(ORIGIN)).rate).toBe(18); // 90 % of it: a margin for the dispatch jitter
    const slots: number[] = [];
    for (let i = 0; i < 6; i++) {
      expect((await p.gate(ORIGIN)).admitted).toBe(true);
      slots.push((await p.snapshot(ORIGIN)).nextSlotMs ?? 0);
    }
    // Each dispatch takes the next slot: 1000/18 ms after the previous one (Redis time), whenever the gates ran.
    for (let i = 1; i < slots.length; i++)
      expect((slots[i] ?? 0) - (slots[i - 1] ?? 0)).toBeGreaterThanOrEqual(55);
  });

  it('lowers the pace once for a burst of 429s, then brings it back gradually up to the ceiling', async () => {
    const p = pacer();
    await p.report(ORIGIN, { kind: 'response', status: 200, headers: { 'ratelimit-policy': '40;w=1' } }, MS);
    const burst = await Promise.all(Array.from({ length: 10 }, () => p.report(ORIGIN, tooMany(), MS)));
    expect(burst.filter((r) => r?.throttled)).toHaveLength(1);
    expect((await p.snapshot(ORIGIN)).rate).toBeCloseTo(36 * 0.7);
    let rate = 36 * 0.7;
    for (let i = 0; i < 30; i++) {
      const r = await p.report(ORIGIN, ok, MS);
      expect(r?.rate).toBeGreaterThan(rate); // +0.35 per success: gradual
      expect(r?.rate).toBeLessThan(rate + 0.36);
      rate = r?.rate ?? 0;
    }
    for (let i = 0; i < 300; i++) await p.report(ORIGIN, ok, MS);
    expect((await p.snapshot(ORIGIN)).rate).toBe(36); // never above 90 % of what the target advertised
  });

  it('adapts the concurrency limit: up to the ceiling near the latency floor, down on queueing and timeouts', async () => {
    const p = pacer({ maxLimit: 16 });
    await p.report(ORIGIN, { kind: 'failure', error: { code: 'timeout' } }, 10_000 * MS);
    expect(p.limitOf(ORIGIN)).toBe(11); // 16 × 0.7
    for (let i = 0; i < 200; i++) await p.report(ORIGIN, ok, 5 * MS);
    expect(p.limitOf(ORIGIN)).toBe(16);
    // A queue forming at the target: the latency grows, the limit comes down.
    for (let i = 0; i < 100; i++) await p.report(ORIGIN, ok, 20 * MS);
    expect(p.limitOf(ORIGIN)).toBeLessThan(12);
    // A 429 is answered by the pace, not by the limit.
    const q = pacer({ maxLimit: 16 });
    await q.report(ORIGIN, tooMany(), MS);
    expect(q.limitOf(ORIGIN)).toBe(16);
  });

  it('shares the pace between executors: a 429 seen by one holds the origin for the other', async () => {
    const a = pacer({ maxLocalWaitMs: 0 });
    const b = new OriginPacer({
      redis: createRedis({ url: 'redis://127.0.0.1:6379' }),
      prefix: prefixes.at(-1) ?? '',
      maxLimit: 8,
      retryAfterMaxMs: 3_600_000,
    });
    await a.report(ORIGIN, tooMany({ 'retry-after': '10' }), MS);
    expect((await b.gate(ORIGIN)).admitted).toBe(false);
  });

  it('fails open when Redis is unreachable', async () => {
    const down = createRedis({ url: 'redis://127.0.0.1:1', commandTimeoutMs: 200 });
    const p = new OriginPacer({ redis: down, prefix: 't:', maxLimit: 8, retryAfterMaxMs: 1_000 });
    expect(await p.gate(ORIGIN)).toEqual({ admitted: true, waitMs: 0 });
    expect(await p.report(ORIGIN, tooMany(), MS)).toBeUndefined();
    down.disconnect();
  });
});

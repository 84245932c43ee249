import { randomBytes } from 'node:crypto';
import { OriginPacer, originOf } from '@requester/policies';
import { parseRequestEnvelope } from '@requester/shared/contract';
import { createLogger } from '@requester/shared/log';
import { createRedis } from '@requester/shared/redis';
import { startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalBulkhead } from '../bulkhead/index.ts';
import { createHttpClient } from '../http/index.ts';
import { Policies } from './policies.ts';

/**
 * The bulkhead's slot of a call is the target's concurrency (docs/architecture.md §9): it is given
 * back when the answer is in, while the pacer's report of it (a Redis round trip) is still out.
 * Held through that round trip, a limit at the target's capacity C keeps fewer than C calls there.
 */
describe('the bulkhead slot of a call', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  const prefix = `t:${randomBytes(6).toString('hex')}:pace:`;
  let target: Target;

  beforeAll(async () => {
    target = await startTarget();
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await target.close();
  });

  it('is free once the answer is in, before the report of it to the pacer ends', async () => {
    const pacer = new OriginPacer({ redis, prefix, maxLimit: 1, retryAfterMaxMs: 60_000 });
    // The report held until the test lets it go: the round trip, as long as a loaded Redis makes it.
    let reported!: () => void;
    const reportHeld = new Promise<void>((resolve) => {
      reported = resolve;
    });
    let reporting!: () => void;
    const reportStarted = new Promise<void>((resolve) => {
      reporting = resolve;
    });
    const report = pacer.report.bind(pacer);
    pacer.report = async (...args) => {
      reporting();
      await reportHeld;
      return report(...args);
    };
    const bulkhead = new LocalBulkhead({ maxPerOrigin: 1, maxWaitMs: 0 });
    const http = createHttpClient({
      connectTimeoutMs: 2_000,
      responseTimeoutMs: 10_000,
      maxResponseBytes: 1 << 20,
      followRedirects: false,
      allowPrivateTargets: ['127.0.0.1'],
    });
    const policies = new Policies({ http, bulkhead, pacer, retryAfterMaxMs: 60_000 });
    const uri = `${target.url}/echo`;
    const envelope = parseRequestEnvelope({ request: { uri }, meta: { requestId: 'slot-1' } });
    const attempt = policies.attempt(
      envelope,
      { tryCount: 0, waitedMs: 0 },
      createLogger({ level: 'silent' }),
    );
    await reportStarted;
    // The answer is in, its report out: the origin's one slot is another call's already.
    const next = await bulkhead.acquire(originOf(uri), undefined, undefined, false);
    expect(next.granted).toBe(true);
    if (next.granted) next.release();
    reported();
    const ending = await attempt;
    expect(ending.kind).toBe('result');
    await pacer.close();
    http.close();
  });
});

import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { RedisClock } from './clock.ts';
import { createRedis } from './index.ts';

/** As far off as the clock-skew e2e test's executors. */
const SKEW_MS = 2_000;

describe('RedisClock', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  afterAll(() => redis.disconnect());
  afterEach(() => vi.restoreAllMocks());

  it("cancels this host's skew: its offset is the skew's opposite, whichever way", async () => {
    const realNow = Date.now.bind(Date);
    for (const skew of [SKEW_MS, -SKEW_MS]) {
      vi.spyOn(Date, 'now').mockImplementation(() => realNow() + skew);
      const clock = new RedisClock(redis);
      await clock.sync();
      // Redis runs on this host: what is left of the offset is the round trip's, far below the skew.
      expect(Math.abs(clock.offsetMs + skew)).toBeLessThan(SKEW_MS / 2);
      const [seconds, micros] = await redis.time();
      expect(Math.abs(clock.now() - (Number(seconds) * 1_000 + Number(micros) / 1_000))).toBeLessThan(
        SKEW_MS / 2,
      );
      vi.restoreAllMocks();
    }
  });
});

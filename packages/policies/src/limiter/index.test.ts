import { randomBytes } from 'node:crypto';
import { LIMITER_ALGORITHMS, type LimiterAlgorithm, type LimiterSpec } from '@requester/shared/contract';
import { RequesterError } from '@requester/shared/errors';
import { registry } from '@requester/shared/metrics';
import { createRedis, type Redis, type RedisClient } from '@requester/shared/redis';
import { redisServerAvailable, startRedisCluster, type TestCluster } from '@requester/shared/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LimitDecision, limiterKeys, limiterWindows, longestWaitMs, RateLimiter } from './index.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const unique = (what: string) => `${what}-${randomBytes(5).toString('hex')}`;
const prefix = `t:${randomBytes(6).toString('hex')}:`;

type Rates = Array<[duration: string, value: number]>;

function specOf(algorithm: LimiterAlgorithm, rates: Rates, key = unique('k')): LimiterSpec {
  return { key, algorithm, rates: rates.map(([duration, value]) => ({ duration, value })) };
}

/** Microseconds of the Redis clock at a decision (atMs carries them as a fraction). */
const usOf = (d: LimitDecision) => Math.round(d.atMs * 1000);

/** Every key's serialized value: a denied take must leave each one byte-for-byte unchanged. */
async function snapshot(redis: RedisClient, keys: string[]): Promise<Array<string | null>> {
  return Promise.all(keys.map(async (key) => (await redis.dumpBuffer(key))?.toString('hex') ?? null));
}

async function takeUntilLimited(limiter: RateLimiter, spec: LimiterSpec): Promise<LimitDecision[]> {
  const decisions: LimitDecision[] = [];
  for (let i = 0; i < 100; i++) {
    const decision = await limiter.take(spec);
    decisions.push(decision);
    if (!decision.allowed) return decisions;
  }
  throw new Error('the limiter never said no');
}

async function countAllowed(limiter: RateLimiter, spec: LimiterSpec, attempts: number): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < attempts; i++) if ((await limiter.take(spec)).allowed) allowed++;
  return allowed;
}

describe('limiterWindows', () => {
  it('keeps one window per duration, the smaller value, shortest first', () => {
    const spec = specOf('token-bucket', [
      ['1m', 100],
      ['1s', 10],
      ['1000ms', 5],
    ]);
    expect(limiterWindows(spec)).toEqual([
      { durationMs: 1000, value: 5 },
      { durationMs: 60_000, value: 100 },
    ]);
  });

  it('refuses a window shorter than a millisecond as an invalid request', () => {
    const spec = specOf('fixed-window-counter', [['500us', 1]]);
    expect(() => limiterWindows(spec)).toThrow(RequesterError);
    expect(() => limiterWindows(spec)).toThrow(/rates\[0\]\.duration/);
  });

  it('puts every key of one limiter behind the hash tag {lim:<key>}', () => {
    for (const algorithm of LIMITER_ALGORITHMS) {
      const keys = limiterKeys(
        'rq:',
        specOf(
          algorithm,
          [
            ['1s', 1],
            ['1m', 5],
            ['1h', 9],
          ],
          'partner-a',
        ),
      );
      for (const key of keys) expect(key.startsWith('rq:{lim:partner-a}:')).toBe(true);
    }
  });
});

interface Target {
  name: string;
  skip: boolean;
  connect(): Promise<RedisClient>;
  stop(): Promise<void>;
}

let cluster: TestCluster | undefined;
const targets: Target[] = [
  {
    name: 'single node',
    skip: false,
    connect: async () => createRedis({ url: 'redis://127.0.0.1:6379' }),
    stop: async () => {},
  },
  {
    name: '3-node cluster',
    skip: !redisServerAvailable(),
    connect: async () => {
      // Ports away from the queue suite's (7101…), which may start its cluster in parallel.
      cluster = await startRedisCluster(7401);
      return createRedis({ url: cluster.url, cluster: true });
    },
    stop: async () => cluster?.stop(),
  },
];

describe.each(targets)('RateLimiter on $name', (target) => {
  let redis: RedisClient;
  let limiter: RateLimiter;

  beforeAll(async () => {
    if (target.skip) return;
    redis = await target.connect();
    limiter = new RateLimiter({ redis, prefix });
  });
  afterAll(async () => {
    if (target.skip) return;
    if (!redis.isCluster) await deleteByPrefix(redis, prefix);
    redis.disconnect();
    await target.stop();
  });

  describe.skipIf(target.skip).each(LIMITER_ALGORITHMS)('%s', (algorithm) => {
    it('consumes no window when the longer one denies', async () => {
      const key = unique('k');
      const both = specOf(
        algorithm,
        [
          ['1h', 5],
          ['2h', 3],
        ],
        key,
      );
      expect(await countAllowed(limiter, both, 3)).toBe(3);
      const keys = limiterKeys(prefix, both);
      const before = await snapshot(redis, keys);
      for (let i = 0; i < 5; i++) expect((await limiter.take(both)).outcome).toBe('limited');
      expect(await snapshot(redis, keys)).toEqual(before);
      // The hour window alone (same key, same state) still has exactly its 2 calls left.
      expect(await countAllowed(limiter, specOf(algorithm, [['1h', 5]], key), 5)).toBe(2);
    });

    it('consumes no window when the shorter one denies', async () => {
      const key = unique('k');
      const both = specOf(
        algorithm,
        [
          ['1h', 3],
          ['2h', 5],
        ],
        key,
      );
      expect(await countAllowed(limiter, both, 3)).toBe(3);
      for (let i = 0; i < 5; i++) expect((await limiter.take(both)).allowed).toBe(false);
      expect(await countAllowed(limiter, specOf(algorithm, [['2h', 5]], key), 5)).toBe(2);
    });

    it('answers oversized, consuming nothing, when the cost exceeds a window', async () => {
      const spec = specOf(algorithm, [
        ['1h', 5],
        ['2h', 8],
      ]);
      const decision = await limiter.take(spec, 6);
      expect(decision).toMatchObject({ outcome: 'oversized', allowed: false, retryAfterMs: 0 });
      expect(await redis.exists(...limiterKeys(prefix, spec))).toBe(0);
      expect(await limiter.take(spec, 5)).toMatchObject({ outcome: 'allowed', remaining: 0 });
    });

    // meta.limiter.cost: a take of cost c is c units in every window (tokens, rows, pages).
    it('allows a take of cost c exactly when the units taken so far plus c fit the window', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 20 }),
          fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 12 }),
          async (value, asked) => {
            // A window far longer than the test: nothing leaks or rolls over meanwhile.
            const spec = specOf(algorithm, [['1000h', value]]);
            let used = 0;
            for (const cost of asked.map((c) => Math.min(c, value))) {
              const decision = await limiter.take(spec, cost);
              const fits = used + cost <= value;
              expect(decision.outcome, `${used} + ${cost} of ${value}`).toBe(fits ? 'allowed' : 'limited');
              if (fits) used += cost;
              else expect(decision.retryAfterMs).toBeGreaterThanOrEqual(1);
            }
          },
        ),
        { numRuns: 25 },
      );
    });

    it('takes a cost from every window, and nothing when one of them cannot hold it', async () => {
      const key = unique('k');
      const both = specOf(
        algorithm,
        [
          ['1000h', 10],
          ['2000h', 15],
        ],
        key,
      );
      expect((await limiter.take(both, 8)).outcome).toBe('allowed');
      expect((await limiter.take(both, 3)).outcome).toBe('limited'); // the 10 window: 8 + 3 > 10
      expect((await limiter.take(both, 2)).outcome).toBe('allowed');
      // The longer window alone (same key, same state) holds 15 − 10 = 5 units more, not a call more.
      const longer = specOf(algorithm, [['2000h', 15]], key);
      expect((await limiter.take(longer, 6)).outcome).toBe('limited');
      expect((await limiter.take(longer, 5)).outcome).toBe('allowed');
    });

    it('counts remaining calls of the tightest window', async () => {
      const spec = specOf(algorithm, [
        ['1h', 4],
        ['2h', 10],
      ]);
      const remaining = [];
      for (let i = 0; i < 5; i++) remaining.push((await limiter.take(spec)).remaining);
      expect(remaining).toEqual([3, 2, 1, 0, 0]);
    });

    it('decides a batch in one call, in order', async () => {
      const spec = specOf(algorithm, [['1h', 5]]);
      const other = specOf(algorithm, [['1h', 1]]);
      const decisions = await limiter.takeMany([
        ...Array.from({ length: 7 }, () => ({ spec })),
        { spec: other, cost: 2 },
        { spec: other },
      ]);
      expect(decisions.map((d) => d.outcome)).toEqual([
        ...Array<string>(5).fill('allowed'),
        'limited',
        'limited',
        'oversized',
        'allowed',
      ]);
      expect(decisions.slice(0, 5).map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0]);
    });

    it('admits the next take once retryAfterMs has passed', async () => {
      const spec = specOf(algorithm, [
        ['100ms', 2],
        ['400ms', 3],
      ]);
      for (let round = 0; round < 3; round++) {
        const denied = (await takeUntilLimited(limiter, spec)).at(-1)!;
        expect(denied.retryAfterMs).toBeGreaterThan(0);
        expect(denied.retryAfterMs).toBeLessThanOrEqual(algorithm === 'sliding-window-counter' ? 800 : 400);
        await sleep(denied.retryAfterMs + 2); // +2 ms: setTimeout and the Redis clock round differently
        expect((await limiter.take(spec)).allowed).toBe(true);
      }
    });
  });

  it.skipIf(target.skip)('keeps the keys of one limiter in one cluster slot', async () => {
    const spec = specOf('sliding-window-counter', [
      ['1s', 1],
      ['1m', 2],
      ['1h', 3],
      ['24h', 4],
    ]);
    const keys = limiterKeys(prefix, spec);
    expect(keys).toHaveLength(4);
    if (!redis.isCluster) {
      // One node has no slots; the cluster run asks the cluster itself.
      expect(new Set(keys.map((k) => /\{([^}]*)\}/.exec(k)?.[1])).size).toBe(1);
      return;
    }
    const slots = await Promise.all(keys.map((k) => redis.call('CLUSTER', 'KEYSLOT', k)));
    expect(new Set(slots).size).toBe(1);
  });

  it.skipIf(target.skip)('takes a calendar quota with the most windows in the limiter’s slot', async () => {
    const durations = ['1s', '2s', '3s', '4s', '5s', '6s', '7s', '8s'];
    for (const algorithm of LIMITER_ALGORITHMS) {
      const spec: LimiterSpec = {
        ...specOf(
          algorithm,
          durations.map((d) => [d, 5]),
        ),
        quota: { value: 2, period: 'month', resetDay: 31, timeZone: 'Europe/Paris' },
      };
      const keys = limiterKeys(prefix, spec);
      expect(keys).toHaveLength(algorithm === 'sliding-window-log' ? 2 : 9);
      const decisions = await limiter.takeMany([{ spec, cost: 2 }, { spec }]);
      expect(decisions.map((d) => d.outcome)).toEqual(['allowed', 'limited']);
      if (redis.isCluster) {
        const slots = await Promise.all(keys.map((k) => redis.call('CLUSTER', 'KEYSLOT', k)));
        expect(new Set(slots).size).toBe(1);
      }
    }
  });

  it.skipIf(target.skip)('serves a batch spread over many slots', async () => {
    const specs = LIMITER_ALGORITHMS.flatMap((algorithm) =>
      Array.from({ length: 8 }, () =>
        specOf(algorithm, [
          ['1m', 2],
          ['1h', 3],
        ]),
      ),
    );
    const decisions = await limiter.takeMany(specs.flatMap((spec) => [{ spec }, { spec }, { spec }]));
    expect(decisions.map((d) => d.outcome)).toEqual(specs.flatMap(() => ['allowed', 'allowed', 'limited']));
  });

  describe.skipIf(target.skip)('two-phase sliding log (a dispatch budget)', () => {
    const budgetMs = 10_000;
    const log = () => specOf('sliding-window-log', [['300ms', 1]]);

    it('a pending slot counts until settled, past its window: the call may not have left yet', async () => {
      const spec = log();
      const first = await limiter.take(spec, 1, budgetMs);
      expect(first.allowed).toBe(true);
      expect(first.reservation).toMatchObject({ cost: 1, budgetMs, key: limiterKeys(prefix, spec)[0] });
      await sleep(400); // longer than the window: a one-phase entry would have left it
      const second = await limiter.take(spec, 1, budgetMs);
      expect(second.outcome).toBe('limited');
      // Its wait is reckoned from the decision (a hint: the slot is most likely settled soon), at least d / v.
      expect(second.retryAfterMs).toBeGreaterThanOrEqual(300);
    });

    it('a settled slot counts from its send instant: a call sent 5 s after its take holds the window until 5.3 s', async () => {
      const spec = log();
      const first = await limiter.take(spec, 1, budgetMs);
      const reservation = first.reservation!;
      // As if the request reached the socket 5 s after the take left (an executor stalled that long).
      const { late } = await limiter.settle(reservation, reservation.issuedAt + 5_000);
      expect(late).toBe(false);
      const second = await limiter.take(spec, 1, budgetMs);
      expect(second.outcome).toBe('limited');
      const sentUs = reservation.atUs + 5_000_000;
      expect(second.retryAfterMs).toBeGreaterThanOrEqual(
        Math.floor((sentUs + 300_000 - usOf(second)) / 1000),
      );
      expect(await redis.zscore(reservation.key, `${reservation.head}:1`)).toBe(String(sentUs));
    });

    it('an arrival margin counts the slot from that much after its send, and does not make it late', async () => {
      const spec = log();
      const first = await limiter.take(spec, 1, budgetMs);
      const reservation = first.reservation!;
      // Sent 1 s after the take; a target counting by arrival may see it up to 250 ms later.
      const { late } = await limiter.settle(reservation, reservation.issuedAt + 1_000, 250);
      expect(late).toBe(false);
      const sentUs = reservation.atUs + 1_000_000;
      expect(await redis.zscore(reservation.key, `${reservation.head}:1`)).toBe(String(sentUs + 250_000));
      const second = await limiter.take(spec, 1, budgetMs);
      expect(second.outcome).toBe('limited');
      expect(second.retryAfterMs).toBeGreaterThanOrEqual(
        Math.floor((sentUs + 250_000 + 300_000 - usOf(second)) / 1000),
      );
    });

    it('a slot given back (the call was never sent) frees its place at once', async () => {
      const spec = log();
      const first = await limiter.take(spec, 1, budgetMs);
      expect((await limiter.take(spec, 1, budgetMs)).outcome).toBe('limited');
      await limiter.settle(first.reservation!, undefined);
      const again = await limiter.take(spec, 1, budgetMs);
      expect(again.allowed).toBe(true);
      expect(await redis.zcard(first.reservation!.key)).toBe(1);
    });

    it('a send later than the budget is counted from its real send, and said late', async () => {
      const spec = log();
      const first = await limiter.take(spec, 1, 100);
      const { late } = await limiter.settle(first.reservation!, first.reservation!.issuedAt + 2_000);
      expect(late).toBe(true);
      const score = Number(await redis.zscore(first.reservation!.key, `${first.reservation!.head}:1`));
      expect(score).toBeGreaterThanOrEqual(first.reservation!.atUs + 2_000_000);
    });

    it('a cost of 3 settles its 3 entries; other algorithms and a budget of 0 make no reservation', async () => {
      const spec = specOf('sliding-window-log', [['1s', 5]]);
      const three = await limiter.take(spec, 3, budgetMs);
      expect(three.reservation?.cost).toBe(3);
      await limiter.settle(three.reservation!, performance.now());
      const members = await redis.zrange(three.reservation!.key, 0, -1);
      expect(members.sort()).toEqual([1, 2, 3].map((j) => `${three.reservation!.head}:${j}`));
      expect(
        (await limiter.take(specOf('sliding-window-log', [['1s', 5]]), 1, 0)).reservation,
      ).toBeUndefined();
      for (const algorithm of LIMITER_ALGORITHMS.filter((a) => a !== 'sliding-window-log')) {
        const decision = await limiter.take(specOf(algorithm, [['1s', 5]]), 1, budgetMs);
        expect(decision.allowed).toBe(true);
        expect(decision.reservation).toBeUndefined();
      }
    });
  });
});

/** retryAfterMs against the formulas of docs/architecture.md §9, from the Redis clock of each decision. */
describe('retryAfterMs formulas', () => {
  let redis: RedisClient;
  let limiter: RateLimiter;
  const HOUR_US = 3_600e6;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    limiter = new RateLimiter({ redis, prefix });
  });
  afterAll(() => redis.disconnect());

  /** Three calls admitted by `[{1h, 3}]`, then the denial. */
  async function exhaust(algorithm: LimiterAlgorithm) {
    const spec = specOf(algorithm, [['1h', 3]]);
    const decisions = await takeUntilLimited(limiter, spec);
    expect(decisions.map((d) => d.outcome)).toEqual(['allowed', 'allowed', 'allowed', 'limited']);
    const [first, , , denied] = decisions.map(usOf) as [number, number, number, number];
    return { first, denied, retryAfterMs: decisions[3]!.retryAfterMs };
  }

  it.each(['token-bucket', 'leaky-bucket'] as const)('%s: (cost − tokens) / rate', async (algorithm) => {
    const { first, denied, retryAfterMs } = await exhaust(algorithm);
    // No refill between the calls worth a token: level = 3 − leaked, so the wait is one interval
    // T = 1h / 3 minus what leaked since the first call.
    const expected = (first + HOUR_US / 3 - denied) / 1000;
    expect(Math.abs(retryAfterMs - expected)).toBeLessThanOrEqual(1);
  });

  it('fixed-window-counter: the window’s remaining time', async () => {
    const { denied, retryAfterMs } = await exhaust('fixed-window-counter');
    const windowEnd = (Math.floor(denied / HOUR_US) + 1) * HOUR_US;
    expect(retryAfterMs).toBe(Math.ceil((windowEnd - denied) / 1000));
  });

  it('sliding-window-log: oldest entry + window − now', async () => {
    const { first, denied, retryAfterMs } = await exhaust('sliding-window-log');
    expect(retryAfterMs).toBe(Math.ceil((first + HOUR_US - denied) / 1000));
  });

  it('sliding-window-counter: from the weighted previous window', async () => {
    const { denied, retryAfterMs } = await exhaust('sliding-window-counter');
    // current = 3 = value: wait for the next window, where 3 · (1 − e/1h) + 1 <= 3 at e = 1h/3.
    const windowEnd = (Math.floor(denied / HOUR_US) + 1) * HOUR_US;
    expect(retryAfterMs).toBe(Math.ceil((windowEnd - denied + HOUR_US / 3) / 1000));
  });

  // The ingress refuses, for keys without the `schedule` scope, limiters whose wait can pass REDIS_HORIZON.
  it.each(LIMITER_ALGORITHMS)('%s: never asks for more than longestWaitMs', async (algorithm) => {
    const { retryAfterMs } = await exhaust(algorithm);
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(longestWaitMs(algorithm, { durationMs: 3_600_000, value: 3 }));
  });
});

/**
 * Bursty load: several clients fire bursts of concurrent takes (and batches) with uneven pauses.
 * Then the admitted calls, placed on the Redis clock, must respect every window as the algorithm
 * defines it — and the limiter must have been saturated, or the test proves nothing.
 */
describe.concurrent('under bursty load', () => {
  let redis: RedisClient;
  let limiter: RateLimiter;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    limiter = new RateLimiter({ redis, prefix });
  });
  afterAll(() => redis.disconnect());

  const RATES: Rates = [
    ['200ms', 3],
    ['1s', 10],
  ];

  async function client(spec: LimiterSpec, seed: number, untilMs: number): Promise<number[]> {
    const admitted: number[] = [];
    for (let round = seed; Date.now() < untilMs; round++) {
      const size = 4 + ((round * 7) % 17);
      const decisions =
        round % 4 === 0
          ? await limiter.takeMany(Array.from({ length: size }, () => ({ spec })))
          : await Promise.all(Array.from({ length: size }, () => limiter.take(spec)));
      admitted.push(...decisions.filter((d) => d.allowed).map(usOf));
      await sleep((round * 37) % 45);
    }
    return admitted;
  }

  async function load(algorithm: LimiterAlgorithm): Promise<number[]> {
    const spec = specOf(algorithm, RATES);
    const until = Date.now() + 2_000;
    const perClient = await Promise.all([1, 2, 3].map((seed) => client(spec, seed, until)));
    return perClient.flat().sort((a, b) => a - b);
  }

  const windows = RATES.map(([duration, value]) => ({
    us: limiterWindows(specOf('token-bucket', [[duration, value]]))[0]!.durationMs * 1000,
    value,
  }));

  it.each(['token-bucket', 'leaky-bucket'] as const)(
    '%s: any interval of length L admits at most capacity + rate · L',
    async (algorithm) => {
      const at = await load(algorithm);
      for (const { us, value } of windows) {
        const interval = us / value;
        let worst = -Infinity;
        for (let i = 0; i < at.length; i++) {
          for (let j = i; j < at.length; j++) {
            worst = Math.max(worst, j - i + 1 - (value + (at[j]! - at[i]!) / interval));
          }
        }
        expect(worst).toBeLessThanOrEqual(1e-6);
      }
      // Saturated: the first burst emptied the bucket of the short window.
      expect(at.length).toBeGreaterThanOrEqual(windows[0]!.value);
    },
  );

  it('fixed-window-counter: each epoch-aligned window admits at most its value', async () => {
    const at = await load('fixed-window-counter');
    for (const { us, value } of windows) {
      const counts = countBy(at, (t) => Math.floor(t / us));
      expect(Math.max(...counts.values())).toBe(value);
    }
  });

  it('sliding-window-log: every sliding window admits at most its value', async () => {
    const at = await load('sliding-window-log');
    for (const { us, value } of windows) {
      let worst = 0;
      for (let j = 0, i = 0; j < at.length; j++) {
        while (at[i]! <= at[j]! - us) i++;
        worst = Math.max(worst, j - i + 1);
      }
      expect(worst).toBe(value);
    }
  });

  it('sliding-window-counter: at each admission, weighted previous + current <= value', async () => {
    const at = await load('sliding-window-counter');
    for (const { us, value } of windows) {
      const counts = countBy(at, (t) => Math.floor(t / us));
      expect(Math.max(...counts.values())).toBeLessThanOrEqual(value);
      let worst = 0;
      for (const [j, t] of at.entries()) {
        const number = Math.floor(t / us);
        const previous = counts.get(number - 1) ?? 0;
        // Admitted so far in this window, this call included (ties on the clock count as before it).
        const current = at.filter((u, i) => Math.floor(u / us) === number && (u < t || i <= j)).length;
        worst = Math.max(worst, previous * (1 - (t - number * us) / us) + current);
      }
      expect(worst).toBeLessThanOrEqual(value + 1e-6);
      expect(worst).toBeGreaterThan(value - 1);
    }
  });
});

describe('housekeeping', () => {
  let redis: RedisClient;
  let limiter: RateLimiter;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    limiter = new RateLimiter({ redis, prefix });
  });
  afterAll(() => redis.disconnect());

  it('lets the keys of an idle limiter expire', async () => {
    // Windows long enough that one pipelined PTTL read right after the take cannot race the expiry
    // on a loaded machine; -1 (no TTL) or a TTL above the bound is the bug this test is about.
    const specs = LIMITER_ALGORITHMS.map((algorithm) =>
      specOf(algorithm, [
        ['400ms', 2],
        ['1s', 3],
      ]),
    );
    await limiter.takeMany(specs.map((spec) => ({ spec })));
    const keysBySpec = specs.map((spec) => limiterKeys(prefix, spec));
    const pipeline = redis.pipeline();
    for (const key of keysBySpec.flat()) pipeline.pttl(key);
    const ttls = ((await pipeline.exec()) ?? []).map(([error, ttl]) => {
      if (error) throw error;
      return ttl as number;
    });
    let at = 0;
    for (const [index, spec] of specs.entries()) {
      // The sliding counter's state outlives its window by one more (it weighs in the next one).
      const bound = spec.algorithm === 'sliding-window-counter' ? 2000 : 1000;
      for (const key of keysBySpec[index] ?? []) {
        const ttl = ttls[at++];
        expect({ key, ttl }).toEqual({ key, ttl: expect.any(Number) });
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(bound);
      }
    }
    await sleep(2100);
    expect(await redis.exists(...keysBySpec.flat())).toBe(0);
  });

  it('counts decisions by algorithm and outcome', async () => {
    const value = async (algorithm: string, outcome: string) => {
      const metric = registry.getSingleMetric('requester_limiter_decisions_total');
      const values = (await metric?.get())?.values ?? [];
      return values.find((v) => v.labels.algorithm === algorithm && v.labels.outcome === outcome)?.value ?? 0;
    };
    const spec = specOf('leaky-bucket', [['1h', 1]]);
    const before = await Promise.all(
      ['allowed', 'limited', 'oversized'].map((o) => value('leaky-bucket', o)),
    );
    await limiter.takeMany([{ spec }, { spec }, { spec }, { spec, cost: 2 }]);
    const after = await Promise.all(['allowed', 'limited', 'oversized'].map((o) => value('leaky-bucket', o)));
    expect(after.map((n, i) => n - before[i]!)).toEqual([1, 2, 1]);
  });

  it('refuses a cost that is not a whole number of calls, and a prefix with braces', async () => {
    const spec = specOf('token-bucket', [['1s', 5]]);
    await expect(limiter.take(spec, 0)).rejects.toThrow(RangeError);
    await expect(limiter.take(spec, 1.5)).rejects.toThrow(RangeError);
    expect(() => new RateLimiter({ redis, prefix: 'a{b}:' })).toThrow(RangeError);
  });

  it('reports Redis failures as dependency_unavailable', async () => {
    const broken = createRedis({ url: 'redis://127.0.0.1:1', commandTimeoutMs: 200 });
    broken.on('error', () => {});
    const failing = new RateLimiter({ redis: broken, prefix });
    const spec = specOf('token-bucket', [['1s', 5]]);
    await expect(failing.take(spec)).rejects.toMatchObject({ code: 'dependency_unavailable' });
    await expect(failing.takeMany([{ spec }])).rejects.toMatchObject({ code: 'dependency_unavailable' });
    broken.disconnect();
  });
});

function countBy<T>(items: readonly T[], keyOf: (item: T) => number): Map<number, number> {
  const counts = new Map<number, number>();
  for (const item of items) counts.set(keyOf(item), (counts.get(keyOf(item)) ?? 0) + 1);
  return counts;
}

async function deleteByPrefix(redis: RedisClient, keyPrefix: string): Promise<void> {
  for await (const keys of (redis as Redis).scanStream({ match: `${keyPrefix}*`, count: 500 })) {
    if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
  }
}

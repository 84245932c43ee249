/**
 * Rate limiter benchmark: decisions per second per algorithm (one take at a time, concurrent
 * takes, and takeMany batches), and Redis memory per limiter key.
 *
 *   pnpm exec node packages/policies/bench/limiter-bench.ts [--seconds 3] [--keys 10000]
 *
 * Runs against a private redis-server it starts on a free port (no persistence), so that the
 * memory figures are not polluted by other work on the shared Redis; it stops exactly that process.
 * Figures are recorded in the "Rate limiter" section of docs/benchmarks/limiter.md.
 */
import { LIMITER_ALGORITHMS, type LimiterAlgorithm, type LimiterSpec } from '@requester/shared/contract';
import { createRedis, type Redis } from '@requester/shared/redis';
import { parseBenchArgs, startPrivateRedis } from '@requester/shared/testing';
import { RateLimiter } from '../src/limiter/index.ts';

const { values } = parseBenchArgs({
  usage: `Rate limiter benchmark: decisions per second per algorithm (one take at a time, concurrent
takes, and takeMany batches), and Redis memory per limiter key. Runs against a private
redis-server it starts on a free port (no persistence), and stops exactly that process.

  pnpm exec node packages/policies/bench/limiter-bench.ts [--seconds 3] [--keys 10000]

As run for docs/benchmarks/limiter.md:
  pnpm exec node packages/policies/bench/limiter-bench.ts --seconds 3 --keys 10000`,
  options: {
    seconds: {
      type: 'string',
      default: '3',
      value: 'S',
      number: true,
      help: 'seconds each throughput figure is measured',
    },
    keys: {
      type: 'string',
      default: '10000',
      value: 'N',
      number: true,
      help: 'limiter keys written for the memory figure',
    },
  },
});
const SECONDS = Number(values.seconds);
const KEYS = Number(values.keys);

const ONE_WINDOW = [{ duration: '1s', value: 10 }];
const THREE_WINDOWS = [
  { duration: '1s', value: 10 },
  { duration: '1m', value: 100 },
  { duration: '1h', value: 1000 },
];
// Memory is measured with windows long enough that no key expires (a bucket's key lives only
// until it refills) while used_memory is read.
const MEMORY_ONE = [{ duration: '1m', value: 10 }];
const MEMORY_THREE = [
  { duration: '1m', value: 10 },
  { duration: '1h', value: 100 },
  { duration: '24h', value: 1000 },
];

const spec = (algorithm: LimiterAlgorithm, rates: LimiterSpec['rates'], i: number): LimiterSpec => ({
  key: `partner-${i % KEYS}`,
  algorithm,
  rates,
});

type Mode = 'sequential' | 'concurrent 64' | 'takeMany 64';

/** Runs `mode` for SECONDS; returns decisions per second and the share allowed. */
async function measure(
  limiter: RateLimiter,
  algorithm: LimiterAlgorithm,
  rates: LimiterSpec['rates'],
  mode: Mode,
) {
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  let allowed = 0;
  let i = 0;
  while (performance.now() < until) {
    const batch = mode === 'sequential' ? 1 : 64;
    const specs = Array.from({ length: batch }, () => spec(algorithm, rates, i++));
    const decisions =
      mode === 'takeMany 64'
        ? await limiter.takeMany(specs.map((s) => ({ spec: s })))
        : await Promise.all(specs.map((s) => limiter.take(s)));
    done += decisions.length;
    allowed += decisions.filter((d) => d.allowed).length;
  }
  return { perSecond: Math.round(done / SECONDS), allowedShare: allowed / done };
}

/** Server-side microseconds per script call since the last RESETSTAT (independent of client load). */
async function scriptMicros(redis: Redis): Promise<string> {
  const stats = await redis.info('commandstats');
  const evalsha = /cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(stats)?.[1];
  return Number(evalsha ?? Number.NaN).toFixed(1);
}

/** Bytes per limiter: used_memory growth over `keys` fresh limiters, each taken `takes` times. */
async function memoryPerLimiter(
  redis: Redis,
  limiter: RateLimiter,
  algorithm: LimiterAlgorithm,
  rates: LimiterSpec['rates'],
  takes: number,
  keys = KEYS,
) {
  await redis.flushall();
  const before = Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
  for (let start = 0; start < keys; start += 500) {
    const requests = [];
    for (let k = start; k < Math.min(keys, start + 500); k++) {
      for (let t = 0; t < takes; t++) requests.push({ spec: { key: `mem-${k}`, algorithm, rates } });
    }
    await limiter.takeMany(requests);
  }
  const after = Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
  return Math.round((after - before) / keys);
}

async function main() {
  const { url, stop } = await startPrivateRedis();
  const redis = createRedis({ url }) as Redis;
  const limiter = new RateLimiter({ redis, prefix: 'rq:' });
  try {
    const version = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1];
    console.log(`Redis ${version}, ${KEYS} limiter keys, ${SECONDS}s per run\n`);
    await measure(limiter, 'token-bucket', ONE_WINDOW, 'concurrent 64'); // warm-up: JIT, script load
    console.log(
      '| algorithm | windows | sequential | concurrent 64 | takeMany 64 | Redis CPU per take | allowed (takeMany) |',
    );
    console.log('|---|---|---|---|---|---|---|');
    for (const algorithm of LIMITER_ALGORITHMS) {
      for (const rates of [ONE_WINDOW, THREE_WINDOWS]) {
        await redis.flushall();
        const seq = await measure(limiter, algorithm, rates, 'sequential');
        const conc = await measure(limiter, algorithm, rates, 'concurrent 64');
        await redis.config('RESETSTAT');
        const many = await measure(limiter, algorithm, rates, 'takeMany 64');
        console.log(
          `| ${algorithm} | ${rates.length} | ${seq.perSecond}/s | ${conc.perSecond}/s | ${many.perSecond}/s | ${await scriptMicros(redis)} µs | ${(many.allowedShare * 100).toFixed(0)}% |`,
        );
      }
    }
    console.log(
      '\n| algorithm | 1m/10, 1 take | 1m/10 + 1h/100 + 24h/1000, 1 take | same, 10 takes | 1h/1000, 1000 takes |',
    );
    console.log('|---|---|---|---|---|');
    for (const algorithm of LIMITER_ALGORITHMS) {
      const cells = [
        await memoryPerLimiter(redis, limiter, algorithm, MEMORY_ONE, 1),
        await memoryPerLimiter(redis, limiter, algorithm, MEMORY_THREE, 1),
        await memoryPerLimiter(redis, limiter, algorithm, MEMORY_THREE, 10),
      ];
      const full =
        algorithm === 'sliding-window-log'
          ? `${await memoryPerLimiter(redis, limiter, algorithm, [{ duration: '1h', value: 1000 }], 1000, 100)} B`
          : '—';
      console.log(`| ${algorithm} | ${cells.map((c) => `${c} B`).join(' | ')} | ${full} |`);
    }
  } finally {
    redis.disconnect();
    await stop();
  }
}

await main();

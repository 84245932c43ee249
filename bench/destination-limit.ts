// A caller's own limit beside its destination's (docs/architecture.md §10, "Destinations"): the
// limit gate's cost per lease batch, on the real Redis, with the destination's limit alone and
// with the caller's taken first, side by side in one run (alternating rounds). Printed: the
// limiter round trips (`takeMany` calls) per batch and the batch's time through the gate
// (median, p90). Limits far above the load, so every take grants and both takes are made.
//
//   node bench/destination-limit.ts [--rounds 200] [--batch 64] [--algorithm sliding-window-log]

import { limit } from '../packages/executor/src/attempt/gates/limit.ts';
import { request, walkThrough } from '../packages/executor/src/attempt/walk.fixture.ts';
import { RateLimiter } from '../packages/policies/src/index.ts';
import { createRedis } from '../packages/shared/src/redis/index.ts';
import { uniqueName } from '../packages/shared/src/testing/index.ts';
import { loadavg, parseBenchArgs } from './harness.ts';

const { values: args } = parseBenchArgs({
  usage: `The limit gate per lease batch, a destination's limit alone and with the caller's own first.

  node bench/destination-limit.ts [--rounds 200] [--batch 64] [--algorithm sliding-window-log]`,
  options: {
    rounds: { type: 'string', default: '200', value: 'N', number: true, help: 'batches per case' },
    batch: { type: 'string', default: '64', value: 'N', number: true, help: 'attempts per batch' },
    algorithm: {
      type: 'string',
      default: 'sliding-window-log',
      value: 'NAME',
      help: 'both limits’ algorithm',
    },
  },
});
const ROUNDS = Number(args.rounds);
const BATCH = Number(args.batch);
const algorithm = String(args.algorithm) as 'sliding-window-log';

const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
const prefix = `${uniqueName('bench-dest-limit')}:`;
const limiter = new RateLimiter({ redis, prefix });
let roundTrips = 0;
const takeMany = limiter.takeMany.bind(limiter);
limiter.takeMany = (items) => {
  roundTrips += 1;
  return takeMany(items);
};
const walk = walkThrough(limit, { limiter });
const rates = [{ duration: '1s', value: 10_000_000 }];
const destination = {
  name: 'bench',
  pacing: true,
  limiter: { key: `destination ${uniqueName('bench')}`, algorithm, rates },
};
const cases = {
  'destination only': () => request({ client: 'bench' }),
  'caller + destination': () => request({ client: 'bench', limiter: { key: 'own', algorithm, rates } }),
};
const times: Record<string, number[]> = {};
const trips: Record<string, number> = {};
for (let round = -10; round < ROUNDS; round++)
  for (const [name, envelope] of Object.entries(cases)) {
    const before = roundTrips;
    const started = performance.now();
    await Promise.all(Array.from({ length: BATCH }, () => walk.run(envelope(), { destination })));
    if (round < 0) continue; // warm-up
    times[name] = [...(times[name] ?? []), performance.now() - started];
    trips[name] = (trips[name] ?? 0) + roundTrips - before;
  }
const at = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
console.log(`load ${loadavg()}; ${ROUNDS} batches of ${BATCH}, ${algorithm}`);
for (const name of Object.keys(cases)) {
  const sorted = (times[name] ?? []).sort((a, b) => a - b);
  console.log(
    `${name.padEnd(22)} round trips/batch ${((trips[name] ?? 0) / ROUNDS).toFixed(2)}  median ${at(sorted, 0.5).toFixed(2)} ms  p90 ${at(sorted, 0.9).toFixed(2)} ms`,
  );
}
const keys = await redis.keys(`${prefix}*`);
if (keys.length > 0) await redis.del(...keys);
redis.disconnect();

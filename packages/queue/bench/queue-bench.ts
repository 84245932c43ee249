/**
 * Fair queue benchmarks (issue 3). Every comparison runs side by side in one invocation and is
 * reported as a ratio; the figures go into the "Queue" section of docs/benchmarks/queue.md.
 *
 *   pnpm exec node packages/queue/bench/queue-bench.ts            full sizes (a few minutes)
 *   pnpm exec node packages/queue/bench/queue-bench.ts --quick    small sizes (seconds)
 *   options: --url redis://host:port   use that Redis instead of a private one
 *            --no-write                print only
 *
 * By default the benchmark starts its own redis-server (no persistence) on a free port so that its
 * throughput and INFO memory deltas are not disturbed by other users of the shared Redis, and stops
 * it at the end. Every key written is removed afterwards either way.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { median, type PrivateRedis, parseBenchArgs, startPrivateRedis } from '@requester/shared/testing';
import { Queue, Worker } from 'bullmq';
import { FairQueue, type PublishTask, QueueAdmin } from '../src/index.ts';

const { values: args } = parseBenchArgs({
  usage: `Fair queue benchmarks (issue 3). Every comparison runs side by side in one invocation and is
reported as a ratio; the figures go into the "Queue" section of docs/benchmarks/queue.md.

  pnpm exec node packages/queue/bench/queue-bench.ts            full sizes (a few minutes)
  pnpm exec node packages/queue/bench/queue-bench.ts --quick    small sizes (seconds)

By default it starts its own redis-server (no persistence) on a free port, and stops it at the
end. Every key written is removed afterwards either way.

As run for BENCHMARKS.md (docs/benchmarks/queue.md):
  pnpm exec node packages/queue/bench/queue-bench.ts --quick`,
  options: {
    quick: { type: 'boolean', default: false, help: 'small sizes (seconds)' },
    url: { type: 'string', value: 'redis://host:port', help: 'use that Redis instead of a private one' },
    'no-write': { type: 'boolean', default: false, help: 'print only (docs/benchmarks/queue.md untouched)' },
  },
});
const quick = args.quick;
const write = !args['no-write'];
const urlArg = args.url;

const SIZES = quick
  ? {
      fewTasks: 20_000,
      manyPartitions: 100_000,
      drain: 20_000,
      hot: 50_000,
      cold: 1_000,
      bull: 12_000,
      dedup: 50_000,
    }
  : {
      fewTasks: 200_000,
      manyPartitions: 1_000_000,
      drain: 200_000,
      hot: 50_000,
      cold: 1_000,
      bull: 60_000,
      dedup: 200_000,
    };
/** Side-by-side measurements alternate in this many rounds; the median of each side is reported. */
const ROUNDS = 5;
const LEASE_K = 100;
const LEASE_MS = 60_000;
const WORKER_LOOPS = 4;
const BULL_CONCURRENCY = 100;
const PUBLISH_CHUNK = 5_000;

/** A small offset-ref payload, as the router publishes. */
const payloadOf = (i: number) => JSON.stringify({ t: 'in', p: i % 12, o: String(1_000_000 + i) });

const log = (...parts: unknown[]) => console.error(new Date().toISOString().slice(11, 19), ...parts);

// ------------------------------------------------------------------------------------------------
// Redis: private instance unless --url

type RedisTarget = Pick<PrivateRedis, 'url' | 'stop'>;

async function usedMemory(redis: RedisClient): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

async function redisVersion(redis: RedisClient): Promise<string> {
  const info = await redis.info('server');
  return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
}

// ------------------------------------------------------------------------------------------------
// helpers

function newQueue(
  redis: RedisClient,
  prefix: string,
  extra: Partial<ConstructorParameters<typeof FairQueue>[0]> = {},
) {
  return new FairQueue({ redis, prefix, notify: false, refreshMs: 1000, ...extra });
}

async function publishAll(
  queue: FairQueue,
  count: number,
  taskAt: (i: number) => PublishTask,
): Promise<number> {
  const started = performance.now();
  const inFlight: Promise<unknown>[] = [];
  for (let at = 0; at < count; at += PUBLISH_CHUNK) {
    const chunk: PublishTask[] = [];
    for (let i = at; i < Math.min(count, at + PUBLISH_CHUNK); i++) chunk.push(taskAt(i));
    inFlight.push(queue.publish(chunk));
    if (inFlight.length >= 4) await inFlight.shift();
  }
  await Promise.all(inFlight);
  return count / ((performance.now() - started) / 1000);
}

/** WORKER_LOOPS loops of lease(k) → ackMany until `target` tasks were processed; tasks/s. */
async function drain(redis: RedisClient, prefix: string, target: number): Promise<number> {
  let done = 0;
  const started = performance.now();
  const loop = async () => {
    const queue = newQueue(redis, prefix);
    while (done < target) {
      const { tasks, nextWakeMs } = await queue.lease(Math.min(LEASE_K, target - done), LEASE_MS);
      if (tasks.length === 0) {
        if (nextWakeMs > 0) await new Promise((r) => setTimeout(r, Math.min(nextWakeMs, 5)));
        continue;
      }
      done += tasks.length;
      await queue.ackMany(tasks.map((t) => t.token));
    }
  };
  await Promise.all(Array.from({ length: WORKER_LOOPS }, loop));
  return done / ((performance.now() - started) / 1000);
}

async function purge(redis: RedisClient, prefix: string): Promise<void> {
  await new QueueAdmin(newQueue(redis, prefix)).destroy();
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

// ------------------------------------------------------------------------------------------------
// benchmarks

async function throughputAndMemory(redis: RedisClient) {
  const few = `bench:${randomBytes(4).toString('hex')}:few:`;
  const many = `bench:${randomBytes(4).toString('hex')}:many:`;
  try {
    log(`fill: ${fmt(SIZES.fewTasks)} tasks over 100 partitions`);
    const m0 = await usedMemory(redis);
    const fewPublishRate = await publishAll(newQueue(redis, few), SIZES.fewTasks, (i) => ({
      id: `req-${i}:0`,
      partition: `tenant-${i % 100}`,
      payload: payloadOf(i),
    }));
    const m1 = await usedMemory(redis);
    log(`fill: ${fmt(SIZES.manyPartitions)} tasks, one per partition`);
    const manyPublishRate = await publishAll(newQueue(redis, many), SIZES.manyPartitions, (i) => ({
      id: `req-${i}:0`,
      partition: `tenant-${i}`,
      payload: payloadOf(i),
    }));
    const m2 = await usedMemory(redis);

    // Alternate the two sides so that a busy neighbour on the machine hits both alike.
    const perRound = Math.floor(SIZES.drain / ROUNDS);
    const fewRates: number[] = [];
    const manyRates: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      fewRates.push(await drain(redis, few, perRound));
      manyRates.push(await drain(redis, many, perRound));
      log(
        `drain round ${round + 1}: few ${fmt(fewRates.at(-1) ?? 0)}/s, many ${fmt(manyRates.at(-1) ?? 0)}/s`,
      );
    }
    return {
      fewPublishRate,
      manyPublishRate,
      fewRate: median(fewRates),
      manyRate: median(manyRates),
      fewRates,
      manyRates,
      bytesPerTaskFew: (m1 - m0) / SIZES.fewTasks,
      bytesPerTaskMany: (m2 - m1) / SIZES.manyPartitions,
    };
  } finally {
    await purge(redis, few);
    await purge(redis, many);
  }
}

/**
 * The post-ack dedup window: bytes per remembered id, as implemented (ack adds the id to one ZSET per
 * shard, trimmed on write) and as the alternative (one key per id with PX), written directly.
 */
async function dedupMemory(redis: RedisClient) {
  const prefix = `bench:${randomBytes(4).toString('hex')}:dedup:`;
  const n = SIZES.dedup;
  const zsetKey = (i: number) => `${prefix}{q:${i % 128}}:done`;
  const idKey = (i: number) => `${prefix}{q:${i % 128}}:done:req-${i}:0`;
  const inBatches = async (write: (pipeline: ReturnType<RedisClient['pipeline']>, i: number) => void) => {
    for (let at = 0; at < n; at += 5_000) {
      const pipeline = redis.pipeline();
      for (let i = at; i < Math.min(n, at + 5_000); i++) write(pipeline, i);
      await pipeline.exec();
    }
  };
  try {
    const now = Date.now();
    const m0 = await usedMemory(redis);
    await inBatches((p, i) => p.zadd(zsetKey(i), now + i, `req-${i}:0`));
    const m1 = await usedMemory(redis);
    await inBatches((p, i) => p.set(idKey(i), '1', 'PX', 86_400_000));
    const m2 = await usedMemory(redis);
    return { n, zsetPerId: (m1 - m0) / n, keyPerId: (m2 - m1) / n };
  } finally {
    await inBatches((p, i) => p.unlink(idKey(i)));
    const pipeline = redis.pipeline();
    for (let shard = 0; shard < 128; shard++) pipeline.unlink(zsetKey(shard));
    await pipeline.exec();
  }
}

async function fairness(redis: RedisClient, k: number) {
  const prefix = `bench:${randomBytes(4).toString('hex')}:fair:`;
  try {
    const queue = newQueue(redis, prefix);
    await publishAll(queue, SIZES.hot, (i) => ({ id: `hot-${i}`, partition: 'hot', payload: payloadOf(i) }));
    await publishAll(queue, SIZES.cold, (i) => ({
      id: `cold-${i}`,
      partition: `cold-${i}`,
      payload: payloadOf(i),
    }));
    const worker = newQueue(redis, prefix);
    let hot = 0;
    let cold = 0;
    while (cold < SIZES.cold) {
      const { tasks } = await worker.lease(k, LEASE_MS);
      if (tasks.length === 0)
        throw new Error('fairness: queue ran dry before every cold partition was leased');
      for (const task of tasks) {
        if (task.partition === 'hot') hot++;
        else cold++;
      }
      await worker.ackMany(tasks.map((t) => t.token));
    }
    return { k, hot, share: hot / SIZES.hot };
  } finally {
    await purge(redis, prefix);
  }
}

async function runBullmq(url: string, n: number) {
  const name = `bench-${randomBytes(4).toString('hex')}`;
  const u = new URL(url);
  const connection = { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
  const probe = createRedis({ url });
  const bullQueue = new Queue(name, { connection });
  try {
    const before = await usedMemory(probe);
    for (let at = 0; at < n; at += 1_000) {
      await bullQueue.addBulk(
        Array.from({ length: Math.min(1_000, n - at) }, (_, j) => ({
          name: 'task',
          data: payloadOf(at + j),
          opts: { removeOnComplete: true, removeOnFail: true },
        })),
      );
    }
    const bytesPerJob = ((await usedMemory(probe)) - before) / n;
    let completed = 0;
    let rate = 0;
    const started = performance.now();
    await new Promise<void>((resolve, reject) => {
      const worker = new Worker(name, async () => {}, { connection, concurrency: BULL_CONCURRENCY });
      worker.on('completed', () => {
        if (++completed === n) {
          rate = n / ((performance.now() - started) / 1000);
          worker.close().then(resolve, reject);
        }
      });
      worker.on('error', reject);
    });
    return { rate, bytesPerJob };
  } finally {
    await bullQueue.obliterate({ force: true });
    await bullQueue.close();
    probe.disconnect();
  }
}

async function runOurs(redis: RedisClient, n: number) {
  const prefix = `bench:${randomBytes(4).toString('hex')}:vs:`;
  try {
    const queue = newQueue(redis, prefix);
    await publishAll(queue, n, (i) => ({
      id: `req-${i}:0`,
      partition: `tenant-${i % 1000}`,
      payload: payloadOf(i),
    }));
    let done = 0;
    const started = performance.now();
    while (done < n) {
      const { tasks } = await queue.lease(BULL_CONCURRENCY, LEASE_MS);
      if (tasks.length === 0) throw new Error('versus: queue ran dry');
      await Promise.all(tasks.map(async () => {})); // the same no-op "processor"
      await queue.ackMany(tasks.map((t) => t.token));
      done += tasks.length;
    }
    return n / ((performance.now() - started) / 1000);
  } finally {
    await purge(redis, prefix);
  }
}

/** BullMQ and the fair queue take turns, ROUNDS rounds of n / ROUNDS jobs each. */
async function versusBullmq(redis: RedisClient, url: string) {
  const perRound = Math.floor(SIZES.bull / ROUNDS);
  const bullRates: number[] = [];
  const oursRates: number[] = [];
  let bytesPerJob = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const bull = await runBullmq(url, perRound);
    bullRates.push(bull.rate);
    bytesPerJob = bull.bytesPerJob;
    oursRates.push(await runOurs(redis, perRound));
    log(
      `versus round ${round + 1}: bullmq ${fmt(bullRates.at(-1) ?? 0)}/s, fair queue ${fmt(oursRates.at(-1) ?? 0)}/s`,
    );
  }
  return {
    n: perRound * ROUNDS,
    perRound,
    bullRate: median(bullRates),
    oursRate: median(oursRates),
    bullRates,
    oursRates,
    bytesPerJob,
  };
}

// ------------------------------------------------------------------------------------------------

async function main() {
  const target: RedisTarget = urlArg ? { url: urlArg, stop: async () => {} } : await startPrivateRedis();
  const redis = createRedis({ url: target.url, commandTimeoutMs: 60_000 });
  try {
    const machine = {
      nproc: os.availableParallelism(),
      cpu: os.cpus()[0]?.model ?? 'unknown',
      node: process.version,
      redis: await redisVersion(redis),
      memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    };
    log('machine', machine);
    const tp = await throughputAndMemory(redis);
    log('throughput', tp);
    const fair = [await fairness(redis, 10), await fairness(redis, LEASE_K)];
    log('fairness', fair);
    const vs = await versusBullmq(redis, target.url);
    log('versus bullmq', vs);
    const dedup = await dedupMemory(redis);
    log('dedup memory', dedup);

    const command = `pnpm exec node packages/queue/bench/queue-bench.ts${quick ? ' --quick' : ''}${urlArg ? ` --url ${urlArg}` : ''}`;
    const section = render({ machine, tp, fair, vs, dedup, command, privateRedis: !urlArg });
    console.log(section);
    if (write) writeSection(section);
  } finally {
    redis.disconnect();
    await target.stop();
  }
}

interface Results {
  machine: { nproc: number; cpu: string; node: string; redis: string; memory: string };
  tp: Awaited<ReturnType<typeof throughputAndMemory>>;
  fair: Array<Awaited<ReturnType<typeof fairness>>>;
  vs: Awaited<ReturnType<typeof versusBullmq>>;
  dedup: Awaited<ReturnType<typeof dedupMemory>>;
  command: string;
  privateRedis: boolean;
}

function render({ machine, tp, fair, vs, dedup, command, privateRedis }: Results): string {
  const pct = (x: number) => `${fmt(x * 100, 2)} %`;
  const rates = (xs: number[]) => xs.map((x) => fmt(x)).join(' / ');
  const date = new Date().toISOString().slice(0, 10);
  return `## Queue

Redis fair queue (\`packages/queue\`, issue 3). Recorded ${date}${quick ? ' with **--quick** sizes' : ''}.

- Command: \`${command}\`
- Machine: ${machine.nproc} CPUs (\`nproc\`), ${machine.cpu}, ${machine.memory}; Node ${machine.node}; Redis ${machine.redis}
  (${privateRedis ? 'a private redis-server started by the benchmark, no persistence, same machine' : 'the given Redis'}).
  The machine is shared with other work, so each comparison alternates its two sides over ${ROUNDS} rounds
  and reports the medians.
- Queue: 128 shards, lease ${LEASE_K} tasks per call, settle with one \`ackMany\` per lease; payload a
  ~${payloadOf(123456).length}-byte offset-ref JSON, ids like \`req-123456:0\`.

### Throughput: lease + ack, 100 partitions vs ${fmt(SIZES.manyPartitions)} partitions

${WORKER_LOOPS} worker loops in one process, each \`lease(${LEASE_K})\` → \`ackMany\`; ${fmt(SIZES.drain)} tasks drained from each queue.

| queue | tasks queued | lease+ack tasks/s (median) | rounds | publish tasks/s |
|---|---:|---:|---|---:|
| 100 partitions | ${fmt(SIZES.fewTasks)} | ${fmt(tp.fewRate)} | ${rates(tp.fewRates)} | ${fmt(tp.fewPublishRate)} |
| ${fmt(SIZES.manyPartitions)} partitions (1 task each) | ${fmt(SIZES.manyPartitions)} | ${fmt(tp.manyRate)} | ${rates(tp.manyRates)} | ${fmt(tp.manyPublishRate)} |
| **ratio** many / few | | **${fmt(tp.manyRate / tp.fewRate, 2)}** (target ≥ 0.80) | | ${fmt(tp.manyPublishRate / tp.fewPublishRate, 2)} |

### Fairness: one partition with ${fmt(SIZES.hot)} tasks, then ${fmt(SIZES.cold)} partitions with one task each

Published in that order; one worker leases and acks until the last of the ${fmt(SIZES.cold)} was leased.

| lease k | hot tasks consumed by then | share of the hot backlog |
|---:|---:|---:|
${fair.map((f) => `| ${f.k} | ${fmt(f.hot)} | **${pct(f.share)}** (target < 5 %) |`).join('\n')}

### Against BullMQ ${bullmqVersion()} on the same Redis

${fmt(vs.n)} jobs/tasks in ${ROUNDS} alternating rounds of ${fmt(vs.perRound)} (prefilled before each round), same
payload, at most ${BULL_CONCURRENCY} in flight: BullMQ \`Worker\` with \`concurrency: ${BULL_CONCURRENCY}\`, no-op
processor, \`removeOnComplete\`; the fair queue with one loop of \`lease(${BULL_CONCURRENCY})\` → no-op → \`ackMany\`
(tasks over 1,000 partitions).

| | processed/s (median) | rounds |
|---|---:|---|
| BullMQ | ${fmt(vs.bullRate)} | ${rates(vs.bullRates)} |
| fair queue | ${fmt(vs.oursRate)} | ${rates(vs.oursRates)} |
| **ratio** fair queue / BullMQ | **${fmt(vs.oursRate / vs.bullRate, 2)}** (target ≥ 1.5) | |

### Redis memory

\`INFO memory\` \`used_memory\` deltas divided by the count:

| what | bytes |
|---|---:|
| per queued task, ${fmt(SIZES.manyPartitions)} tasks one per partition (record + pending entry + ready-partition entry) | **${fmt(tp.bytesPerTaskMany)}** |
| per queued task, ${fmt(SIZES.fewTasks)} tasks over 100 partitions | ${fmt(tp.bytesPerTaskFew)} |
| per waiting BullMQ job, same payload (for comparison) | ${fmt(vs.bytesPerJob)} |
| per acked id in the dedup window: per-shard ZSET (implemented) | ${fmt(dedup.zsetPerId)} |
| per acked id in the dedup window: a key per id with PX (alternative) | ${fmt(dedup.keyPerId)} |

The dedup window costs about ${fmt(dedup.zsetPerId)} bytes × acks per window: at 24 h and 100 tasks/s that would be
${fmt((dedup.zsetPerId * 100 * 86_400) / 2 ** 20)} MiB. Requester's default \`QUEUE_DEDUP_WINDOW\` is therefore 1 h (≈ ${fmt((dedup.zsetPerId * 100 * 3_600) / 2 ** 20)} MiB at 100 tasks/s): replays
of \`in\` happen within minutes of a router crash.
`;
}

function bullmqVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(process.cwd(), 'node_modules/bullmq/package.json'), 'utf8'));
    return String(pkg.version);
  } catch {
    return '5';
  }
}

/** Replaces (or appends) the "## Queue" section of docs/benchmarks/queue.md. */
function writeSection(section: string): void {
  const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
  const file = join(root, 'docs/benchmarks/queue.md');
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {}
  if (!text.trim()) text = '# Benchmarks: Queue\n';
  const start = text.search(/^## Queue\s*$/m);
  if (start < 0) {
    text = `${text.trimEnd()}\n\n${section}`;
  } else {
    const rest = text.slice(start + 1);
    const next = rest.search(/^## /m);
    const end = next < 0 ? text.length : start + 1 + next;
    text = `${text.slice(0, start)}${section}${next < 0 ? '' : `\n${text.slice(end)}`}`;
  }
  writeFileSync(file, text.endsWith('\n') ? text : `${text}\n`);
  log(`wrote the Queue section of ${file}`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

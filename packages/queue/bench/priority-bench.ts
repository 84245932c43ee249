/**
 * Priority inside a client's share (issue 45): how soon a client's high-priority task starts behind
 * its own low-priority backlog, and what priority costs the lease throughput of a queue that does
 * not use it, against a baseline revision (by default the merge-base with `main`). Run with
 * `--help` for the options.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { median, type PrivateRedis, parseBenchArgs, startPrivateRedis } from '@requester/shared/testing';
import * as current from '../src/index.ts';

const { values: args } = parseBenchArgs({
  usage: `Priority inside a client's share (issue 45), on a private redis-server (or --url):
  1. a client's high-priority task (priority 10) published behind 10,000 of its own low-priority
     tasks (-10, one partition each) while 4 worker loops lease(100) and ack: its wait from
     publish to lease, p50 over the rounds (target: 100 ms);
  2. lease+ack throughput of a queue without priorities, this revision against a baseline
     (target: >= 0.95 of it), and this revision with every task prioritized.

  pnpm exec node packages/queue/bench/priority-bench.ts
  pnpm exec node packages/queue/bench/priority-bench.ts --quick`,
  options: {
    quick: { type: 'boolean', default: false, help: 'fewer rounds, smaller drains (seconds)' },
    'throughput-only': { type: 'boolean', default: false, help: 'skip the wait rounds (part 1)' },
    rounds: { type: 'string', value: '<n>', help: 'throughput rounds, alternating the sides (default 5)' },
    baseline: {
      type: 'string',
      value: '<ref>',
      help: 'the revision to compare the throughput with (default: merge-base HEAD main)',
    },
    url: { type: 'string', value: 'redis://...', help: 'use that Redis instead of a private redis-server' },
  },
});

const quick = args.quick;
const BACKLOG = 10_000;
const LATENCY_ROUNDS = quick ? 5 : 21;
const DRAIN = quick ? 20_000 : 100_000;
const THROUGHPUT_ROUNDS = Number(args.rounds ?? 5);
const LEASE_K = 100;
const LEASE_MS = 60_000;
const WORKER_LOOPS = 4;
const PUBLISH_CHUNK = 5_000;

type QueueModule = typeof current;
type Queue = InstanceType<QueueModule['FairQueue']>;

const log = (...parts: unknown[]) => console.error(new Date().toISOString().slice(11, 19), ...parts);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const git = (...argv: string[]) => execFileSync('git', argv, { encoding: 'utf8' }).trim();
const payloadOf = (i: number) => JSON.stringify({ t: 'in', p: i % 12, o: String(1_000_000 + i) });

/** The baseline's queue module, extracted from git once per revision (as fair-share-bench.ts). */
async function loadBaseline(ref: string): Promise<{ module: QueueModule; commit: string }> {
  const commit = git('rev-parse', '--short', ref);
  const root = git('rev-parse', '--show-toplevel');
  const dir = join(root, 'packages/queue/bench/.baseline', commit);
  if (!existsSync(join(dir, 'packages/queue/src/index.ts'))) {
    mkdirSync(dir, { recursive: true });
    const archive = execFileSync('git', ['archive', commit, 'packages/queue/src'], { maxBuffer: 1 << 28 });
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
  }
  const module = (await import(pathToFileURL(join(dir, 'packages/queue/src/index.ts')).href)) as QueueModule;
  return { module, commit };
}

function newQueue(module: QueueModule, redis: RedisClient, prefix: string): Queue {
  return new module.FairQueue({ redis, prefix, notify: true, refreshMs: 1000 });
}

async function publishAll(queue: Queue, count: number, taskAt: (i: number) => current.PublishTask) {
  const inFlight: Promise<unknown>[] = [];
  for (let at = 0; at < count; at += PUBLISH_CHUNK) {
    const chunk: current.PublishTask[] = [];
    for (let i = at; i < Math.min(count, at + PUBLISH_CHUNK); i++) chunk.push(taskAt(i));
    inFlight.push(queue.publish(chunk));
    if (inFlight.length >= 4) await inFlight.shift();
  }
  await Promise.all(inFlight);
}

async function destroy(module: QueueModule, redis: RedisClient, prefix: string): Promise<void> {
  const queue = newQueue(module, redis, prefix);
  await new module.QueueAdmin(queue).destroy();
  await queue.close();
}

/**
 * One round: client A's backlog of low-priority tasks, WORKER_LOOPS loops leasing it (under way:
 * a few leases each first), then A's high-priority task; ms from its publish to its lease.
 */
async function highWait(redis: RedisClient, priority: number): Promise<number> {
  const prefix = `bench:${randomBytes(4).toString('hex')}:prio:`;
  const queue = newQueue(current, redis, prefix);
  try {
    await publishAll(queue, BACKLOG, (i) => ({ id: `a-${i}:0 @A`, payload: payloadOf(i), priority: -10 }));
    let leased = 0;
    let publishedAt: number | undefined;
    let waitMs: number | undefined;
    let publishing: Promise<unknown> | undefined;
    const loop = async () => {
      const worker = newQueue(current, redis, prefix);
      while (waitMs === undefined) {
        const { tasks } = await worker.lease(LEASE_K, LEASE_MS);
        if (tasks.some((t) => t.id === 'high:0 @A') && publishedAt !== undefined) {
          waitMs = performance.now() - publishedAt;
        }
        leased += tasks.length;
        if (tasks.length > 0) await worker.ackMany(tasks.map((t) => t.token));
        else await new Promise((r) => setTimeout(r, 1));
        if (!publishing && leased >= 2 * WORKER_LOOPS * LEASE_K) {
          publishedAt = performance.now();
          publishing = queue.publish([{ id: 'high:0 @A', payload: 'high', priority }]);
        }
      }
      await worker.close();
    };
    await Promise.all(Array.from({ length: WORKER_LOOPS }, loop));
    return waitMs ?? Number.NaN;
  } finally {
    await queue.close();
    await destroy(current, redis, prefix);
  }
}

/** WORKER_LOOPS loops of lease(k) → ackMany until `target` tasks; tasks/s. */
async function drain(
  module: QueueModule,
  redis: RedisClient,
  prefix: string,
  target: number,
): Promise<number> {
  let done = 0;
  const started = performance.now();
  const loop = async () => {
    const queue = newQueue(module, redis, prefix);
    while (done < target) {
      const { tasks, nextWakeMs } = await queue.lease(Math.min(LEASE_K, target - done), LEASE_MS);
      if (tasks.length === 0) {
        if (nextWakeMs > 0) await new Promise((r) => setTimeout(r, Math.min(nextWakeMs, 5)));
        continue;
      }
      done += tasks.length;
      await queue.ackMany(tasks.map((t) => t.token));
    }
    await queue.close();
  };
  await Promise.all(Array.from({ length: WORKER_LOOPS }, loop));
  return done / ((performance.now() - started) / 1000);
}

interface Side {
  name: string;
  module: QueueModule;
  redis: RedisClient;
  /** The priority of every task published (undefined: none given). */
  priority?: (i: number) => number;
}

/** Lease+ack throughput of 1,000 clients (a partition per task), the sides alternating rounds. */
async function throughput(sides: Side[]): Promise<number[][]> {
  const prefixes = sides.map(() => `bench:${randomBytes(4).toString('hex')}:tp:`);
  try {
    const filled = DRAIN + THROUGHPUT_ROUNDS * WORKER_LOOPS * LEASE_K;
    for (const [s, side] of sides.entries()) {
      const queue = newQueue(side.module, side.redis, prefixes[s] as string);
      await publishAll(queue, filled, (i) => ({
        id: `req-${i}:0 @c${i % 1000}`,
        payload: payloadOf(i),
        ...(side.priority ? { priority: side.priority(i) } : {}),
      }));
      await queue.close();
    }
    const rates: number[][] = sides.map(() => []);
    const perRound = Math.floor(DRAIN / THROUGHPUT_ROUNDS);
    for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
      for (const [s, side] of sides.entries()) {
        rates[s]?.push(await drain(side.module, side.redis, prefixes[s] as string, perRound));
      }
      log(
        `throughput round ${round + 1}:`,
        sides.map((side, s) => `${side.name} ${fmt(rates[s]?.at(-1) ?? 0)}`).join(' | '),
      );
    }
    return rates;
  } finally {
    for (const [s, side] of sides.entries()) await destroy(side.module, side.redis, prefixes[s] as string);
  }
}

async function main() {
  const ref = args.baseline ?? git('merge-base', 'HEAD', 'main');
  const baseline = await loadBaseline(ref);
  const head = git('rev-parse', '--short', 'HEAD');
  const target: Pick<PrivateRedis, 'url' | 'stop'> = args.url
    ? { url: args.url, stop: async () => {} }
    : await startPrivateRedis();
  const connect = () => createRedis({ url: target.url, commandTimeoutMs: 120_000 });
  const redis = connect();
  try {
    log('machine', {
      nproc: os.availableParallelism(),
      cpu: os.cpus()[0]?.model ?? 'unknown',
      node: process.version,
      load: os.loadavg()[0]?.toFixed(1),
    });
    const waits: Record<string, number[]> = { 'priority 10': [], 'priority 0': [] };
    for (let round = 0; round < (args['throughput-only'] ? 0 : LATENCY_ROUNDS); round++) {
      for (const [name, priority] of [
        ['priority 10', 10],
        ['priority 0', 0],
      ] as const) {
        waits[name]?.push(await highWait(redis, priority));
      }
      log(
        `latency round ${round + 1}:`,
        Object.entries(waits)
          .map(([n, w]) => `${n} ${fmt(w.at(-1) ?? 0, 1)} ms`)
          .join(' | '),
      );
    }
    const sides: Side[] = [
      { name: `baseline (${baseline.commit})`, module: baseline.module, redis: connect() },
      { name: `priority (${head})`, module: current, redis: connect() },
      {
        name: `priority (${head}), every task prioritized`,
        module: current,
        redis: connect(),
        priority: (i) => (i % 21) - 10,
      },
    ];
    const rates = await throughput(sides);
    for (const side of sides) side.redis.disconnect();
    const medians = rates.map(median);
    const lines = [
      `Priority bench (${new Date().toISOString().slice(0, 10)}, ${head}, ${os.availableParallelism()} CPUs, load ${os.loadavg()[0]?.toFixed(1)})`,
      `A high-priority task behind ${fmt(BACKLOG)} low-priority tasks of its client, ${WORKER_LOOPS} loops of lease(${LEASE_K}), ${LATENCY_ROUNDS} rounds:`,
      ...Object.entries(waits)
        .filter(([, w]) => w.length > 0)
        .map(([name, w]) => `  ${name}: p50 ${fmt(median(w), 1)} ms, max ${fmt(Math.max(...w), 1)} ms`),
      `Lease+ack throughput, 1,000 clients, median of ${THROUGHPUT_ROUNDS} rounds (tasks/s):`,
      ...sides.map(
        (side, s) =>
          `  ${side.name}: ${fmt(medians[s] ?? 0)} (${fmt((medians[s] ?? 0) / (medians[0] ?? 1), 2)} of the baseline)`,
      ),
    ];
    console.log(lines.join('\n'));
  } finally {
    redis.disconnect();
    await target.stop();
  }
}

await main();

/**
 * Fair share between clients (issue 21): this queue against a baseline revision of it (by default
 * the merge-base with `main`: the queue before fair share), side by side in one run, each on its
 * own Redis connection (both define their scripts under the same command names). Figures go into
 * the "Queue: fair share between clients" section of docs/benchmarks/fair-share.md.
 *
 *   pnpm exec node packages/queue/bench/fair-share-bench.ts            10k/100k backlogs
 *   pnpm exec node packages/queue/bench/fair-share-bench.ts --quick    small sizes (seconds)
 *   options: --million           B's wait at a 1,000,000 backlog too (minutes, ~1 GiB of Redis)
 *            --baseline <ref>    the revision to compare with (default: merge-base HEAD main)
 *            --url redis://...   use that Redis instead of a private one
 *            --no-write          print only
 *
 * The baseline's `packages/queue/src` is extracted with `git archive` under
 * `packages/queue/bench/.baseline/` (git-ignored), where it resolves `@requester/shared` as the
 * package does.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { median, type PrivateRedis, parseBenchArgs, startPrivateRedis } from '@requester/shared/testing';
import * as current from '../src/index.ts';

const { values: args } = parseBenchArgs({
  usage: `Fair share between clients (issue 21): this queue against a baseline revision of it, side by
side in one run, each on its own Redis connection. Figures go into the "Queue: fair share between
clients" section of docs/benchmarks/fair-share.md.

  pnpm exec node packages/queue/bench/fair-share-bench.ts            10k/100k backlogs
  pnpm exec node packages/queue/bench/fair-share-bench.ts --quick    small sizes (seconds)

The baseline's packages/queue/src is extracted with git archive under packages/queue/bench/.baseline/.

As run for BENCHMARKS.md (docs/benchmarks/fair-share.md):
  ./node_modules/.bin/node packages/queue/bench/fair-share-bench.ts --baseline 4afd591 --no-write`,
  options: {
    quick: { type: 'boolean', default: false, help: 'small sizes (seconds)' },
    million: {
      type: 'boolean',
      default: false,
      help: "B's wait at a 1,000,000 backlog too (minutes, ~1 GiB of Redis)",
    },
    baseline: {
      type: 'string',
      value: '<ref>',
      help: 'the revision to compare with (default: merge-base HEAD main: the queue before fair share)',
    },
    url: { type: 'string', value: 'redis://...', help: 'use that Redis instead of a private redis-server' },
    'no-write': { type: 'boolean', default: false, help: 'print only (docs/benchmarks untouched)' },
  },
});
const quick = args.quick;
const million = args.million;
const write = !args['no-write'];
const option = (name: 'baseline' | 'url') => args[name];
const urlArg = option('url');

const DRAIN = quick ? 20_000 : 200_000;
const BACKLOGS = quick ? [10_000] : million ? [10_000, 100_000, 1_000_000] : [10_000, 100_000];
const ROUNDS = 5;
const LEASE_K = 100;
const LEASE_MS = 60_000;
const WORKER_LOOPS = 4;
const PUBLISH_CHUNK = 5_000;
const B_TASKS = 10;

type QueueModule = typeof current;
type Queue = InstanceType<QueueModule['FairQueue']>;
interface Side {
  name: string;
  module: QueueModule;
  redis: RedisClient;
}

const payloadOf = (i: number) => JSON.stringify({ t: 'in', p: i % 12, o: String(1_000_000 + i) });
const log = (...parts: unknown[]) => console.error(new Date().toISOString().slice(11, 19), ...parts);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const git = (...argv: string[]) => execFileSync('git', argv, { encoding: 'utf8' }).trim();

/** The baseline's queue module, extracted from git once per revision. */
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

/** used_memory once the background frees of earlier UNLINKs are over (they would skew a delta). */
async function usedMemory(redis: RedisClient): Promise<number> {
  for (;;) {
    const info = await redis.info('memory');
    if (Number(/lazyfree_pending_objects:(\d+)/.exec(info)?.[1] ?? 0) === 0) {
      return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

function newQueue(side: Side, prefix: string): Queue {
  // notify: as deployed (a publish announces work, and, with fair share, a client's arrival)
  return new side.module.FairQueue({ redis: side.redis, prefix, notify: true, refreshMs: 1000 });
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

/** Tasks of `clients` clients, one partition each (as requests without meta.partition). */
const taskOf = (clients: number, tag: string) => (i: number) => ({
  id: `${tag}-${i}:0 @c${i % clients}`,
  payload: payloadOf(i),
});

/** WORKER_LOOPS loops of lease(k) → ackMany until `target` tasks; tasks/s. */
async function drain(side: Side, prefix: string, target: number): Promise<number> {
  let done = 0;
  const started = performance.now();
  const loop = async () => {
    const queue = newQueue(side, prefix);
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

async function destroy(side: Side, prefix: string): Promise<void> {
  const queue = newQueue(side, prefix);
  await new side.module.QueueAdmin(queue).destroy();
  await queue.close();
}

/** Redis CPU (user + sys) in µs so far: `INFO cpu` of the server both sides share. */
async function redisCpuUs(redis: RedisClient): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/** Lease+ack throughput with `clients` clients, both sides alternating; memory per queued task. */
async function throughput(sides: Side[], clients: number) {
  const prefixes = sides.map(() => `bench:${randomBytes(4).toString('hex')}:share:`);
  try {
    const bytesPerTask: number[] = [];
    for (const [s, side] of sides.entries()) {
      const before = await usedMemory(side.redis);
      // Concurrent loops may take a few tasks past a round's count: a margin keeps the last round fed.
      const filled = DRAIN + ROUNDS * WORKER_LOOPS * LEASE_K;
      await publishAll(newQueue(side, prefixes[s] as string), filled, taskOf(clients, 'req'));
      bytesPerTask.push(((await usedMemory(side.redis)) - before) / filled);
    }
    const rates: number[][] = sides.map(() => []);
    // Redis CPU per leased task (lease + ack), µs: the rounds run one at a time on a private Redis.
    const cpu: number[][] = sides.map(() => []);
    const perRound = Math.floor(DRAIN / ROUNDS);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [s, side] of sides.entries()) {
        const cpuBefore = await redisCpuUs(side.redis);
        rates[s]?.push(await drain(side, prefixes[s] as string, perRound));
        cpu[s]?.push(((await redisCpuUs(side.redis)) - cpuBefore) / perRound);
      }
      log(
        `${clients} client(s), round ${round + 1}:`,
        rates.map((r) => fmt(r.at(-1) ?? 0)).join(' / '),
        '| Redis CPU µs/task:',
        cpu.map((c) => fmt(c.at(-1) ?? 0, 1)).join(' / '),
      );
    }
    return { clients, rates, medians: rates.map(median), cpuMedians: cpu.map(median), bytesPerTask };
  } finally {
    for (const [s, side] of sides.entries()) await destroy(side, prefixes[s] as string);
  }
}

/** A cap far above what 4 loops of lease(100) can hold in flight: it never binds, so only its cost shows. */
const NEVER_BINDING_CAP = 1_000_000;
/** Capped leases are several times slower: a quarter of the drain keeps the run in minutes. */
const CAP_DRAIN = DRAIN / 4;

/**
 * The cost of a per-client cap: lease+ack throughput of `clients` clients all capped (a cap that
 * never binds: every lease takes cap slots in each client's slot, every ack gives them back)
 * against the same clients uncapped, this queue on both sides, alternating rounds.
 */
async function capCost(side: Side, clients: number) {
  const prefixes = ['uncapped', 'capped'].map((tag) => `bench:${randomBytes(4).toString('hex')}:${tag}:`);
  try {
    const filled = CAP_DRAIN + ROUNDS * WORKER_LOOPS * LEASE_K;
    for (const prefix of prefixes) await publishAll(newQueue(side, prefix), filled, taskOf(clients, 'req'));
    const capped = newQueue(side, prefixes[1] as string);
    for (let at = 0; at < clients; at += 50) {
      const batch = Array.from({ length: Math.min(50, clients - at) }, (_, i) => `c${at + i}`);
      await Promise.all(batch.map((client) => capped.setClientMaxInFlight(client, NEVER_BINDING_CAP)));
    }
    await capped.close();
    const rates: number[][] = prefixes.map(() => []);
    const perRound = Math.floor(CAP_DRAIN / ROUNDS);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [p, prefix] of prefixes.entries()) rates[p]?.push(await drain(side, prefix, perRound));
      log(
        `${clients} clients uncapped / capped, round ${round + 1}:`,
        rates.map((r) => fmt(r.at(-1) ?? 0)).join(' / '),
      );
    }
    return { clients, rates, medians: rates.map(median) };
  } finally {
    for (const prefix of prefixes) await destroy(side, prefix);
  }
}

/**
 * Capped clients on both sides (a baseline that has caps: fair share's own history), alternating:
 * the same drain as capCost's capped side, baseline against this queue.
 */
async function cappedSides(sides: Side[], clients: number) {
  const prefixes = sides.map(() => `bench:${randomBytes(4).toString('hex')}:capped:`);
  try {
    const filled = CAP_DRAIN + ROUNDS * WORKER_LOOPS * LEASE_K;
    for (const [s, side] of sides.entries()) {
      const queue = newQueue(side, prefixes[s] as string);
      await publishAll(queue, filled, taskOf(clients, 'req'));
      for (let at = 0; at < clients; at += 50) {
        const batch = Array.from({ length: Math.min(50, clients - at) }, (_, i) => `c${at + i}`);
        await Promise.all(batch.map((client) => queue.setClientMaxInFlight(client, NEVER_BINDING_CAP)));
      }
      await queue.close();
    }
    const rates: number[][] = sides.map(() => []);
    const perRound = Math.floor(CAP_DRAIN / ROUNDS);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [s, side] of sides.entries())
        rates[s]?.push(await drain(side, prefixes[s] as string, perRound));
      log(
        `${clients} clients capped, both sides, round ${round + 1}:`,
        rates.map((r) => fmt(r.at(-1) ?? 0)).join(' / '),
      );
    }
    return { clients, rates, medians: rates.map(median) };
  } finally {
    for (const [s, side] of sides.entries()) await destroy(side, prefixes[s] as string);
  }
}

/**
 * Client A's backlog (one partition per task); WORKER_LOOPS loops drain it, and once they have
 * leased a few rounds (so they are under way, as executors are), client B publishes 10 tasks.
 * B's wait: tasks leased from B's publish up to and including B's last one, and the time it took.
 */
async function bWait(side: Side, backlog: number) {
  const prefix = `bench:${randomBytes(4).toString('hex')}:bwait:`;
  const queue = newQueue(side, prefix);
  try {
    await publishAll(queue, backlog, (i) => ({ id: `a-${i}:0 @A`, payload: payloadOf(i) }));
    let leased = 0;
    let bSeen = 0;
    let bPublished: { at: number; leased: number } | undefined;
    let result = { leasedBeforeB: 0, waitMs: 0 };
    const publishB = async () => {
      const at = performance.now();
      const marker = { at, leased };
      await queue.publish(Array.from({ length: B_TASKS }, (_, i) => ({ id: `b-${i}:0 @B`, payload: 'b' })));
      bPublished = marker;
    };
    let bPublishing: Promise<void> | undefined;
    const loop = async () => {
      const worker = newQueue(side, prefix);
      while (bSeen < B_TASKS) {
        const { tasks } = await worker.lease(LEASE_K, LEASE_MS);
        if (tasks.length === 0) {
          // the last tasks (B's, before fair share) are with the other loops
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        for (const task of tasks) {
          leased++;
          if (task.id.endsWith('@B') && ++bSeen === B_TASKS) {
            const from = bPublished ?? { at: performance.now(), leased };
            result = { leasedBeforeB: leased - from.leased, waitMs: performance.now() - from.at };
          }
        }
        await worker.ackMany(tasks.map((t) => t.token));
        if (!bPublishing && leased >= 4 * WORKER_LOOPS * LEASE_K) bPublishing = publishB();
      }
      await worker.close();
    };
    await Promise.all(Array.from({ length: WORKER_LOOPS }, loop));
    return { backlog, ...result };
  } finally {
    await queue.close();
    await destroy(side, prefix);
  }
}

async function main() {
  const ref = option('baseline') ?? git('merge-base', 'HEAD', 'main');
  const baseline = await loadBaseline(ref);
  const head = git('rev-parse', '--short', 'HEAD');
  const target: Pick<PrivateRedis, 'url' | 'stop'> = urlArg
    ? { url: urlArg, stop: async () => {} }
    : await startPrivateRedis();
  const sides: Side[] = [
    {
      name: `before (${baseline.commit})`,
      module: baseline.module,
      redis: createRedis({ url: target.url, commandTimeoutMs: 120_000 }),
    },
    {
      name: `fair share (${head})`,
      module: current,
      redis: createRedis({ url: target.url, commandTimeoutMs: 120_000 }),
    },
  ];
  try {
    const info = await sides[0]?.redis.info('server');
    const machine = {
      nproc: os.availableParallelism(),
      cpu: os.cpus()[0]?.model ?? 'unknown',
      node: process.version,
      redis: /redis_version:(\S+)/.exec(info ?? '')?.[1] ?? 'unknown',
      memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
      load: os.loadavg()[0]?.toFixed(1),
    };
    log('machine', machine);
    const tps = [await throughput(sides, 1), await throughput(sides, 1000)];
    const cap = await capCost(sides[1] as Side, 1000);
    // A baseline with per-client caps (fair share's own history): the capped drain side by side too.
    const cappedBoth =
      typeof sides[0]?.module.FairQueue.prototype.setClientMaxInFlight === 'function'
        ? await cappedSides(sides, 1000)
        : undefined;
    const waits = [];
    for (const backlog of BACKLOGS) {
      for (const side of sides) {
        const w = await bWait(side, backlog);
        log(`B's wait, ${side.name}, backlog ${fmt(backlog)}:`, w);
        waits.push({ side: side.name, ...w });
      }
    }
    const command = `pnpm exec node packages/queue/bench/fair-share-bench.ts${quick ? ' --quick' : ''}${million ? ' --million' : ''}${option('baseline') ? ` --baseline ${option('baseline')}` : ''}${urlArg ? ` --url ${urlArg}` : ''}`;
    const section = render({ machine, sides, tps, cap, cappedBoth, waits, command, privateRedis: !urlArg });
    console.log(section);
    if (write)
      writeSection(
        section,
        `Run of ${new Date().toISOString().slice(0, 10)}: ${sides[1]?.name} against ${sides[0]?.name}`,
      );
  } finally {
    for (const side of sides) side.redis.disconnect();
    await target.stop();
  }
}

interface Rendered {
  machine: Record<string, unknown>;
  sides: Side[];
  tps: Array<Awaited<ReturnType<typeof throughput>>>;
  cap: Awaited<ReturnType<typeof capCost>>;
  cappedBoth: Awaited<ReturnType<typeof cappedSides>> | undefined;
  waits: Array<{ side: string } & Awaited<ReturnType<typeof bWait>>>;
  command: string;
  privateRedis: boolean;
}

const TITLE = '## Queue: fair share between clients';

function render({ machine, sides, tps, cap, cappedBoth, waits, command, privateRedis }: Rendered): string {
  const [before, after] = sides.map((s) => s.name);
  const date = new Date().toISOString().slice(0, 10);
  const tpRows = tps
    .map((tp) => {
      const [b = 0, a = 0] = tp.medians;
      const rounds = tp.rates.map((r) => r.map((x) => fmt(x)).join(' / ')).join(' ‖ ');
      const [cb = 0, ca = 0] = tp.cpuMedians;
      return `| ${fmt(tp.clients)} | ${fmt(b)} | ${fmt(a)} | **${fmt(a / b, 2)}** | ${fmt(cb, 1)} / ${fmt(ca, 1)} | ${rounds} |`;
    })
    .join('\n');
  const memRows = tps
    .map((tp) => {
      const [b = 0, a = 0] = tp.bytesPerTask;
      return `| ${fmt(DRAIN)} tasks, ${fmt(tp.clients)} client(s), one partition each | ${fmt(b)} | ${fmt(a)} | ${fmt(a - b)} |`;
    })
    .join('\n');
  const [uncapped = 0, capped = 0] = cap.medians;
  const capRow = `| ${fmt(cap.clients)} | ${fmt(uncapped)} | ${fmt(capped)} | **${fmt(capped / uncapped, 2)}** | ${cap.rates.map((r) => r.map((x) => fmt(x)).join(' / ')).join(' ‖ ')} |`;
  const cappedBothTable = cappedBoth
    ? `\n\nThe same capped drain on both sides (the baseline has caps too), alternating rounds:\n\n| clients | ${before} capped tasks/s | ${after} capped tasks/s | ratio | rounds |\n|---:|---:|---:|---:|---|\n| ${fmt(cappedBoth.clients)} | ${fmt(cappedBoth.medians[0] ?? 0)} | ${fmt(cappedBoth.medians[1] ?? 0)} | **${fmt((cappedBoth.medians[1] ?? 0) / (cappedBoth.medians[0] ?? 1), 2)}** | ${cappedBoth.rates.map((r) => r.map((x) => fmt(x)).join(' / ')).join(' ‖ ')} |`
    : '';
  const waitRows = BACKLOGS.map((backlog) => {
    const b = waits.find((w) => w.side === before && w.backlog === backlog);
    const a = waits.find((w) => w.side === after && w.backlog === backlog);
    return `| ${fmt(backlog)} | ${fmt(b?.leasedBeforeB ?? 0)} | ${fmt(b?.waitMs ?? 0)} | ${fmt(a?.leasedBeforeB ?? 0)} | ${fmt(a?.waitMs ?? 0)} |`;
  }).join('\n');
  return `${TITLE}

Issue 21: the queue with weighted fair share between clients (${after}) against the queue before it
(${before}), side by side in one run on the same Redis. Recorded ${date}${quick ? ' with **--quick** sizes' : ''}.

- Command: \`${command}\`
- Machine: ${machine.nproc} CPUs (\`nproc\`), ${machine.cpu}, ${machine.memory}; Node ${machine.node}; Redis ${machine.redis}
  (${privateRedis ? 'a private redis-server started by the benchmark, no persistence' : 'the given Redis'}); load average ${machine.load} at the start
  (the machine is shared: each throughput comparison alternates its sides over ${ROUNDS} rounds, medians reported).
- 128 shards; ${WORKER_LOOPS} worker loops of \`lease(${LEASE_K})\` → \`ackMany\`; every task a partition of its own
  (requests without \`meta.partition\`), ids \`req-N:0 @cK\` (the client namespace).

### Lease + ack throughput

${fmt(DRAIN)} tasks drained per queue. Target: within 10 % of before (ratio ≥ 0.90).

| clients | before tasks/s | fair share tasks/s | ratio | Redis CPU µs/task (before / fair share) | rounds (before ‖ fair share) |
|---:|---:|---:|---:|---:|---|
${tpRows}

### Cost of a per-client cap

${fmt(CAP_DRAIN)} tasks drained per queue, on ${after} alone: every client capped (\`--max-in-flight\` ${fmt(NEVER_BINDING_CAP)}, a cap that never
binds: each lease takes cap slots in the client's own slot, each ack gives them back) against the same
clients uncapped, alternating rounds.

| clients | uncapped tasks/s | capped tasks/s | ratio | rounds (uncapped ‖ capped) |
|---:|---:|---:|---:|---|
${capRow}${cappedBothTable}

### Redis memory per queued task

\`INFO memory\` \`used_memory\` delta of the publish, divided by the tasks.

| queue | before | fair share | added |
|---|---:|---:|---:|
${memRows}

### B's wait behind A's backlog

Client A publishes the backlog (one partition per task); ${WORKER_LOOPS} worker loops drain it, and once they have
leased ${fmt(4 * WORKER_LOOPS * LEASE_K)} tasks, client B publishes ${B_TASKS} tasks. "Leased first": tasks leased from B's publish up to and
including B's last one; the time is from B's publish to B's last lease.

| A's backlog | before: leased first | before: B's last lease after (ms) | fair share: leased first | fair share: B's last lease after (ms) |
|---:|---:|---:|---:|---:|
${waitRows}
`;
}

/**
 * Adds this run to the "Queue: fair share between clients" section of docs/benchmarks/fair-share.md:
 * the whole section when there is none, else a subsection at its end (earlier runs are kept: the
 * history of the ratios is part of the record).
 */
function writeSection(section: string, heading: string): void {
  const file = join(git('rev-parse', '--show-toplevel'), 'docs/benchmarks/fair-share.md');
  let text = readFileSync(file, 'utf8');
  const start = text.indexOf(`${TITLE}\n`);
  if (start < 0) text = `${text.trimEnd()}\n\n${section}`;
  else {
    const run = `### ${heading}\n${section.slice(TITLE.length).replace(/^### /gm, '#### ')}`;
    const next = text.slice(start + TITLE.length).search(/^## /m);
    const end = next < 0 ? text.length : start + TITLE.length + next;
    text = `${text.slice(0, end).trimEnd()}\n\n${run.trimEnd()}\n${next < 0 ? '' : `\n${text.slice(end)}`}`;
  }
  writeFileSync(file, text.endsWith('\n') ? text : `${text}\n`);
  log(`wrote "${TITLE}" in ${file}`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});

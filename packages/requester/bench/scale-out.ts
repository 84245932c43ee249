/**
 * Scale-out figures on the local topology of `./dev cluster` (docs/benchmarks/scale-out.md).
 *
 *   executors  throughput with 1, 2 and 3 executor processes (2 routers, a 3-master Redis Cluster,
 *              in with 12 partitions), in alternating rounds of one run; CPU per task of each part
 *   fan-in     what each sync-gateway reads of out as gateways are added (1, 2, 3), callers spread
 *              evenly over them: bytes read per gateway per result it delivers
 *
 *   node packages/requester/bench/scale-out.ts [--part executors|fan-in|all] [--tasks 3000]
 *        [--rounds 2] [--calls 300] [--follow-out true|false]
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import {
  consumeEach,
  median,
  parseBenchArgs,
  processCpuSeconds,
  startTarget,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';
import { type ClusterProcess, startTopology, type Topology } from '../scripts/cluster/topology.ts';
import { dropStackDatabase, kafkaProducer } from '../test/e2e/stack.fixture.ts';

const { values: args, fail } = parseBenchArgs({
  usage: `Scale-out figures on the local topology of ./dev cluster (docs/benchmarks/scale-out.md).

  executors  throughput with 1, 2 and 3 executor processes (2 routers, a 3-master Redis Cluster,
             in with 12 partitions), in alternating rounds of one run; CPU per task of each part
  fan-in     what each sync-gateway reads of out as gateways are added (1, 2, 3), callers spread
             evenly over them: bytes read per gateway per result it delivers

  node packages/requester/bench/scale-out.ts [--part executors|fan-in|all] [--tasks 3000]
       [--rounds 2] [--calls 300] [--follow-out true|false]

As run for docs/benchmarks/scale-out.md:
  pnpm exec node packages/requester/bench/scale-out.ts --part executors --tasks 3000 --rounds 3`,
  options: {
    part: { type: 'string', default: 'all', value: 'executors|fan-in|all', help: 'which part to run' },
    tasks: {
      type: 'string',
      default: '3000',
      value: 'N',
      number: true,
      help: 'tasks per round of the executors part',
    },
    rounds: { type: 'string', default: '2', value: 'N', number: true, help: 'rounds of each executor count' },
    calls: {
      type: 'string',
      default: '300',
      value: 'N',
      number: true,
      help: 'sync calls per gateway count of the fan-in part',
    },
    'follow-out': {
      type: 'string',
      default: 'true',
      value: 'true|false',
      help: 'SYNC_FOLLOW_OUT of every process: false = gateways read only their reply channel, not out',
    },
  },
});
if (!['executors', 'fan-in', 'all'].includes(args.part))
  fail(`--part must be executors, fan-in or all, got ${args.part}`);
/** CPU seconds (user + system) a process has used so far; 0 once it is gone. */
const cpuSeconds = (pid: number): number => processCpuSeconds(pid) ?? 0;

/** Bytes a process has read through read(2)-like calls (sockets included), from /proc/<pid>/io. */
function bytesRead(pid: number): number {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  return Number(/^rchar: (\d+)$/m.exec(io)?.[1] ?? 0);
}

/** The median, rounded (the tables print whole numbers). */
const roundedMedian = (xs: number[]): number => Math.round(median(xs));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

function machine(): string {
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  return `${cpus().length} CPUs (${cpus()[0]?.model.trim()}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, load average ${load}`;
}

async function withTopology<T>(
  counts: Parameters<typeof startTopology>[0]['counts'],
  run: (topology: Topology) => Promise<T>,
): Promise<T> {
  const runDir = mkdtempSync(path.join(tmpdir(), 'rq-scale-out-'));
  const topology = await startTopology({
    name: uniqueName('bench'),
    runDir,
    counts,
    redisFromPort: 7701,
    env: { LOG_LEVEL: 'warn', AUTH: 'off', MAX_WORKERS: '64', SYNC_FOLLOW_OUT: args['follow-out'] },
  });
  try {
    return await run(topology);
  } finally {
    await topology.stop();
    await dropStackDatabase(topology);
    rmSync(runDir, { recursive: true, force: true });
  }
}

interface Round {
  executors: number;
  tasksPerSecond: number;
  cpuPerTaskUs: { executors: number; routers: number; redis: number; bench: number };
  /** What the executors read (sockets included: Kafka fetches by offset, Redis, HTTP) per task. */
  executorBytesReadPerTask: number;
}

/**
 * Counts the results on out whose key starts with `prefix` (earlier rounds' results are skipped),
 * with the times the first and the last of them arrived.
 */
async function countResults(topic: string, prefix: string) {
  const consumer = testKafka().consumer({ groupId: uniqueName('bench-reader') });
  const state = { count: 0, first: 0, last: 0 };
  await consumeEach(consumer, topic, (record) => {
    if (!record.key?.toString().startsWith(prefix)) return;
    state.last = performance.now();
    if (state.count++ === 0) state.first = state.last;
  });
  return {
    get first() {
      return state.first;
    },
    get last() {
      return state.last;
    },
    async until(count: number, timeoutMs: number) {
      const deadline = Date.now() + timeoutMs;
      while (state.count < count) {
        if (Date.now() > deadline)
          throw new Error(`${state.count} of ${count} results within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    stop: () => consumer.stop(),
  };
}

/** One round: `n` fresh executors, then `tasks` requests straight to in; timed first → last result. */
async function executorRound(
  topology: Topology,
  n: number,
  tasks: number,
  targetUrl: string,
): Promise<Round> {
  const executors: ClusterProcess[] = [];
  for (let i = 0; i < n; i++) executors.push(await topology.add('executor'));
  const prefix = uniqueName('t');
  const results = await countResults(topology.config.topicOut, `${prefix}-`);
  const producer = await kafkaProducer();
  const routers = topology.byRole('router');
  const pidsOf = {
    executors: executors.map((p) => p.pid),
    routers: routers.map((p) => p.pid),
    redis: topology.redisPids,
  };
  const cpuNow = () => ({
    executors: sum(pidsOf.executors.map(cpuSeconds)),
    routers: sum(pidsOf.routers.map(cpuSeconds)),
    redis: sum(pidsOf.redis.map(cpuSeconds)),
    bench: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
  });
  try {
    const before = cpuNow();
    const readBefore = sum(pidsOf.executors.map(bytesRead));
    for (let from = 0; from < tasks; from += 500) {
      await producer.send(
        topology.config.topicIn,
        Array.from({ length: Math.min(500, tasks - from) }, (_, j) => ({
          key: `${prefix}-${from + j}`,
          value: JSON.stringify({
            request: { uri: `${targetUrl}/echo` },
            meta: { requestId: `${prefix}-${from + j}` },
          }),
        })),
      );
    }
    await results.until(tasks, 600_000);
    const seconds = (results.last - results.first) / 1000;
    const after = cpuNow();
    const readAfter = sum(pidsOf.executors.map(bytesRead));
    const perTask = (k: keyof typeof before) => Math.round(((after[k] - before[k]) / tasks) * 1e6);
    return {
      executors: n,
      tasksPerSecond: Math.round(tasks / seconds),
      cpuPerTaskUs: {
        executors: perTask('executors'),
        routers: perTask('routers'),
        redis: perTask('redis'),
        bench: perTask('bench'),
      },
      executorBytesReadPerTask: Math.round((readAfter - readBefore) / tasks),
    };
  } finally {
    await producer.disconnect();
    await results.stop();
    for (const executor of executors) await topology.terminate(executor);
  }
}

async function executorsPart(): Promise<void> {
  const tasks = Number(args.tasks);
  const rounds = Number(args.rounds);
  const target = await startTarget();
  // The target records every call, for tests; nothing here reads them (kept, they only grow).
  const forget = setInterval(() => target.calls.splice(0), 1000).unref();
  try {
    await withTopology({ gateway: 0, router: 2, executor: 0, relay: 0 }, async (topology) => {
      // Alternating order (1,2,3,3,2,1,…) so drift of the shared machine's load hits every size alike.
      const order = Array.from({ length: rounds }, (_, r) => (r % 2 === 0 ? [1, 2, 3] : [3, 2, 1])).flat();
      const all: Round[] = [];
      for (const n of order) {
        const round = await executorRound(topology, n, tasks, target.url);
        console.error(JSON.stringify(round));
        all.push(round);
      }
      console.log(`\n### Executors: ${tasks} tasks per round, rounds ${order.join(',')}\n`);
      console.log(
        '| executor processes | tasks/s (median) | rounds | ratio to 1 | CPU µs/task: executors · routers · Redis · bench (target + reader) | bytes read by executors per task |',
      );
      console.log('|---:|---:|---|---:|---|---:|');
      const base = roundedMedian(all.filter((r) => r.executors === 1).map((r) => r.tasksPerSecond));
      for (const n of [1, 2, 3]) {
        const mine = all.filter((r) => r.executors === n);
        const rate = roundedMedian(mine.map((r) => r.tasksPerSecond));
        const cpu = (k: keyof Round['cpuPerTaskUs']) => roundedMedian(mine.map((r) => r.cpuPerTaskUs[k]));
        const read = roundedMedian(mine.map((r) => r.executorBytesReadPerTask));
        console.log(
          `| ${n} | ${rate} | ${mine.map((r) => r.tasksPerSecond).join(' / ')} | ${(rate / base).toFixed(2)} | ${cpu('executors')} · ${cpu('routers')} · ${cpu('redis')} · ${cpu('bench')} | ${read} |`,
        );
      }
    });
  } finally {
    clearInterval(forget);
    await target.close();
  }
}

/** `calls` sync calls spread round-robin over the gateways running; what each one read meanwhile. */
async function fanInPhase(gateways: ClusterProcess[], calls: number, body: string) {
  const before = gateways.map((g) => bytesRead(g.pid));
  const delivered = gateways.map(() => 0);
  const prefix = uniqueName('s');
  let next = 0;
  const worker = async () => {
    while (next < calls) {
      const i = next++;
      const g = i % gateways.length;
      const res = await fetch(`${gateways[g]?.httpUrl}/request`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          request: { uri: '', body },
          meta: { requestId: `${prefix}-${i}`, sync: true },
        }),
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`sync call answered ${res.status}`);
      delivered[g] = (delivered[g] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  // Let every gateway's fetch of the last results land before reading the counters.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  return gateways.map((g, i) => ({
    read: bytesRead(g.pid) - (before[i] ?? 0),
    delivered: delivered[i] ?? 0,
  }));
}

async function fanInPart(): Promise<void> {
  const calls = Number(args.calls);
  const body = 'x'.repeat(1024); // a 1 KiB result body, so results dominate what is read
  await withTopology({ gateway: 1, router: 2, executor: 2, relay: 0 }, async (topology) => {
    const gateways = [...topology.byRole('gateway')];
    const rows: string[] = [];
    for (let n = 1; n <= 3; n++) {
      if (gateways.length < n) gateways.push(await topology.add('gateway'));
      await fanInPhase(gateways, 30 * n, body); // warm-up: JIT, connections
      const phase = await fanInPhase(gateways, calls, body);
      const perResult = phase.map((p) => Math.round(p.read / Math.max(1, p.delivered)));
      const total = sum(phase.map((p) => p.read));
      console.error(JSON.stringify({ gateways: n, phase }));
      rows.push(
        `| ${n} | ${calls} | ${phase.map((p) => p.delivered).join(' / ')} | ${phase.map((p) => Math.round(p.read / 1024)).join(' / ')} | ${perResult.join(' / ')} | ${Math.round(total / calls)} |`,
      );
    }
    console.log(
      `\n### Sync-gateway fan-in: ${calls} sync calls per step, 1 KiB bodies, round-robin over the gateways, SYNC_FOLLOW_OUT=${args['follow-out']}\n`,
    );
    console.log(
      '| gateways | sync calls | delivered per gateway | KiB read per gateway | bytes read per result delivered, per gateway | bytes read by all gateways per call |',
    );
    console.log('|---:|---:|---|---|---|---:|');
    for (const row of rows) console.log(row);
  });
}

console.log(`Machine: ${machine()}`);
console.log(`Command: node packages/requester/bench/scale-out.ts ${process.argv.slice(2).join(' ')}`);
if (args.part === 'executors' || args.part === 'all') await executorsPart();
if (args.part === 'fan-in' || args.part === 'all') await fanInPart();
process.exit(0);

// End-to-end load harness: a whole Requester (`requester --role all`, a child process on its own
// topics, Redis prefix and database) against the project's test target (another child process),
// driven over HTTP (async or sync) or straight into Kafka, results counted on `out`.
//
//   pnpm run bench:load -- --mode ...   (or: node bench/load.ts, on the project's Node 24)
//   node bench/load.ts --mode http-async|sync|kafka [--count 20000] [--connections 64]
//        [--body 100] [--rounds 3] [--baseline /tmp/baseline] [--limit 120 (s)] [--env K=V,...]
//        [--producer requester|kafkajs [--batch-bytes 1048576]]   (--mode kafka: Requester's writer,
//        or a plain kafkajs producer batching as an outside one does)
//        [--roles all]   (e.g. ingress,sync-gateway: accepts alone, nothing consumes `in`)
//        [--answer echo|ok]   (what the test target answers: the request's body, or `ok`)
//        [--wake]   (wake-ups: an empty `request.uri`, nobody is called: Requester's own cost per task)
//        [--memory]   (each side's RSS and heap after every round and after --idle seconds at the end,
//        and its collections of each round by kind)
//        [--idle-cpu S]   (each side's CPU while idle, S seconds after the warm-up: its fixed cost)
//        [--profile-rounds]   (a CPU and an allocation profile of each round, bench/profile-rounds.ts:
//        bytes allocated per task, and node CPU per task with the HTTP call's share taken out)
//        [--profile-cpu]   (the CPU profile alone: the allocation sampler inflates the node CPU beside it)
//        [--stages]   (per-stage latencies of each side, from its task journal: see stageReport)
//        [--executors 1,2]   (one side per count, all from this checkout: `--role ingress,
//        sync-gateway,router,relay` plus `requester --role executor --processes N`; CPU of the
//        executors summed over the supervisor and its children)
//
// With --baseline <checkout>, a second Requester runs from that checkout (e.g. a git worktree of
// main with its node_modules installed) and the rounds alternate between the two, the order
// flipped each round, so that the shared machine's noise hits both sides alike; the report gives
// the ratio new / baseline of the medians.
//
// Its parts are in bench/load/: the command line (settings.ts), the processes, the results on
// `out`, what the processes spend (process-stats.ts), a round, and the report.
import path from 'node:path';
import { median } from '../packages/shared/src/testing/index.ts';
import { exitBench, loadavg, pidListeningOn } from './harness.ts';
import { idleCpu, memoryOfSide } from './load/process-stats.ts';
import { type Side, startRequester, startTarget } from './load/processes.ts';
import { line, ms, profileLine, roundProfile, stageReport } from './load/report.ts';
import type { Tracker } from './load/results.ts';
import {
  bodyOf,
  newHistogram,
  type RoundProfile,
  type RoundResult,
  round,
  targetLatency,
} from './load/round.ts';
import {
  args,
  batchBytes,
  bodyBytes,
  connections,
  count,
  executorCounts,
  extraEnv,
  here,
  limitMs,
  mode,
  pipeline,
  profileCpuOnly,
  profileRounds,
  rounds,
} from './load/settings.ts';
import { formatGc, gcOf } from './memory.ts';

async function main(): Promise<void> {
  console.log(
    `mode ${mode}${mode === 'kafka' ? ` (producer ${args.producer}${batchBytes > 0 ? `, ${batchBytes} B sends` : ''})` : ''}${args.wake ? ' (wake-ups)' : ''}${args.answer === 'ok' ? ' (target answers ok)' : ''}, ${count} requests of ${bodyBytes} B, ${connections} connections, ${rounds} round(s); load average ${loadavg()}`,
  );
  if (Object.keys(extraEnv).length) console.log(`extra env: ${JSON.stringify(extraEnv)}`);
  const target = await startTarget();
  const brokerPort = Number(args.brokers.split(',')[0]?.split(':')[1] ?? 9092);
  const sides = executorCounts.length
    ? await Promise.all(executorCounts.map((n) => startRequester(`x${n}`, here, n)))
    : [await startRequester('new', here)];
  if (args.baseline && !executorCounts.length)
    sides.push(await startRequester('baseline', path.resolve(args.baseline)));
  // A short warm-up per side: JIT, connections, topic metadata.
  const all: RoundResult[] = [];
  for (const side of sides) await warmUp(side, target);
  if (args.memory)
    for (const side of sides)
      console.log(`warm     ${side.label.padEnd(9)} memory: ${await memoryOfSide(side)}`);
  const idle = Number(args['idle-cpu']) > 0 ? await idleCpu(sides, Number(args['idle-cpu'])) : undefined;
  const measured = async (side: Side, n: number) => {
    // Looked up each round: another developer may have restarted the shared broker meanwhile.
    const broker = pidListeningOn(brokerPort);
    const redis = pidListeningOn(6379);
    const pids = {
      node: side.pid,
      ...(side.executorPid ? { executors: side.executorPid } : {}),
      target: target.pid,
      broker,
      redis,
    };
    const gcBefore = args.memory ? await gcOf(side.adminUrl) : undefined;
    if (profileRounds) process.kill(side.pid, 'SIGUSR2');
    const r = await round(side, n, target, pids);
    const gc = gcBefore && formatGc(gcBefore, await gcOf(side.adminUrl), r.completed);
    if (profileRounds) r.profile = await roundProfile(side, r);
    const memory = args.memory ? await memoryOfSide(side) : undefined;
    return { side, r, gc, memory };
  };
  for (let n = 1; n <= rounds; n++) {
    const order = n % 2 ? sides : [...sides].reverse();
    const results = [];
    if (args.together) results.push(...(await Promise.all(order.map((side) => measured(side, n)))));
    else for (const side of order) results.push(await measured(side, n));
    for (const { side, r, gc, memory } of results) {
      all.push(r);
      console.log(`round ${n} ${line(r, idle?.get(side.label))}`);
      if (r.profile) console.log(`round ${n} ${side.label.padEnd(9)} ${profileLine(r)}`);
      if (memory) console.log(`round ${n} ${side.label.padEnd(9)} memory: ${memory}`);
      if (gc) console.log(`round ${n} ${side.label.padEnd(9)} GC on the main thread: ${gc}`);
    }
  }
  if (args.memory) {
    await new Promise((resolve) => setTimeout(resolve, Number(args.idle) * 1000));
    for (const side of sides)
      console.log(`idle ${args.idle} s ${side.label.padEnd(9)} memory: ${await memoryOfSide(side)}`);
  }
  if (mode === 'sync') {
    const own = await targetLatency(target, Math.min(count, 5_000));
    console.log(`target alone (${connections} connections): p50 ${ms(own, 50)} p99 ${ms(own, 99)} ms`);
  }
  const by = (label: string) => all.filter((r) => r.side === label);
  for (const side of sides) {
    const rs = by(side.label);
    const lat = (p: number) => median(rs.map((r) => (r.rtt ?? r.latency).getValueAtPercentile(p) / 1000));
    console.log(
      `median ${side.label}: accepted ${median(rs.map((r) => r.acceptedPerSec)).toFixed(0)}/s, completed ` +
        `${median(rs.map((r) => r.completedPerSec)).toFixed(0)}/s, ${mode === 'sync' ? 'reply' : 'latency→out'} ` +
        `p50 ${lat(50).toFixed(1)} ms p99 ${lat(99).toFixed(1)} ms`,
    );
  }
  if (sides.length === 2) {
    const [a, b] = [by(sides[0]?.label ?? ''), by(sides[1]?.label ?? '')];
    const ratio = (f: (r: RoundResult) => number) => (median(a.map(f)) / median(b.map(f))).toFixed(2);
    const p = (q: number) => (r: RoundResult) => (r.rtt ?? r.latency).getValueAtPercentile(q);
    // The Requester's CPU per task (per accept without the pipeline), as `line` prints it.
    const cpu = (r: RoundResult) =>
      (r.cpu.node ?? Number.NaN) / Math.max(pipeline ? r.completed : r.accepted, 1);
    console.log(
      `ratio ${sides[0]?.label}/${sides[1]?.label}: accepted/s ${ratio((r) => r.acceptedPerSec)}, completed/s ${ratio((r) => r.completedPerSec)}, ` +
        `p50 ${ratio(p(50))}, p99 ${ratio(p(99))}, node CPU/task ${ratio(cpu)} ` +
        `(medians ${(median(a.map(cpu)) * 1e6).toFixed(0)} / ${(median(b.map(cpu)) * 1e6).toFixed(0)} µs)`,
    );
    // Round by round (the two sides of a round ran next to each other, or at once with --together):
    // the box's slow and fast minutes fall on both sides of a round's ratio alike.
    const perRound = (f: (r: RoundResult) => number) => {
      const ratios = a.map((r, i) => f(r) / f(b[i] as RoundResult)).filter(Number.isFinite);
      const mean = Math.exp(ratios.reduce((sum, x) => sum + Math.log(x), 0) / Math.max(1, ratios.length));
      return `${ratios.map((x) => x.toFixed(2)).join(' ')} (geometric mean ${mean.toFixed(3)})`;
    };
    console.log(`per round ${sides[0]?.label}/${sides[1]?.label}: node CPU/task ${perRound(cpu)}`);
    if (profileRounds) {
      const of = (f: (p: RoundProfile) => number) => (r: RoundResult) => f(r.profile as RoundProfile);
      console.log(
        `per round ${sides[0]?.label}/${sides[1]?.label}: node CPU/task without the HTTP call ${perRound(of((p) => p.withoutHttpPerTask))}`,
      );
      const pair = (f: (p: RoundProfile) => number, digits = 0) =>
        `${median(a.map(of(f))).toFixed(digits)} / ${median(b.map(of(f))).toFixed(digits)} (${ratio(of(f))})`;
      console.log(
        `profiles ${sides[0]?.label}/${sides[1]?.label}, medians: ` +
          `${profileCpuOnly ? '' : `allocated KiB/task ${pair((p) => p.allocatedPerTask / 1024, 1)}, `}` +
          `main thread busy µs/task ${pair((p) => p.busyPerTask)}, HTTP call % ${pair((p) => p.httpShare * 100, 1)}, ` +
          `node CPU/task without the HTTP call µs ${pair((p) => p.withoutHttpPerTask)}`,
      );
    }
  }
  console.log(`load average at the end ${loadavg()}`);
  if (args.stages) for (const side of sides) await stageReport(side);
  for (const side of sides) {
    await side.pool.close();
    await side.results.stop();
  }
}

async function warmUp(side: Side, target: { url: string; pid: number }): Promise<void> {
  const tracker: Tracker = {
    prefix: `${side.label}-warm-`,
    sentAt: new Map(),
    histogram: newHistogram(),
    done: 0,
    lastAt: 0,
  };
  side.results.current = tracker;
  const done = new Promise<void>((resolve) => {
    tracker.onDone = resolve;
  });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${side.token}` };
  await Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const id = `${tracker.prefix}${i}`;
      tracker.sentAt.set(id, performance.now());
      const res = await side.pool.request({
        path: '/request',
        method: 'POST',
        headers,
        body: bodyOf(id, target.url, false),
      });
      await res.body.dump();
      if (res.statusCode !== 202) throw new Error(`warm-up: ${side.label} answered ${res.statusCode}`);
    }),
  );
  if (pipeline) await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 30_000))]);
  side.results.current = undefined;
}

const timer = setTimeout(
  () => {
    console.error('bench: overall time bound reached');
    process.exit(2);
  },
  (rounds * 2 + 3) * limitMs + 180_000,
);
timer.unref();
// Exiting stops the Requesters this script started (childProcesses), whether main ended or threw.
await main();
await exitBench(0);

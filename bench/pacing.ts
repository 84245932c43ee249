// Origin pacing benchmark (docs/architecture.md §9): the executor's delivery policies (the very
// `Policies` class of the worker: pace → bulkhead → limiter → breaker → HTTP → record) driven by
// two simulated executors of 16 workers each, sharing one Redis, against real targets in child
// processes. The queue is an in-memory due-time heap (a task sent back waits there with its
// progress, as in Redis): what is measured is what reaches the target, not the queue's cost.
//
//   node bench/pacing.ts [--scenario quota|capacity|all] [--rounds 1] [--plot docs/pacing.png] [--detail] [--no-park]
//                        [--book-ahead MS] [--book-all] [--fixed N,...] [--in-process] [--no-slot-wait]
//                        [--service-ms 5]
//
// A task the pace sends back for a slot up to PARK_MAX_MS ahead is parked in its executor, as
// ParkingLot.park does (the same rule, `parks`, and budget): it comes back to one of its executor's
// workers at its slot without a lease. --no-park: every such task goes back to the queue;
// --park-max N: another budget than the executor's (EXECUTOR_PARKED_TASKS, 1,000 per executor; its
// bytes budget is not reached by these small records); --park-per-worker N: N × 16 per executor.
//
// --book-ahead MS: the pacer's booking horizon (OriginPacer bookAheadMs; default its own); --book-all:
// the quota scenario also runs with every slot booked however far (bookAheadMs Infinity),
// alternating with the default in each round: a side-by-side baseline.
//
// --detail: for the quota scenario with adaptation, one line a second: calls at the target (and
// 429s), the shared pace, and what the pace gate answered (see `Gates`), to tell where the gap
// between the pace and the calls made goes.
//
// - quota: a target serving 50 calls/s (5 per 100 ms by arrival) that answers 429 + Retry-After: 1
//   + RateLimit-Policy: 50;w=1 above it; 400 requests with retry {max: 30, delay: 200ms, maxDelay: 5s},
//   half of them to each executor, each a child process of its own (--in-process: both in this
//   process, drawing from one backlog).
// - capacity: a target serving 8 calls at once in 5 ms each and queueing the rest; 2 executors × 16
//   workers for 12 s, each executor a child process of its own (its own event loop, Policies,
//   pacer and HTTP client, sharing Redis, as deployed; --in-process: both in this process),
//   with a backlog of 2 × 16 of its tasks each; its capacity halves (4) at 6 s. The same
//   workers serve a second, healthy origin throughout (64 at once, 1 ms each), 100 calls/s
//   arriving on a schedule split between the executors: its throughput, latency and wait for a
//   worker must not suffer from the first one's queue. Latency is measured at the client (the
//   call in the executor) and at the target (arrival to answer: its queue and service only), each
//   against its floor, measured first in each round with one call at a time.
// Each runs with adaptation on (OriginPacer, ADAPTIVE_CONCURRENCY=true) and off (no pacer: the
// bulkhead's static MAX_WORKERS_PER_ORIGIN = 16 per executor), side by side in one run.
//
// Its parts are in bench/pacing/: the command line (settings.ts), the simulated executors
// (drive.ts), the executor processes (children.ts, child.ts), the two scenarios (quota.ts,
// capacity.ts) and what they share (support.ts).
import { cpus } from 'node:os';
import { exitBench } from './harness.ts';
import { runCapacity } from './pacing/capacity.ts';
import { runExecutorChild } from './pacing/child.ts';
import { runQuota } from './pacing/quota.ts';
import { args, EXECUTORS, WORKERS } from './pacing/settings.ts';
import { redis } from './pacing/support.ts';
import { type Panel, writePlot } from './plot.ts';

if (args['executor-child'] !== undefined) await runExecutorChild(args['executor-child']);

console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, node ${process.version}`);
const panels: Panel[] = [];
const details = args.scenario === 'quota' || args.scenario === 'all' ? await runQuota(panels) : [];

for (const table of details) console.log(`\nquota target, adaptation on, per second:\n${table}`);
if (args.scenario === 'capacity' || args.scenario === 'all') await runCapacity(panels);

if (args.plot && panels.length > 0) {
  writePlot(args.plot, {
    title: `origin pacing: ${EXECUTORS} executors × ${WORKERS} workers, one Redis (${cpus().length} CPUs, node ${process.version})`,
    panels,
    xLabel: 'time since the scenario started (s)',
    xMax: 20,
  });
  console.log(`\nplot: ${args.plot}`);
}
redis.disconnect();
await exitBench(0);

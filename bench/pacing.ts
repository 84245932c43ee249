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
// workers at its slot without a lease. --no-park: every such task goes back to the queue (before);
// --park-max N: another budget than the executor's (EXECUTOR_PARKED_TASKS, 1,000 per executor; its
// bytes budget is not reached by these small records); --park-per-worker N: N × 16 per executor
// (3 was the budget before EXECUTOR_PARKED_TASKS).
//
// --book-ahead MS: the pacer's booking horizon (OriginPacer bookAheadMs; default its own); --book-all:
// the quota scenario also runs with every slot booked however far (bookAheadMs Infinity, the gate
// before the horizon), alternating with the default in each round: a side-by-side baseline.
//
// --detail: for the quota scenario with adaptation, one line a second: calls at the target (and
// 429s), the shared pace, and what the pace gate answered (see `Gates`), to tell where the gap
// between the pace and the calls made goes.
//
// - quota: a target serving 50 calls/s (5 per 100 ms by arrival) that answers 429 + Retry-After: 1
//   + RateLimit-Policy: 50;w=1 above it; 400 requests with retry {max: 30, delay: 200ms, maxDelay: 5s},
//   half of them to each executor, each a child process of its own (--in-process: both in this
//   process, drawing from one backlog, as before 2026-12-06).
// - capacity: a target serving 8 calls at once in 5 ms each and queueing the rest; 2 executors × 16
//   workers for 12 s, each executor a child process of its own (its own event loop, Policies,
//   pacer and HTTP client, sharing Redis, as deployed; --in-process: both in this process, as
//   before), with a backlog of 2 × 16 of its tasks each; its capacity halves (4) at 6 s. The same
//   workers serve a second, healthy origin throughout (64 at once, 1 ms each), 100 calls/s
//   arriving on a schedule split between the executors: its throughput, latency and wait for a
//   worker must not suffer from the first one's queue. Latency is measured at the client (the
//   call in the executor) and at the target (arrival to answer: its queue and service only), each
//   against its floor, measured first in each round with one call at a time.
// Each runs with adaptation on (OriginPacer, ADAPTIVE_CONCURRENCY=true) and off (no pacer: the
// bulkhead's static MAX_WORKERS_PER_ORIGIN = 16 per executor), side by side in one run.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { cpus } from 'node:os';
import { LocalBulkhead } from '../packages/executor/src/bulkhead/index.ts';
import { createHttpClient } from '../packages/executor/src/http/index.ts';
import { PARK_MAX_MS, parks } from '../packages/executor/src/worker/decide.ts';
import { DEFAULT_PARKING, HELD_PER_WORKER } from '../packages/executor/src/worker/index.ts';
import { type Ending, Policies, type Progress } from '../packages/executor/src/worker/policies.ts';
import { CircuitBreaker, OriginPacer, originOf } from '../packages/policies/src/index.ts';
import {
  createLogger,
  createRedis,
  parseRequestEnvelope,
  type RequestEnvelope,
} from '../packages/shared/src/index.ts';
import { type RemotePacedTarget, startPacedTargetProcess } from '../packages/shared/src/testing/index.ts';
import { childProcesses, loadavg, parseBenchArgs } from './harness.ts';
import { type Panel, writePlot } from './plot.ts';

const { values: args, fail } = parseBenchArgs({
  usage: `Origin pacing benchmark (docs/architecture.md §9): the executor's delivery policies (pace ->
bulkhead -> limiter -> breaker -> HTTP -> record) driven by two simulated executors of 16 workers
each, sharing one Redis, against real targets in child processes; adaptation on (OriginPacer,
ADAPTIVE_CONCURRENCY=true) and off, side by side in one run.

  node bench/pacing.ts [--scenario quota|capacity|all] [--rounds 1] [--plot docs/pacing.png] [--detail]
                       [--book-ahead MS] [--book-all] [--fixed N,...] [--in-process] [--no-slot-wait]
                       [--service-ms 5]

- quota: a target serving 50 calls/s that answers 429 + Retry-After above it; 400 requests, half
  to each executor, each a child process unless --in-process.
- capacity: a target serving 8 calls at once in 5 ms each, halving to 4 at 6 s, and a second,
  healthy origin served by the same workers throughout; each executor a child process (as
  deployed) unless --in-process; latency at the client and at the target, each against its floor
  (one call at a time, measured in each round).

As run for docs/benchmarks/pacing.md:
  node bench/pacing.ts --scenario capacity --rounds 3 --fixed 4,5,6
  node bench/pacing.ts --scenario capacity --rounds 1 --in-process   (both executors in one process, as before)
  node bench/pacing.ts --scenario all --plot docs/pacing.png
  node bench/pacing.ts --scenario quota --rounds 3 --book-all`,
  options: {
    scenario: { type: 'string', default: 'all', value: 'quota|capacity|all', help: 'which scenario to run' },
    plot: { type: 'string', value: 'FILE.png', help: 'also plot the runs to that PNG' },
    detail: {
      type: 'boolean',
      default: false,
      help: 'quota scenario with adaptation: one line a second (calls at the target and 429s, the shared pace, what the pace gate answered)',
    },
    rounds: {
      type: 'string',
      default: '1',
      value: 'N',
      number: true,
      help: 'rounds of each side, alternating; the tables add the medians',
    },
    'book-ahead': {
      type: 'string',
      value: 'MS',
      number: true,
      help: "the pacer's booking horizon (OriginPacer bookAheadMs; default the pacer's own)",
    },
    'free-for': {
      type: 'string',
      default: '1000',
      value: 'MS',
      number: true,
      help: "each executor's local permission to call a free origin without a gate (OriginPacer freeForMs, PACING_FREE_FOR's default; 0 = every call gated, as before)",
    },
    silent: {
      type: 'boolean',
      default: false,
      help: 'quota scenario: the target says only 429 + Retry-After (no RateLimit-Policy): the pace is learnt from the rate it served',
    },
    'window-ms': {
      type: 'string',
      default: '100',
      value: 'MS',
      number: true,
      help: "quota scenario: the target's window (its quota is 50/s: 5 per 100 ms by default, 50 per 1000 ms)",
    },
    'book-all': {
      type: 'boolean',
      default: false,
      help: 'quota scenario: also run with every slot booked however far (the gate before the booking horizon), alternating: a side-by-side baseline',
    },
    'no-slot-wait': {
      type: 'boolean',
      default: false,
      help: 'send a task the bulkhead refused back to the queue for its delay, as the bench did before, not parked waiting for a slot (ParkingLot.parkForSlot)',
    },
    'no-park': {
      type: 'boolean',
      default: false,
      help: 'send every paced task back to the queue, as before parking (for a side-by-side run)',
    },
    'service-ms': {
      type: 'string',
      default: '5',
      value: 'MS',
      number: true,
      help: "capacity scenario: the capped target's service time (8 calls at once, each this long; 5 as in issue 23). A longer one shows where the limit settles with the caller's own jitter small beside it (a loaded box)",
    },
    fixed: {
      type: 'string',
      value: 'N,N,...',
      help: 'capacity scenario: also run it with the pacer but a fixed limit of N calls per executor (ADAPTIVE_CONCURRENCY=false, MAX_WORKERS_PER_ORIGIN=N), for each N: the goodput/latency frontier a limit can reach on this machine',
    },
    'park-per-worker': {
      type: 'string',
      value: 'N',
      number: true,
      help: 'parked tasks at most per worker (3 = the budget before EXECUTOR_PARKED_TASKS)',
    },
    'in-process': {
      type: 'boolean',
      default: false,
      help: 'run both executors in this one process (before), not each in a child process of its own',
    },
    'executor-child': {
      type: 'string',
      value: 'JSON',
      help: 'internal: run as one executor process of a capacity run (the parent passes its share)',
    },
    'park-max': {
      type: 'string',
      value: 'N',
      number: true,
      help: "parked tasks at most per executor (default the executor's, EXECUTOR_PARKED_TASKS)",
    },
  },
});
if (!['quota', 'capacity', 'all'].includes(args.scenario))
  fail(`--scenario must be quota, capacity or all, got ${args.scenario}`);
const log = createLogger({ level: 'silent' });
const spawned = childProcesses();
const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
const EXECUTORS = 2;
const WORKERS = 16;
const PER_ORIGIN = 16;
const PARKING = {
  ...DEFAULT_PARKING,
  ...(args['park-per-worker'] !== undefined ? { tasks: Number(args['park-per-worker']) * WORKERS } : {}),
  ...(args['park-max'] !== undefined ? { tasks: Number(args['park-max']) } : {}),
};
/** OriginPacer's default local wait: a slot within it is slept for, a later one reserved. */
const MAX_LOCAL_WAIT_MS = 250;
const WINDOW_MS = Number(args['window-ms']);
if (!(Number(args['service-ms']) >= 1 && Number(args['service-ms']) <= 1_000))
  fail(`--service-ms must be 1–1000, got ${args['service-ms']}`);
if (!(WINDOW_MS >= 20 && WINDOW_MS <= 10_000)) fail(`--window-ms must be 20–10000, got ${args['window-ms']}`);
const BOOK_AHEAD_MS = args['book-ahead'] !== undefined ? Number(args['book-ahead']) : undefined;

interface Task {
  envelope: RequestEnvelope;
  progress: Progress;
  due: number;
  /** Parked in its executor (index of `parked`), not in the queue: taking it back is no lease. */
  parkedIn?: number;
}

/**
 * What the pace gate answered, by kind, counted per second of the run (classified here, from the
 * task's reserved slot and the answer, so that the gate itself stays as it runs in the executor):
 * - fresh: a task without a reserved slot: `go` (now), `slept` (its slot within the local wait),
 *   `booked` (a later slot reserved: parked, or back to the queue), `laned` (beyond the booking
 *   horizon: no slot, told when to ask again);
 * - at slot: a task back for its reserved slot, on time: `went`, or `voided` (refused: a hold
 *   came since; it takes a new slot at the end of the line, a lease more again);
 * - late: back more than the local wait after its slot: `lane` (the late lane let it go) or
 *   `laneBooked` (a late-lane slot reserved, a lease more);
 * - `bulkhead`, `breaker`: let through by the pace, then refused by the bulkhead (the learnt
 *   concurrency limit) or the breaker (an origin not yet proven lets few calls out at once): the
 *   slot is wasted and the task goes back without one.
 */
type GateKind =
  | 'go'
  | 'slept'
  | 'booked'
  | 'laned'
  | 'went'
  | 'voided'
  | 'lane'
  | 'laneBooked'
  | 'bulkhead'
  | 'breaker';
type Gates = Map<number, Partial<Record<GateKind, number>>>;

interface Run {
  leases: number;
  gates: Gates;
  results: number;
  statuses: Map<number, number>;
  /** Every call that reached a target: when it left (ms since start), its latency (ms), its URI. */
  calls: Array<{ at: number; ms: number; uri: string }>;
  /** [ms, pace calls/s, concurrency limit, latency floor ms (NaN: none yet)] of `origin`, every 100 ms. */
  samples: Array<[number, number, number, number]>;
  /** [ms, concurrency limit] of each of `alsoSampled`, sampled alike. */
  others: Map<string, Array<[number, number]>>;
  /** Epoch ms of the start. */
  startMs: number;
  endMs: number;
}

/** Two executors' worth of workers running `Policies.attempt` over a shared due-time queue. */
async function drive(options: {
  adaptive: boolean;
  /** The pacer's booking horizon (ms; Infinity: every slot booked); undefined: its default. */
  bookAheadMs?: number | undefined;
  /** Pacer on but the bulkhead's limit fixed at this many calls per executor (no adaptation). */
  fixed?: number | undefined;
  tasks: () => Task | undefined;
  /** A task that ended with a result (not sent back). */
  finished?: (task: Task) => void;
  origin: string;
  /** Tasks due by `nowMs` (epoch) that arrive on a schedule of their own (the healthy origin). */
  arrivals?: (nowMs: number) => Task[];
  alsoSampled?: string[];
  stopAtMs?: number;
  expected?: number;
  /** Executors simulated in this process (default EXECUTORS), each of `workers` (default WORKERS). */
  executors?: number;
  workers?: number;
  /** The Redis key prefix (default a fresh one): executor processes of one run share it. */
  prefix?: string;
  /** Start at this epoch ms (executor processes of one run start together); default now. */
  startMs?: number;
  /** Forget the origins' pace at the end (default true; the parent does it for executor processes). */
  reset?: boolean;
}): Promise<Run> {
  const prefix = options.prefix ?? benchPrefix();
  // One pacer per executor, as in separate processes: each its own local permissions (--free-for).
  const pacers = Array.from(
    { length: options.executors ?? EXECUTORS },
    () =>
      new OriginPacer({
        redis,
        prefix: `${prefix}pace:`,
        maxLimit: PER_ORIGIN,
        retryAfterMaxMs: 60_000,
        maxLocalWaitMs: MAX_LOCAL_WAIT_MS,
        freeForMs: Number(args['free-for']),
        ...(options.bookAheadMs !== undefined ? { bookAheadMs: options.bookAheadMs } : {}),
      }),
  );
  const [pacer] = pacers as [OriginPacer];
  const breaker = new CircuitBreaker({
    redis,
    prefix: `${prefix}breaker:`,
    failureThreshold: 5,
    openMs: 5_000,
    stateCacheMs: 1_000,
  });
  const waiting: Task[] = [];
  /** Tasks parked per executor, bounded as the executor bounds them (ParkingLot.park). */
  const parked = Array.from({ length: pacers.length }, () => ({ tasks: 0, bytes: 0 }));
  if (options.startMs !== undefined) await sleep(options.startMs - Date.now());
  const run: Run = {
    leases: 0,
    gates: new Map(),
    results: 0,
    statuses: new Map(),
    calls: [],
    samples: [],
    others: new Map((options.alsoSampled ?? []).map((origin) => [origin, []])),
    startMs: options.startMs ?? Date.now(),
    endMs: 0,
  };
  const start = run.startMs;
  for (const each of pacers) {
    const gate = each.gate.bind(each);
    each.gate = async (origin, reservedMs) => {
      const asked = Date.now();
      const grant = await gate(origin, reservedMs);
      const kind: GateKind = !reservedMs
        ? grant.admitted
          ? grant.waitMs > 0
            ? 'slept'
            : 'go'
          : grant.slotMs > 0
            ? 'booked'
            : 'laned'
        : asked - reservedMs > MAX_LOCAL_WAIT_MS
          ? grant.admitted
            ? 'lane'
            : 'laneBooked'
          : grant.admitted
            ? 'went'
            : 'voided';
      count(kind);
      return grant;
    };
  }
  const http = createHttpClient({
    connectTimeoutMs: 2_000,
    responseTimeoutMs: 10_000,
    maxResponseBytes: 1 << 20,
    followRedirects: false,
    allowPrivateTargets: ['127.0.0.1'],
  });
  const timed: typeof http = {
    call: async (request, egress, hooks) => {
      const at = Date.now() - start;
      const outcome = await http.call(request, egress, hooks);
      run.calls.push({ at, ms: outcome.durationNs / 1e6, uri: request.uri });
      return outcome;
    },
    egress: (identity) => http.egress(identity),
    close: () => http.close(),
  };
  const count = (kind: GateKind) => {
    const second = Math.floor((Date.now() - start) / 1000);
    const counts = run.gates.get(second) ?? {};
    counts[kind] = (counts[kind] ?? 0) + 1;
    run.gates.set(second, counts);
  };
  const admitMany = breaker.admitMany.bind(breaker);
  breaker.admitMany = async (origins) => {
    const admissions = await admitMany(origins);
    for (const admission of admissions) if (!admission.admitted) count('breaker');
    return admissions;
  };
  const bulkhead = () => {
    const local = new LocalBulkhead({ maxPerOrigin: options.fixed ?? PER_ORIGIN });
    const acquire = local.acquire.bind(local);
    local.acquire = async (origin, limit) => {
      const grant = await acquire(origin, limit);
      if (!grant.granted) count('bulkhead');
      return grant;
    };
    return local;
  };
  const executors = pacers.map(
    (pacer) =>
      new Policies({
        http: timed,
        breaker,
        bulkhead: bulkhead(),
        retryAfterMaxMs: 60_000,
        ...(options.adaptive
          ? { pacer, adaptiveConcurrency: true }
          : options.fixed !== undefined
            ? { pacer, adaptiveConcurrency: false }
            : {}),
      }),
  );
  // A parked task comes back to a worker of its own executor only.
  const next = (executor: number): Task | undefined => {
    const now = Date.now();
    if (options.arrivals) waiting.push(...options.arrivals(now));
    let best = -1;
    for (let i = 0; i < waiting.length; i++) {
      const task = waiting[i];
      if (!task || task.due > now || (task.parkedIn !== undefined && task.parkedIn !== executor)) continue;
      if (best < 0 || task.due < (waiting[best]?.due ?? 0)) best = i;
    }
    if (best >= 0) return waiting.splice(best, 1)[0];
    return options.tasks();
  };
  const done = () =>
    (options.stopAtMs !== undefined && Date.now() - start >= options.stopAtMs) ||
    (options.expected !== undefined && run.results >= options.expected);
  const staticLimit = options.fixed ?? PER_ORIGIN;
  const sampler = setInterval(async () => {
    const snap = await pacer.snapshot(options.origin);
    run.samples.push([
      Date.now() - start,
      snap.rate ?? 0,
      options.adaptive ? (pacer.limitOf(options.origin) ?? PER_ORIGIN) : staticLimit,
      snap.floorMs ?? Number.NaN,
    ]);
    for (const [origin, points] of run.others)
      points.push([
        Date.now() - start,
        options.adaptive ? (pacer.limitOf(origin) ?? PER_ORIGIN) : staticLimit,
      ]);
  }, 100);
  /** Tasks waiting for a bulkhead slot without a worker, per executor (ParkingLot.parkForSlot). */
  const slotWaits = Array.from({ length: pacers.length }, () => 0);
  const settle = (policies: Policies, executor: number, task: Task, ending: Ending): void => {
    if (ending.kind === 'result') {
      run.results++;
      options.finished?.(task);
      const status = ending.result.response.status;
      run.statuses.set(status, (run.statuses.get(status) ?? 0) + 1);
      return;
    }
    if (
      ending.reason === 'bulkhead' &&
      !args['no-slot-wait'] &&
      (slotWaits[executor] ?? 0) < HELD_PER_WORKER * WORKERS
    ) {
      // As the executor does: the refused task waits for a slot of its origin without a worker,
      // handed one by the next call of this process to end there, then goes through the gate again.
      slotWaits[executor] = (slotWaits[executor] ?? 0) + 1;
      void (async () => {
        const slot = await policies.waitForSlot(
          task.envelope.request.uri,
          undefined,
          AbortSignal.timeout(PARK_MAX_MS),
        );
        slotWaits[executor] = (slotWaits[executor] ?? 1) - 1;
        if (!slot || done()) {
          slot?.release();
          waiting.push({
            envelope: task.envelope,
            progress: ending.progress,
            due: Date.now(),
            parkedIn: executor,
          });
          return;
        }
        settle(policies, executor, task, await policies.attempt(task.envelope, ending.progress, log, slot));
      })();
      return;
    }
    const park =
      !args['no-park'] &&
      parks(ending.reason, ending.delayMs, 0, parked[executor] ?? { tasks: 0, bytes: 0 }, PARKING);
    if (park) parked[executor] = { tasks: (parked[executor]?.tasks ?? 0) + 1, bytes: 0 };
    waiting.push({
      envelope: task.envelope,
      progress: ending.progress,
      due: Date.now() + ending.delayMs,
      ...(park ? { parkedIn: executor } : {}),
    });
  };
  const worker = async (policies: Policies, executor: number) => {
    while (!done()) {
      const task = next(executor);
      if (!task) {
        await sleep(5);
        continue;
      }
      if (task.parkedIn === undefined) run.leases++;
      else parked[executor] = { tasks: (parked[executor]?.tasks ?? 0) - 1, bytes: 0 };
      settle(policies, executor, task, await policies.attempt(task.envelope, task.progress, log));
    }
  };
  await Promise.all(
    executors.flatMap((p, executor) =>
      Array.from({ length: options.workers ?? WORKERS }, () => worker(p, executor)),
    ),
  );
  run.endMs = Date.now() - start;
  clearInterval(sampler);
  timed.close();
  if (options.reset !== false) {
    await pacer.reset(options.origin);
    for (const origin of run.others.keys()) await pacer.reset(origin);
  }
  await Promise.all(pacers.map((each) => each.close()));
  return run;
}

function benchPrefix(): string {
  return `bench:${randomBytes(4).toString('hex')}:`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

function envelope(uri: string, id: string, retry?: RequestEnvelope['meta']['retry']): RequestEnvelope {
  return parseRequestEnvelope({ request: { uri }, meta: { requestId: id, ...(retry ? { retry } : {}) } });
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
}

const QUOTA_REQUESTS = 400;
const QUOTA_RETRY = { max: 30, delay: '200ms', maxDelay: '5s', multiplier: 2, jitter: 0.2 };

/** One process's share of a quota run: the requests n with n % of = index, of the 400. */
interface QuotaSpec {
  kind: 'quota';
  adaptive: boolean;
  /** The pacer's booking horizon (ms); `bookAll`: every slot booked (Infinity does not go through JSON). */
  bookAheadMs?: number | undefined;
  bookAll?: boolean;
  url: string;
  index: number;
  of: number;
  prefix: string;
}

function quotaPart(spec: QuotaSpec, executors: number, startMs?: number): Promise<Run> {
  let n = spec.index;
  return drive({
    adaptive: spec.adaptive,
    bookAheadMs: spec.bookAll ? Number.POSITIVE_INFINITY : spec.bookAheadMs,
    origin: originOf(spec.url),
    tasks: () => {
      if (n >= QUOTA_REQUESTS) return undefined;
      const i = n;
      n += spec.of;
      return {
        envelope: envelope(`${spec.url}/q/${i}`, `q-${i}`, QUOTA_RETRY),
        progress: { tryCount: 0, waitedMs: 0 },
        due: 0,
      };
    },
    expected: Math.ceil((QUOTA_REQUESTS - spec.index) / spec.of),
    stopAtMs: 120_000,
    executors,
    prefix: spec.prefix,
    ...(startMs !== undefined ? { startMs } : {}),
    reset: false,
  });
}

/**
 * The quota target and its 400 requests, the executors each in a child process of its own (each
 * a share of the requests, as the queue would spread them), or both in this process (--in-process).
 */
async function quota(adaptive: boolean, bookAheadMs?: number) {
  const target = await startPacedTargetProcess({
    kind: 'quota',
    perWindow: Math.round((50 * WINDOW_MS) / 1000),
    windowMs: WINDOW_MS,
    retryAfterS: 1,
    ...(args.silent ? { advertise: false } : {}),
  });
  const prefix = benchPrefix();
  const spec: QuotaSpec = {
    kind: 'quota',
    adaptive,
    ...(bookAheadMs === Number.POSITIVE_INFINITY ? { bookAll: true } : { bookAheadMs }),
    url: target.url,
    index: 0,
    of: 1,
    prefix,
  };
  const run = args['in-process']
    ? await quotaPart(spec, EXECUTORS)
    : mergeRuns(
        await Promise.all(
          (
            await inChildren(
              Array.from({ length: EXECUTORS }, (_, index) => ({ ...spec, index, of: EXECUTORS })),
            )
          ).parts as Array<Promise<Run>>,
        ),
      );
  await forgetOrigins(prefix, [originOf(target.url)]);
  const arrivals = await target.arrivals();
  await target.close();
  const served = arrivals.filter((a) => a.status === 200).length;
  const refused = arrivals.length - served;
  const t0 = arrivals[0]?.at ?? 0;
  // Arrivals per 100 ms window above the target's 5: what it counted as over its limit.
  return { adaptive, run, served, refused, arrivals: arrivals.map((a) => [a.at - t0, a.status] as const) };
}

/** Forgets what the pacers of a run learnt of `origins` (its executors may be other processes). */
async function forgetOrigins(prefix: string, origins: string[]): Promise<void> {
  const forget = new OriginPacer({
    redis,
    prefix: `${prefix}pace:`,
    maxLimit: PER_ORIGIN,
    retryAfterMaxMs: 60_000,
  });
  for (const origin of origins) await forget.reset(origin);
  await forget.close();
}

/** The runs of one scenario's executor processes as one: counts summed, calls and gates merged, the samples of the first. */
function mergeRuns(parts: Run[]): Run {
  const [first] = parts as [Run];
  const gates: Gates = new Map();
  for (const part of parts)
    for (const [second, counts] of part.gates) {
      const sum = gates.get(second) ?? {};
      for (const [kind, k] of Object.entries(counts) as Array<[GateKind, number]>)
        sum[kind] = (sum[kind] ?? 0) + k;
      gates.set(second, sum);
    }
  const statuses = new Map<number, number>();
  for (const part of parts)
    for (const [status, k] of part.statuses) statuses.set(status, (statuses.get(status) ?? 0) + k);
  // The limit as the first executor saw it (the limit is one per origin, in Redis).
  return {
    ...first,
    leases: parts.reduce((a, p) => a + p.leases, 0),
    results: parts.reduce((a, p) => a + p.results, 0),
    statuses,
    gates,
    calls: parts.flatMap((p) => p.calls).sort((a, b) => a.at - b.at),
    endMs: Math.max(...parts.map((p) => p.endMs)),
  };
}

/** The healthy origin's schedule: a call every 10 ms (100/s), whatever the first origin does. */
const HEALTHY_EVERY_MS = 10;

const CAPPED = { concurrent: 8, serviceMs: Number(args['service-ms']) } as const;
/** The capped target's capacity, calls/s (1,600 at 8 × 5 ms). */
const CAPACITY = (CAPPED.concurrent * 1000) / CAPPED.serviceMs;
const HALVE_AT_MS = 6_000;
/** The capped origin's tasks in circulation per executor: as many as its workers, as many again waiting. */
const CIRCULATING = 2 * WORKERS;

/** One process's share of a capacity run: its executors, its slice of the healthy origin's schedule. */
interface CapacitySpec {
  adaptive: boolean;
  fixed?: number | undefined;
  cappedUrl: string;
  /** None: the capped origin alone (the floor's run). */
  healthyUrl?: string | undefined;
  /** Executors simulated in this process. */
  executors: number;
  workers: number;
  /** This process among `of`: it takes the healthy origin's calls h with h % of = index. */
  index: number;
  of: number;
  prefix: string;
  startMs: number;
  stopAtMs: number;
}

/** What one process ran: its calls, and the wait of each healthy call from its due time to leaving. */
interface CapacityPart {
  run: Run;
  waits: Array<{ at: number; ms: number }>;
}

async function capacityPart(spec: CapacitySpec): Promise<CapacityPart> {
  let n = 0;
  let ended = 0;
  let h = spec.index;
  /** When each of the healthy origin's calls was due (epoch ms), by URI. */
  const dueOf = new Map<string, number>();
  const t0 = spec.startMs;
  const { healthyUrl } = spec;
  const run = await drive({
    adaptive: spec.adaptive,
    bookAheadMs: BOOK_AHEAD_MS,
    fixed: spec.fixed,
    origin: originOf(spec.cappedUrl),
    alsoSampled: healthyUrl ? [originOf(healthyUrl)] : [],
    // A backlog of CIRCULATING tasks per executor: one ends, another comes. Unbounded, every task
    // a refusal sends back (the breaker's first second, the bulkhead) is replaced at once and
    // refused again, thousands of them, due before the healthy origin's calls, which then wait.
    tasks: () =>
      n - ended < CIRCULATING * spec.executors
        ? {
            envelope: envelope(`${spec.cappedUrl}/c/${spec.index}-${n}`, `c-${spec.index}-${n++}`),
            progress: { tryCount: 0, waitedMs: 0 },
            due: 0,
          }
        : undefined,
    finished: (task) => {
      if (task.envelope.request.uri.startsWith(spec.cappedUrl)) ended++;
    },
    ...(healthyUrl
      ? {
          arrivals: (now: number) => {
            const due: Task[] = [];
            for (; t0 + h * HEALTHY_EVERY_MS <= now; h += spec.of) {
              const uri = `${healthyUrl}/h/${h}`;
              dueOf.set(uri, t0 + h * HEALTHY_EVERY_MS);
              due.push({
                envelope: envelope(uri, `h-${h}`),
                progress: { tryCount: 0, waitedMs: 0 },
                due: t0 + h * HEALTHY_EVERY_MS,
              });
            }
            return due;
          },
        }
      : {}),
    stopAtMs: spec.stopAtMs,
    executors: spec.executors,
    workers: spec.workers,
    prefix: spec.prefix,
    startMs: spec.startMs,
    reset: false,
  });
  const waits = run.calls
    .filter((c) => dueOf.has(c.uri))
    .map((c) => ({ at: c.at, ms: run.startMs + c.at - (dueOf.get(c.uri) ?? 0) }));
  return { run, waits };
}

/**
 * Each executor in a child process of its own (this script, `--executor-child`), as deployed: its
 * own event loop, Policies, pacer and HTTP client, sharing Redis; the parent only starts them
 * together and gathers what they measured. --in-process: all of them in this process (before).
 */
async function capacityParts(
  base: Omit<CapacitySpec, 'startMs' | 'index' | 'of' | 'executors'>,
  executors: number,
) {
  if (args['in-process']) {
    const startMs = Date.now() + 20;
    return { startMs, parts: [capacityPart({ ...base, executors, index: 0, of: 1, startMs })] };
  }
  const specs = Array.from({ length: executors }, (_, index) => ({
    kind: 'capacity' as const,
    ...base,
    executors: 1,
    index,
    of: executors,
  }));
  const { startMs, parts } = await inChildren(specs);
  return { startMs, parts: parts as Array<Promise<CapacityPart>> };
}

/**
 * One child process (this script, `--executor-child`) per spec, started together once all are
 * ready; each answers with what it measured (a CapacityPart or a quota Run).
 */
async function inChildren(specs: Array<{ kind: 'capacity' | 'quota' }>) {
  const children = specs.map((spec) => {
    const child = fork(import.meta.filename, ['--executor-child', JSON.stringify(spec), ...passedOn()], {
      execArgv: process.execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    spawned.push(child);
    return child;
  });
  await Promise.all(children.map((child) => once(child, 'message')));
  const startMs = Date.now() + 50;
  const parts = children.map(async (child) => {
    const gathered = once(child, 'message');
    child.send({ startMs });
    const [part] = (await gathered) as [unknown];
    return part;
  });
  return { startMs, parts };
}

/** The options an executor process must run with as this one does. */
function passedOn(): string[] {
  const out: string[] = ['--free-for', String(args['free-for'])];
  if (args['book-ahead'] !== undefined) out.push('--book-ahead', String(args['book-ahead']));
  if (args['no-park']) out.push('--no-park');
  if (args['no-slot-wait']) out.push('--no-slot-wait');
  if (args['park-per-worker'] !== undefined) out.push('--park-per-worker', String(args['park-per-worker']));
  if (args['park-max'] !== undefined) out.push('--park-max', String(args['park-max']));
  return out;
}

/**
 * One capacity run: the capped target (C = 8 × 5 ms, halved at 6 s) and, unless `shape.healthy`
 * is false, the healthy one, both in child processes. With `shape` { executors: 1, workers: 1,
 * healthy: false }: the floor, one call at a time.
 */
async function capacity(
  adaptive: boolean,
  fixed?: number,
  shape: { executors: number; workers: number; healthy: boolean; stopAtMs: number } = {
    executors: EXECUTORS,
    workers: WORKERS,
    healthy: true,
    stopAtMs: 12_000,
  },
) {
  const target = await startPacedTargetProcess({ kind: 'capacity', ...CAPPED });
  const healthy = shape.healthy
    ? await startPacedTargetProcess({ kind: 'capacity', concurrent: 64, serviceMs: 1 })
    : undefined;
  const prefix = benchPrefix();
  const { startMs, parts: pending } = await capacityParts(
    {
      adaptive,
      fixed,
      cappedUrl: target.url,
      healthyUrl: healthy?.url,
      workers: shape.workers,
      prefix,
      stopAtMs: shape.stopAtMs,
    },
    shape.executors,
  );
  const halve = setTimeout(
    () => target.setConcurrent(CAPPED.concurrent / 2),
    startMs + HALVE_AT_MS - Date.now(),
  );
  const parts = await Promise.all(pending);
  clearTimeout(halve);
  await forgetOrigins(prefix, [originOf(target.url), ...(healthy ? [originOf(healthy.url)] : [])]);
  // At the target: from arrival to answer (its queue + service), none of the client's time.
  const atTarget = async (t: RemotePacedTarget) =>
    (await t.arrivals())
      .filter((a) => typeof a.ms === 'number' && Number.isFinite(a.ms))
      .map((a) => ({ at: a.at - startMs, ms: a.ms }));
  const targetCapped = await atTarget(target);
  const targetHealthy = healthy ? await atTarget(healthy) : [];
  await Promise.all([target.close(), healthy?.close()]);
  const run = mergeRuns(parts.map((part) => part.run));
  const healthyUri = healthy ? `${healthy.url}/` : undefined;
  const ofHealthy = (uri: string) => healthyUri !== undefined && uri.startsWith(healthyUri);
  return {
    adaptive,
    fixed,
    run,
    capped: run.calls.filter((c) => !ofHealthy(c.uri)),
    healthy: run.calls.filter((c) => ofHealthy(c.uri)),
    waits: parts.flatMap((p) => p.waits).sort((a, b) => a.at - b.at),
    healthyLimits: healthy ? (run.others.get(originOf(healthy.url)) ?? []) : [],
    targetCapped,
    targetHealthy,
  };
}

function perSecond(points: Array<[number, number]>, endMs: number, reduce: (ys: number[]) => number) {
  const out: Array<[number, number]> = [];
  for (let s = 0; s * 1000 < endMs; s++) {
    const ys = points.filter(([x]) => x >= s * 1000 && x < (s + 1) * 1000).map(([, y]) => y);
    out.push([s + 0.5, ys.length === 0 ? 0 : reduce(ys)]);
  }
  return out;
}

const GATE_KINDS: GateKind[] = [
  'go',
  'slept',
  'booked',
  'laned',
  'went',
  'voided',
  'lane',
  'laneBooked',
  'bulkhead',
  'breaker',
];

function gateTotals(gates: Gates): string {
  const totals = GATE_KINDS.map((kind) => {
    let n = 0;
    for (const counts of gates.values()) n += counts[kind] ?? 0;
    return `${kind} ${n}`;
  });
  return totals.join(', ');
}

/** One line a second: calls and 429s at the target, the shared pace (median), the gate's answers. */
function detail(r: Awaited<ReturnType<typeof quota>>): string {
  const lines = [
    `| s | calls | 429 | pace | ${GATE_KINDS.join(' | ')} |`,
    `|${'---|'.repeat(4 + GATE_KINDS.length)}`,
  ];
  for (let second = 0; second * 1000 < r.run.endMs; second++) {
    const inSecond = ([t]: readonly [number, ...unknown[]]) => t >= second * 1000 && t < (second + 1) * 1000;
    const calls = r.arrivals.filter(inSecond);
    const paces = r.run.samples.filter(inSecond).map(([, rate]) => rate);
    const counts = r.run.gates.get(second) ?? {};
    lines.push(
      `| ${second} | ${calls.length} | ${calls.filter(([, s]) => s === 429).length} | ${percentile(paces, 50).toFixed(1)} | ${GATE_KINDS.map((k) => counts[k] ?? 0).join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

const details: string[] = [];
const panels: Panel[] = [];
const BLUE = '#1f77b4';
const ORANGE = '#ff7f0e';
const GREEN = '#2ca02c';
const RED = '#d62728';
const PURPLE = '#9467bd';
if (args['executor-child'] !== undefined) {
  // One executor process of a run: ready, then started with the others at the same instant.
  const spec = JSON.parse(args['executor-child']) as
    | (Omit<CapacitySpec, 'startMs'> & { kind: 'capacity' })
    | QuotaSpec;
  const go = once(process, 'message');
  process.send?.({ ready: true });
  const [{ startMs }] = (await go) as [{ startMs: number }];
  const part =
    spec.kind === 'quota' ? await quotaPart(spec, 1, startMs) : await capacityPart({ ...spec, startMs });
  process.send?.(part, () => {
    redis.disconnect();
    process.exit(0);
  });
  await new Promise(() => {});
}

console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, node ${process.version}`);

if (args.scenario === 'quota' || args.scenario === 'all') {
  const rounds = Math.max(1, Number(args.rounds));
  console.log(
    `\nquota target: 50/s (${Math.round((50 * WINDOW_MS) / 1000)} per ${WINDOW_MS} ms), 429 + Retry-After: 1${args.silent ? '' : ' + RateLimit-Policy'} above; 400 requests; ${rounds} round(s), sides alternating, every other round in reverse order`,
  );
  /** The sides of one round: the pacer as configured, every slot booked (--book-all), no pacer. */
  const sides: Array<{ side: string; adaptive: boolean; bookAheadMs?: number | undefined }> = [
    {
      side: BOOK_AHEAD_MS === undefined ? 'on' : `on, book ahead ${BOOK_AHEAD_MS} ms`,
      adaptive: true,
      bookAheadMs: BOOK_AHEAD_MS,
    },
    ...(args['book-all']
      ? [{ side: 'on, every slot booked (before)', adaptive: true, bookAheadMs: Number.POSITIVE_INFINITY }]
      : []),
    { side: 'off', adaptive: false },
  ];
  type QuotaRow = {
    late429: number;
    /** 429s from 3 s on: after the pace is learnt (converged), what its probes and the jitter cost. */
    converged429: number;
    done: number;
    finished: boolean;
    served: number;
    refused: number;
    rate: number;
    leases: number;
    gates: number;
  };
  const rows = new Map<string, QuotaRow[]>(sides.map((s) => [s.side, []]));
  const lines: string[] = [];
  for (let round = 0; round < rounds; round++) {
    // Every other round in the reverse order: the first run after a pause finds a colder machine.
    for (const { side, adaptive, bookAheadMs } of round % 2 === 0 ? sides : [...sides].reverse()) {
      const r = await quota(adaptive, bookAheadMs);
      const after = r.arrivals.filter(([t]) => t >= 2_000);
      const span = ((after.at(-1)?.[0] ?? 2_000) - 2_000) / 1000;
      // Every gate answer is one gate call (one Redis round trip); bulkhead and breaker are not the gate's.
      let gates = 0;
      let admitted = 0;
      for (const counts of r.run.gates.values()) {
        for (const kind of GATE_KINDS)
          if (kind !== 'bulkhead' && kind !== 'breaker') gates += counts[kind] ?? 0;
        admitted += (counts.go ?? 0) + (counts.slept ?? 0) + (counts.went ?? 0) + (counts.lane ?? 0);
      }
      const row: QuotaRow = {
        done: r.run.endMs / 1000,
        finished: r.run.results >= 400,
        served: r.served,
        refused: r.refused,
        // The first second's 429s answer the burst sent before any pace was learnt (the same on every side).
        late429: r.arrivals.filter(([t, status]) => t >= 1_000 && status === 429).length,
        converged429: r.arrivals.filter(([t, status]) => t >= 3_000 && status === 429).length,
        rate: span > 0 ? after.length / span : Number.NaN,
        leases: r.run.leases / Math.max(1, r.run.results),
        gates: gates / Math.max(1, r.run.results),
      };
      rows.get(side)?.push(row);
      lines.push(
        `| ${side}${rounds > 1 ? ` (round ${round + 1})` : ''} | ${row.finished ? `${row.done.toFixed(1)} s` : `not (${r.run.results} in 120 s)`} | ${row.served} | ${row.refused} | ${row.late429} | ${row.converged429} | ${((100 * row.refused) / Math.max(1, row.served)).toFixed(1)} % | ${row.rate.toFixed(1)} | ${row.leases.toFixed(2)} | ${adaptive ? row.gates.toFixed(2) : '-'} |`,
      );
      if (adaptive)
        lines.push(
          `|  | gate answers: ${gateTotals(r.run.gates)}; admitted but not called ${admitted - r.run.calls.length} |`,
        );
      if (adaptive && args.detail) details.push(`${side}, round ${round + 1}\n${detail(r)}`);
      if (round > 0) continue;
      const xs = r.arrivals.map(([t, s]) => [t, s] as [number, number]);
      panels.push({
        title: `quota target, ${side}: calls per second at the target`,
        yLabel: 'calls/s',
        series: [
          {
            name: 'served (200)',
            points: perSecond(
              xs.filter(([, s]) => s === 200),
              r.run.endMs,
              (ys) => ys.length,
            ),
            color: adaptive ? BLUE : ORANGE,
          },
          {
            name: 'refused (429)',
            points: perSecond(
              xs.filter(([, s]) => s === 429),
              r.run.endMs,
              (ys) => ys.length,
            ),
            color: RED,
          },
          ...(adaptive
            ? [
                {
                  name: 'shared pace',
                  points: r.run.samples.map(([t, rate]) => [t / 1000, rate] as [number, number]),
                  color: GREEN,
                },
              ]
            : []),
        ],
        yMax: 100,
      });
    }
  }
  console.log(
    '| adaptation | all 400 done in | served | 429 | 429 after 1 s | 429 after 3 s | 429 / served | calls/s after 2 s | leases / request | gate calls / request |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const line of lines) console.log(line);
  if (rounds > 1)
    for (const [side, all] of rows) {
      const med = (pick: (row: QuotaRow) => number) => percentile(all.map(pick), 50);
      console.log(
        `| **${side}, median of ${rounds}** | ${med((x) => (x.finished ? x.done : Number.POSITIVE_INFINITY)).toFixed(1)} s | ${med((x) => x.served)} | ${med((x) => x.refused)} | ${med((x) => x.late429)} | ${med((x) => x.converged429)} | ${med((x) => (100 * x.refused) / Math.max(1, x.served)).toFixed(1)} % | ${med((x) => x.rate).toFixed(1)} | ${med((x) => x.leases).toFixed(2)} | ${all.some((x) => x.gates > 0) ? med((x) => x.gates).toFixed(2) : '-'} |`,
      );
    }
}

for (const table of details) console.log(`\nquota target, adaptation on, per second:\n${table}`);

if (args.scenario === 'capacity' || args.scenario === 'all') {
  type Capacity = Awaited<ReturnType<typeof capacity>>;
  const rounds = Math.max(1, Number(args.rounds));
  const mean = (ys: number[]) => (ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : Number.NaN);
  const median = (ys: number[]) => (ys.length ? percentile(ys, 50) : Number.NaN);
  const within = <T extends { at: number }>(xs: T[], from: number, to: number) =>
    xs.filter((x) => x.at >= from && x.at < to);
  const windows: Array<[number, number]> = [
    [3_000, 6_000],
    [9_000, 12_000],
  ];
  /** The figures of one run in one window, for the capped origin and the healthy one. */
  const figures = (r: Capacity, [from, to]: [number, number]) => {
    const ms = within(r.capped, from, to).map((c) => c.ms);
    const atTarget = within(r.targetCapped, from, to).map((c) => c.ms);
    const healthy = within(r.healthy, from, to).map((c) => c.ms);
    return {
      limit: mean(r.run.samples.filter(([t]) => t >= from && t < to).map(([, , l]) => l)),
      // The pacer's latency floor (the probe's), learnt with adaptation on only.
      floor: median(
        r.adaptive
          ? r.run.samples
              .filter(([t, , , f]) => t >= from && t < to && !Number.isNaN(f))
              .map(([, , , f]) => f)
          : [],
      ),
      rate: ms.length / ((to - from) / 1000),
      p50: percentile(ms, 50),
      p99: percentile(ms, 99),
      // Calls at the target on average (Little's law: the time they spent there over the window's).
      targetInFlight: atTarget.reduce((a, b) => a + b, 0) / (to - from),
      targetP50: percentile(atTarget, 50),
      targetP99: percentile(atTarget, 99),
      healthyLimit: mean(r.healthyLimits.filter(([t]) => t >= from && t < to).map(([, l]) => l)),
      healthyRate: healthy.length / ((to - from) / 1000),
      healthyP50: percentile(healthy, 50),
      healthyP99: percentile(healthy, 99),
      healthyTargetP99: percentile(
        within(r.targetHealthy, from, to).map((c) => c.ms),
        99,
      ),
      healthyWaitP99: percentile(
        within(r.waits, from, to).map((w) => w.ms),
        99,
      ),
    };
  };
  type Figures = ReturnType<typeof figures>;
  const cells = (f: Figures) => ({
    capped: `${f.limit.toFixed(1)} | ${Number.isNaN(f.floor) ? '-' : f.floor.toFixed(1)} | ${f.rate.toFixed(0)} | ${f.p50.toFixed(1)} / ${f.p99.toFixed(1)} | ${f.targetP50.toFixed(1)} / ${f.targetP99.toFixed(1)}`,
    healthy: `${f.healthyLimit.toFixed(1)} | ${f.healthyRate.toFixed(0)} | ${f.healthyP50.toFixed(1)} / ${f.healthyP99.toFixed(1)} | ${f.healthyTargetP99.toFixed(1)} | ${f.healthyWaitP99.toFixed(1)}`,
  });
  const fixedLimits = (args.fixed ?? '')
    .split(',')
    .filter((n) => n.trim() !== '')
    .map(Number);
  if (fixedLimits.some((n) => !Number.isInteger(n) || n < 1))
    fail(`--fixed must list positive integers, got ${args.fixed}`);
  /** The modes of one round: on, off, then each fixed limit (the pacer on, its limit not applied). */
  const modes: Array<{ side: string; adaptive: boolean; fixed?: number }> = [
    { side: 'on', adaptive: true },
    { side: 'off', adaptive: false },
    ...fixedLimits.map((n) => ({ side: `fixed ${n}`, adaptive: false, fixed: n })),
  ];
  const results: Capacity[] = [];
  /** The floor of each round: one call at a time (one executor, one worker), 1–3 s. */
  const floors: Array<{ client: number[]; target: number[] }> = [];
  console.log(
    `\ncapacity: load average ${loadavg()} at the start; executors ${args['in-process'] ? 'in this one process' : 'each in a child process of its own'}`,
  );
  for (let round = 0; round < rounds; round++) {
    const alone = await capacity(false, undefined, {
      executors: 1,
      workers: 1,
      healthy: false,
      stopAtMs: 3_000,
    });
    floors.push({
      client: within(alone.capped, 1_000, 3_000).map((c) => c.ms),
      target: within(alone.targetCapped, 1_000, 3_000).map((c) => c.ms),
    });
    // Every other round in the reverse order: the first run after a pause finds a colder machine.
    for (const mode of round % 2 === 0 ? modes : [...modes].reverse())
      results.push(await capacity(mode.adaptive, mode.fixed));
  }
  console.log(`capacity: load average ${loadavg()} at the end`);
  const floorClient = median(floors.map((f) => percentile(f.client, 50)));
  const floorTarget = median(floors.map((f) => percentile(f.target, 50)));
  console.log(
    `\nfloor (one call at a time, 1–3 s, median of ${rounds} round(s)): client p50 ${floorClient.toFixed(2)} ms (p99 ${median(floors.map((f) => percentile(f.client, 99))).toFixed(2)}), at the target p50 ${floorTarget.toFixed(2)} ms (p99 ${median(floors.map((f) => percentile(f.target, 99))).toFixed(2)}); rounds: ${floors.map((f) => `${percentile(f.client, 50).toFixed(2)} / ${percentile(f.target, 50).toFixed(2)}`).join(', ')}`,
  );
  const rows = (label: string, f: Figures[]) => ({ label, f });
  const table: Array<ReturnType<typeof rows>> = [];
  for (const { side, adaptive, fixed } of modes) {
    const mine = results.filter((r) => r.adaptive === adaptive && r.fixed === fixed);
    mine.forEach((r, k) => {
      table.push(
        rows(
          rounds > 1 ? `${side} (round ${k + 1})` : side,
          windows.map((w) => figures(r, w)),
        ),
      );
    });
    if (rounds > 1) {
      // The median of each figure over the rounds (not the figures of one median run).
      const all = mine.map((r) => windows.map((w) => figures(r, w)));
      const med = windows.map((_, wi) => {
        const keys = Object.keys(all[0]?.[wi] ?? {}) as Array<keyof Figures>;
        return Object.fromEntries(
          keys.map((k) => [k, median(all.map((a) => a[wi]?.[k] ?? Number.NaN))]),
        ) as Figures;
      });
      table.push(rows(`**${side}, median of ${rounds}**`, med));
    }
  }
  console.log(
    `\ncapacity target: 8 at once × ${CAPPED.serviceMs} ms (${CAPACITY}/s), halved to 4 at 6 s; 2 × 16 workers, 12 s; ${rounds} round(s), sides alternating, every other round in reverse order (client: the call's latency in the executor; target: arrival to answer there)`,
  );
  console.log(
    '| adaptation | limit 3–6 s | floor ms 3–6 s | calls/s 3–6 s | client p50 / p99 ms 3–6 s | target p50 / p99 ms 3–6 s | limit 9–12 s | floor ms 9–12 s | calls/s 9–12 s | client p50 / p99 ms 9–12 s | target p50 / p99 ms 9–12 s |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of table) console.log(`| ${row.label} | ${row.f.map((f) => cells(f).capped).join(' | ')} |`);
  console.log(
    `\nagainst the goals (medians): goodput % of C/${CAPPED.serviceMs} ms 3–6 s (${CAPACITY}/s) | of C/2 9–12 s (${CAPACITY / 2}/s) | p99 / floor at the target 3–6 s | 9–12 s | p99 / floor at the client 3–6 s | 9–12 s | calls at the target (mean) 3–6 s | 9–12 s | limit of both executors 3–6 s | 9–12 s`,
  );
  for (const row of table.filter((t) => rounds === 1 || t.label.startsWith('**'))) {
    const [a, b] = row.f as [Figures, Figures];
    console.log(
      `| ${row.label} | ${((100 * a.rate) / CAPACITY).toFixed(1)} % | ${((100 * b.rate) / (CAPACITY / 2)).toFixed(1)} % | ${(a.targetP99 / floorTarget).toFixed(2)} | ${(b.targetP99 / floorTarget).toFixed(2)} | ${(a.p99 / floorClient).toFixed(2)} | ${(b.p99 / floorClient).toFixed(2)} | ${a.targetInFlight.toFixed(1)} | ${b.targetInFlight.toFixed(1)} | ${(EXECUTORS * a.limit).toFixed(1)} | ${(EXECUTORS * b.limit).toFixed(1)} |`,
    );
  }
  console.log(
    `\nhealthy origin, same workers throughout: 64 at once × 1 ms, ${1000 / HEALTHY_EVERY_MS} calls/s on a schedule (wait: from due to leaving, for a worker and the policies)`,
  );
  console.log(
    '| adaptation | limit 3–6 s | calls/s 3–6 s | client p50 / p99 ms 3–6 s | target p99 ms 3–6 s | wait p99 ms 3–6 s | limit 9–12 s | calls/s 9–12 s | client p50 / p99 ms 9–12 s | target p99 ms 9–12 s | wait p99 ms 9–12 s |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of table)
    console.log(`| ${row.label} | ${row.f.map((f) => cells(f).healthy).join(' | ')} |`);

  for (const r of results.slice(0, 2)) {
    const adaptive = r.adaptive;
    const side = adaptive ? 'adaptation on' : 'adaptation off';
    const color = adaptive ? BLUE : ORANGE;
    const points = (xs: Array<{ at: number; ms: number }>) => xs.map((x) => [x.at, x.ms] as [number, number]);
    panels.push({
      title: `capacity, ${side}: ${adaptive ? 'the learnt' : 'the static'} concurrency limit of one executor, per origin`,
      yLabel: 'calls in flight',
      series: [
        {
          name: 'capped origin',
          points: r.run.samples.map(([t, , l]) => [t / 1000, l] as [number, number]),
          color,
        },
        {
          name: 'healthy origin',
          points: r.healthyLimits.map(([t, l]) => [t / 1000, l] as [number, number]),
          color: PURPLE,
          dash: '6 4',
        },
      ],
      yMax: 2 * PER_ORIGIN,
    });
    panels.push({
      title: `capacity, ${side}: the capped origin's call latency per second (its capacity halves at 6 s)`,
      yLabel: 'latency (ms)',
      series: [
        {
          name: 'p99 at the client',
          points: perSecond(points(r.capped), r.run.endMs, (ys) => percentile(ys, 99)),
          color,
        },
        {
          name: 'p50 at the client',
          points: perSecond(points(r.capped), r.run.endMs, (ys) => percentile(ys, 50)),
          color: GREEN,
        },
        {
          name: 'p99 at the target',
          points: perSecond(points(r.targetCapped), r.run.endMs, (ys) => percentile(ys, 99)),
          color: RED,
          dash: '6 4',
        },
      ],
      yMax: 60,
    });
    panels.push({
      title: `capacity, ${side}: calls per second answered by each origin`,
      yLabel: 'calls/s',
      series: [
        { name: 'capped origin', points: perSecond(points(r.capped), r.run.endMs, (ys) => ys.length), color },
        {
          name: 'healthy origin',
          points: perSecond(points(r.healthy), r.run.endMs, (ys) => ys.length),
          color: PURPLE,
          dash: '6 4',
        },
      ],
      yMax: 2_000,
    });
    panels.push({
      title: `capacity, ${side}: the healthy origin (1 ms) per second, p99 of its latency and of its wait to leave`,
      yLabel: 'ms',
      series: [
        {
          name: 'latency p99',
          points: perSecond(points(r.healthy), r.run.endMs, (ys) => percentile(ys, 99)),
          color: PURPLE,
        },
        {
          name: 'wait p99',
          points: perSecond(points(r.waits), r.run.endMs, (ys) => percentile(ys, 99)),
          color: RED,
        },
      ],
      yMax: 60,
    });
  }
}

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
process.exit(0);

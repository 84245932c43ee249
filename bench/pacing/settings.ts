// The command line of bench/pacing.ts and the settings every part of the bench reads.
import { DEFAULT_PARKING } from '../../packages/executor/src/worker/index.ts';
import { parseBenchArgs } from '../harness.ts';

export const { values: args, fail } = parseBenchArgs({
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
export const EXECUTORS = 2;
export const WORKERS = 16;
export const PER_ORIGIN = 16;
export const PARKING = {
  ...DEFAULT_PARKING,
  ...(args['park-per-worker'] !== undefined ? { tasks: Number(args['park-per-worker']) * WORKERS } : {}),
  ...(args['park-max'] !== undefined ? { tasks: Number(args['park-max']) } : {}),
};
/** OriginPacer's default local wait: a slot within it is slept for, a later one reserved. */
export const MAX_LOCAL_WAIT_MS = 250;
export const WINDOW_MS = Number(args['window-ms']);
if (!(Number(args['service-ms']) >= 1 && Number(args['service-ms']) <= 1_000))
  fail(`--service-ms must be 1–1000, got ${args['service-ms']}`);
if (!(WINDOW_MS >= 20 && WINDOW_MS <= 10_000)) fail(`--window-ms must be 20–10000, got ${args['window-ms']}`);
export const BOOK_AHEAD_MS = args['book-ahead'] !== undefined ? Number(args['book-ahead']) : undefined;

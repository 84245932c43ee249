// The simulated executors: the worker's very `Policies` over an in-memory due-time queue.
import { LocalBulkhead } from '../../packages/executor/src/bulkhead/index.ts';
import { createHttpClient } from '../../packages/executor/src/http/index.ts';
import { PARK_MAX_MS, parks } from '../../packages/executor/src/worker/decide.ts';
import { HELD_PER_WORKER } from '../../packages/executor/src/worker/index.ts';
import { type Outcome, Policies } from '../../packages/executor/src/worker/policies.ts';
import { CircuitBreaker, OriginPacer } from '../../packages/policies/src/index.ts';
import { args, EXECUTORS, MAX_LOCAL_WAIT_MS, PARKING, PER_ORIGIN, WORKERS } from './settings.ts';
import { benchPrefix, type GateKind, log, type Run, redis, sleep, type Task } from './support.ts';

/** Two executors' worth of workers running `Policies.attempt` over a shared due-time queue. */
export async function drive(options: {
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
  const settle = (policies: Policies, executor: number, task: Task, ending: Outcome): void => {
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

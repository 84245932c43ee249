// The capacity scenario: a target of capacity C halved mid-run, and a healthy origin served by the
// same workers throughout.
import { originOf } from '../../packages/policies/src/index.ts';
import { type RemotePacedTarget, startPacedTargetProcess } from '../../packages/shared/src/testing/index.ts';
import { loadavg } from '../harness.ts';
import type { Panel } from '../plot.ts';
import { inChildren } from './children.ts';
import { drive } from './drive.ts';
import { args, BOOK_AHEAD_MS, EXECUTORS, fail, PER_ORIGIN, WORKERS } from './settings.ts';
import {
  BLUE,
  benchPrefix,
  envelope,
  forgetOrigins,
  GREEN,
  mergeRuns,
  ORANGE,
  PURPLE,
  percentile,
  perSecond,
  RED,
  type Run,
  type Task,
} from './support.ts';

/** The healthy origin's schedule: a call every 10 ms (100/s), whatever the first origin does. */
const HEALTHY_EVERY_MS = 10;

const CAPPED = { concurrent: 8, serviceMs: Number(args['service-ms']) } as const;
/** The capped target's capacity, calls/s (1,600 at 8 × 5 ms). */
const CAPACITY = (CAPPED.concurrent * 1000) / CAPPED.serviceMs;
const HALVE_AT_MS = 6_000;
/** The capped origin's tasks in circulation per executor: as many as its workers, as many again waiting. */
const CIRCULATING = 2 * WORKERS;

/** One process's share of a capacity run: its executors, its slice of the healthy origin's schedule. */
export interface CapacitySpec {
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

export async function capacityPart(spec: CapacitySpec): Promise<CapacityPart> {
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
 * together and gathers what they measured. --in-process: all of them in this process.
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

/** The capacity scenario's rounds (each with its floor first), its tables printed, its plot panels added to `panels`. */
export async function runCapacity(panels: Panel[]): Promise<void> {
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

// The quota scenario: a target serving 50 calls/s that answers 429 + Retry-After above it.
import { originOf } from '../../packages/policies/src/index.ts';
import { startPacedTargetProcess } from '../../packages/shared/src/testing/index.ts';
import type { Panel } from '../plot.ts';
import { inChildren } from './children.ts';
import { drive } from './drive.ts';
import { args, BOOK_AHEAD_MS, EXECUTORS, WINDOW_MS } from './settings.ts';
import {
  BLUE,
  benchPrefix,
  envelope,
  forgetOrigins,
  GATE_KINDS,
  type Gates,
  GREEN,
  mergeRuns,
  ORANGE,
  percentile,
  perSecond,
  RED,
  type Run,
} from './support.ts';

const QUOTA_REQUESTS = 400;
const QUOTA_RETRY = { max: 30, delay: '200ms', maxDelay: '5s', multiplier: 2, jitter: 0.2 };

/** One process's share of a quota run: the requests n with n % of = index, of the 400. */
export interface QuotaSpec {
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

export function quotaPart(spec: QuotaSpec, executors: number, startMs?: number): Promise<Run> {
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

/**
 * The quota scenario's rounds, its tables printed, its plot panels added to `panels`; returns the
 * per-second tables of --detail, printed after it.
 */
export async function runQuota(panels: Panel[]): Promise<string[]> {
  const details: string[] = [];
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
  return details;
}

import { registry } from '@requester/shared';

/**
 * Throughput and latency of this process, from its own metrics registry (read in-process, no
 * scrape): the executor's settled tasks and target-call durations, the HTTP API's requests, and
 * any consumer-lag gauge the roles declare. Sampled every `everyMs` into a short ring for the
 * overview's chart; rates are deltas between samples (a process restart starts over).
 */
export interface LiveSample {
  /** Epoch seconds. */
  t: number;
  /** Tasks settled by the executor per second. */
  settledPerS: number;
  /** HTTP API requests per second. */
  httpPerS: number;
  /** Mean and ~p95 duration of target calls over the last interval (ms); null when none. */
  latencyMeanMs: number | null;
  latencyP95Ms: number | null;
  /** Tasks leased and not yet settled by this process's executor. */
  inFlight: number;
  /** Sum of the gauges named *lag* (records behind on `in`), null when no role declares one. */
  lag: number | null;
}

interface Totals {
  settled: number;
  http: number;
  latencySum: number;
  latencyCount: number;
  buckets: Map<number, number>;
  inFlight: number;
  lag: number | null;
}

type MetricJson = Awaited<ReturnType<typeof registry.getMetricsAsJSON>>[number];
type MetricValue = { value: number; labels: Record<string, string | number>; metricName?: string };

const valuesOf = (metric: MetricJson | undefined): MetricValue[] =>
  ((metric as { values?: MetricValue[] } | undefined)?.values ?? []) as MetricValue[];

const TOTALS = [
  'requester_executor_tasks_total',
  'requester_http_requests_total',
  'requester_executor_http_seconds',
  'requester_executor_in_flight',
];

/**
 * The metrics the totals read, and the consumer-lag gauges (records behind), not the event loop's
 * lag (seconds). Read one by one: the whole registry's JSON would run every collector of the
 * process (a few ms per sample, most of an idle Requester's JavaScript outside Kafka's fetches).
 */
async function readMetrics(): Promise<Map<string, MetricJson>> {
  const wanted = registry
    .getMetricsAsArray()
    .filter(
      (m) =>
        TOTALS.includes(m.name) ||
        (/lag/.test(m.name) && !/eventloop/.test(m.name) && String(m.type) === 'gauge'),
    );
  const read = await Promise.all(wanted.map((m) => registry.getSingleMetric(m.name)?.get()));
  return new Map(read.filter((m) => m !== undefined).map((m) => [m.name, m as MetricJson]));
}

async function readTotals(): Promise<Totals> {
  const byName = await readMetrics();
  const sum = (name: string, keep: (v: MetricValue) => boolean = () => true) =>
    valuesOf(byName.get(name))
      .filter(keep)
      .reduce((a, v) => a + v.value, 0);
  const histogram = valuesOf(byName.get('requester_executor_http_seconds'));
  const buckets = new Map<number, number>();
  for (const v of histogram) {
    if (!v.metricName?.endsWith('_bucket')) continue;
    const le = v.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(v.labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + v.value);
  }
  const lagMetrics = [...byName.values()].filter((m) => !TOTALS.includes(m.name));
  return {
    settled: sum('requester_executor_tasks_total'),
    http: sum('requester_http_requests_total'),
    latencySum: histogram.filter((v) => v.metricName?.endsWith('_sum')).reduce((a, v) => a + v.value, 0),
    latencyCount: histogram.filter((v) => v.metricName?.endsWith('_count')).reduce((a, v) => a + v.value, 0),
    buckets,
    inFlight: sum('requester_executor_in_flight'),
    lag: lagMetrics.length ? lagMetrics.flatMap(valuesOf).reduce((a, v) => a + v.value, 0) : null,
  };
}

/** The upper bound (ms) of the bucket holding the 95th percentile of the calls between two reads. */
function p95Ms(before: Map<number, number>, after: Map<number, number>, count: number): number | null {
  if (count <= 0) return null;
  const bounds = [...after.keys()].sort((a, b) => a - b);
  for (const le of bounds) {
    if ((after.get(le) ?? 0) - (before.get(le) ?? 0) >= 0.95 * count)
      return Number.isFinite(le) ? le * 1000 : null;
  }
  return null;
}

export class LiveMetrics {
  readonly #samples: LiveSample[] = [];
  readonly #size: number;
  readonly #everyMs: number;
  #last: { at: number; totals: Totals } | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: { everyMs?: number; size?: number } = {}) {
    this.#everyMs = options.everyMs ?? 2_000;
    this.#size = options.size ?? 150;
  }

  /** Starts sampling (idempotent); the timer never keeps the process alive. */
  start(): void {
    if (this.#timer) return;
    // A failed read (a collector that threw) only leaves a gap in the chart.
    const sample = () => void this.sample().catch(() => {});
    sample();
    this.#timer = setInterval(sample, this.#everyMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  samples(): readonly LiveSample[] {
    return this.#samples;
  }

  latest(): LiveSample | undefined {
    return this.#samples.at(-1);
  }

  async sample(): Promise<void> {
    const at = Date.now();
    const totals = await readTotals();
    const last = this.#last;
    this.#last = { at, totals };
    if (!last) return;
    const seconds = Math.max(0.001, (at - last.at) / 1000);
    const calls = totals.latencyCount - last.totals.latencyCount;
    this.#samples.push({
      t: Math.round(at / 1000),
      settledPerS: Math.max(0, (totals.settled - last.totals.settled) / seconds),
      httpPerS: Math.max(0, (totals.http - last.totals.http) / seconds),
      latencyMeanMs: calls > 0 ? ((totals.latencySum - last.totals.latencySum) / calls) * 1000 : null,
      latencyP95Ms: p95Ms(last.totals.buckets, totals.buckets, calls),
      inFlight: totals.inFlight,
      lag: totals.lag,
    });
    if (this.#samples.length > this.#size) this.#samples.shift();
  }
}

import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';

/**
 * The one Prometheus registry of a process. Modules declare their metrics through these helpers
 * so that a metric is created once even when several roles share the process; names are prefixed
 * `requester_`. The metrics table is docs/metrics.md.
 */
export const registry = new Registry();
let defaultsCollected = false;

/**
 * prom-client's default metrics that are gauges but named `_total` (promtool rejects them: the
 * suffix promises a counter). Each has a per-type gauge beside it (`…_active_handles{type}` etc.),
 * whose sum is the same number, so nothing is lost by dropping them.
 */
export const DROPPED_DEFAULT_METRICS = [
  'requester_nodejs_active_handles_total',
  'requester_nodejs_active_requests_total',
  'requester_nodejs_active_resources_total',
] as const;

export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry, prefix: 'requester_' });
  for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);
}

/**
 * Default histogram buckets (seconds): from 1 ms (a Redis round trip) to 60 s, beyond the longest
 * call a target may take (TARGET_RESPONSE_TIMEOUT up to 30 s, plus connect and retries of a fill).
 */
export const DEFAULT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60];

function existing<T>(name: string): T | undefined {
  return registry.getSingleMetric(name) as T | undefined;
}

export function counter<L extends string>(
  name: string,
  help: string,
  labelNames: readonly L[] = [],
): Counter<L> {
  const full = `requester_${name}`;
  return existing<Counter<L>>(full) ?? new Counter({ name: full, help, labelNames, registers: [registry] });
}

export function gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  const full = `requester_${name}`;
  return existing<Gauge<L>>(full) ?? new Gauge({ name: full, help, labelNames, registers: [registry] });
}

export function histogram<L extends string>(
  name: string,
  help: string,
  labelNames: readonly L[] = [],
  buckets: number[] = DEFAULT_BUCKETS,
): Histogram<L> {
  const full = `requester_${name}`;
  return (
    existing<Histogram<L>>(full) ??
    new Histogram({ name: full, help, labelNames, buckets, registers: [registry] })
  );
}

/** The label value of values not admitted by a BoundedLabel. */
export const OTHER_LABEL = 'other';

/**
 * A label whose values are user input (target origins): the first `max` distinct values seen get
 * their own label value, every later one is `other`. Why not an LRU: a series, once exported,
 * stays in the registry (and in Prometheus) until the process ends, so evicting a value would not
 * bound the series — it would only make one origin's counter jump between its name and `other`.
 * First-come keeps each value's series stable for the life of the process; the busy origins of a
 * service are seen in its first minutes, and a restart re-admits what is busy now.
 */
export class BoundedLabel {
  private readonly admitted = new Set<string>();
  readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  of(value: string): string {
    if (this.admitted.has(value)) return value;
    if (this.admitted.size >= this.max) return OTHER_LABEL;
    this.admitted.add(value);
    return value;
  }
}

/** A periodic sample of something external (queue, outbox, Kafka) into gauges. */
export interface Sampler {
  stop(): Promise<void>;
}

/** How long stop() waits for a sample in progress: a dependency that hangs must not hold up a drain. */
const STOP_WAIT_MS = 1_000;

/**
 * Runs `sample` now and then every `intervalMs`, never two at once. A failing sample is logged
 * (once until it works again) and leaves the gauges at their last value; it never throws.
 */
export function startSampler(
  what: string,
  intervalMs: number,
  sample: () => Promise<void>,
  logger: Logger,
): Sampler {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let failing = false;
  const once = async () => {
    try {
      await sample();
      if (failing) logger.info({ what }, 'metrics sampling works again');
      failing = false;
    } catch (err) {
      if (!failing) logger.warn({ err, what }, 'metrics sampling failed; gauges keep their last value');
      failing = true;
    }
  };
  const loop = (): Promise<void> =>
    once().then(() => {
      if (!stopped) timer = setTimeout(() => (running = loop()), intervalMs);
    });
  let running = loop();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      let wait: NodeJS.Timeout | undefined;
      await Promise.race([running, new Promise((resolve) => (wait = setTimeout(resolve, STOP_WAIT_MS)))]);
      clearTimeout(wait);
    },
  };
}

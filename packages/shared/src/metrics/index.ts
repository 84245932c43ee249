import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The one Prometheus registry of a process. Modules declare their metrics through these helpers
 * so that a metric is created once even when several roles share the process; names are prefixed
 * `requester_`.
 */
export const registry = new Registry();
let defaultsCollected = false;

export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry, prefix: 'requester_' });
}

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
  buckets: number[] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
): Histogram<L> {
  const full = `requester_${name}`;
  return (
    existing<Histogram<L>>(full) ??
    new Histogram({ name: full, help, labelNames, buckets, registers: [registry] })
  );
}

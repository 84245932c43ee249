// The per-destination gauges (docs/metrics.md, "Destinations"): what every executor shares about
// each named destination, sampled every METRICS_SAMPLE_INTERVAL.
import type { BreakerState, CircuitBreaker, OriginPacer } from '@requester/policies';
import { type Destination, destinationGatesOf, destinationOrigin } from '@requester/shared/destinations';
import type { Logger } from '@requester/shared/log';
import { type Sampler, startSampler } from '@requester/shared/metrics';
import type { Pauses } from '@requester/shared/pause';
import { credentialPaceIdentity } from '../attempt/identity.ts';
import { destinationLabel, executorMetrics as metrics } from '../metrics.ts';

/** The breaker states as one number: what a dashboard plots and an alert compares. */
const STATE_VALUES: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

export interface DestinationGaugeParts {
  /** The live destinations at their current version (DestinationStore.list). */
  list: () => Promise<Array<Pick<Destination, 'name' | 'spec'>>>;
  breaker: Pick<CircuitBreaker, 'snapshot' | 'openCallers'> | undefined;
  pacer: Pick<OriginPacer, 'snapshot'> | undefined;
  pauses: Pick<Pauses, 'list'>;
}

/** One sample: every live destination's gauges set, a deleted one's series dropped. */
export async function sampleDestinations(parts: DestinationGaugeParts, now = Date.now()): Promise<void> {
  const [destinations, pauses, openCallers] = await Promise.all([
    parts.list(),
    parts.pauses.list(now),
    parts.breaker?.openCallers() ?? [],
  ]);
  const paused = new Set(pauses.map((p) => `${p.scope} ${p.value}`));
  // A client's own breaker at a breaker key (its calls alone failed there): counted per key.
  const callersOpen = new Map<string, number>();
  for (const { origin } of openCallers) callersOpen.set(origin, (callersOpen.get(origin) ?? 0) + 1);
  const rows = await Promise.all(
    destinations.map(async (destination) => {
      const { spec } = destination;
      const gates = destinationGatesOf(destination);
      const origin = destinationOrigin(spec);
      const identity = spec.credentials === undefined ? undefined : credentialPaceIdentity(spec.credentials);
      const [breaker, pace] = await Promise.all([
        parts.breaker?.snapshot(gates.breaker?.key ?? origin),
        gates.pacing ? parts.pacer?.snapshot(origin, identity) : undefined,
      ]);
      const held = paused.has(`destination ${destination.name}`) || paused.has(`origin ${origin}`);
      const clientsOpen = callersOpen.get(gates.breaker?.key ?? origin) ?? 0;
      return { name: destination.name, spec, breaker, pace, held, clientsOpen };
    }),
  );
  for (const gauge of DESTINATION_GAUGES) gauge.reset();
  for (const { name, spec, breaker, pace, held, clientsOpen } of rows) {
    const destination = destinationLabel.of(name);
    metrics.destinationBreakerState.set({ destination }, STATE_VALUES[breaker?.state ?? 'closed']);
    metrics.destinationBreakerClientsOpen.set({ destination }, clientsOpen);
    metrics.destinationPaused.set({ destination }, held ? 1 : 0);
    metrics.destinationPacing.set({ destination }, spec.pacing === false ? 0 : 1);
    metrics.destinationPaceRate.set({ destination }, pace?.rate ?? 0);
    metrics.destinationPaceLimit.set({ destination }, pace?.limit === undefined ? 0 : Math.floor(pace.limit));
    metrics.destinationConcurrencyLimit.set({ destination }, spec.maxConcurrency ?? 0);
  }
}

const DESTINATION_GAUGES = [
  metrics.destinationBreakerState,
  metrics.destinationBreakerClientsOpen,
  metrics.destinationPaused,
  metrics.destinationPacing,
  metrics.destinationPaceRate,
  metrics.destinationPaceLimit,
  metrics.destinationConcurrencyLimit,
];

export function startDestinationGauges(
  parts: DestinationGaugeParts,
  intervalMs: number,
  logger: Logger,
): Sampler {
  return startSampler('destinations', intervalMs, () => sampleDestinations(parts), logger);
}

// A request naming a destination (meta.destination): resolved against the destination's current
// version before each attempt (docs/architecture.md §10, "Destinations").
import { errorResult, type RequestEnvelope } from '@requester/shared/contract';
import {
  type AppliedDestination,
  applyDestination,
  type DestinationCatalog,
  type DestinationGates,
  destinationGatesOf,
} from '@requester/shared/destinations';
import { RequesterError } from '@requester/shared/errors';
import type { Outcome } from './policies.ts';
import { deliver, type Settlement } from './settlement.ts';

/** How long a task waits, unattempted, when the destinations cannot be read (PostgreSQL down). */
const STORE_RETRY_MS = 1000;

/**
 * What an attempt of `envelope` calls: the envelope as it is (no destination), the call its
 * destination makes of it (`call`, with the version in `applied` and what it pins for the gates
 * in `gates`: its own breaker, pacing on or off), or a settlement instead of an
 * attempt — an error result for a destination that does not exist (any more) or that the request
 * would leave, a wait when the store does not answer.
 */
export type Prepared =
  | { kind: 'as-is' }
  | {
      kind: 'call';
      call: (traced: RequestEnvelope) => RequestEnvelope;
      applied: AppliedDestination;
      gates: DestinationGates;
    }
  | { kind: 'settled'; settlement: Settlement };

export async function prepareDestination(
  catalog: Pick<DestinationCatalog, 'current'> | undefined,
  envelope: RequestEnvelope,
  tryCount: number,
): Promise<Prepared> {
  const name = envelope.meta.destination;
  if (name === undefined) return { kind: 'as-is' };
  const refuse = (message: string): Prepared => settledWith(envelope, tryCount, 'invalid_request', message);
  if (!catalog) return refuse(`meta.destination: this executor has no destinations (no PostgreSQL store)`);
  let destination: Awaited<ReturnType<DestinationCatalog['current']>>;
  try {
    destination = await catalog.current(name);
  } catch (err) {
    // This executor cannot open the destination's secret headers: no wait would change that.
    if (err instanceof RequesterError && err.code === 'invalid_config')
      return settledWith(envelope, tryCount, 'internal', err.message);
    return {
      kind: 'settled',
      settlement: { kind: 'reschedule', delayMs: STORE_RETRY_MS, outcome: 'dependency_unavailable' },
    };
  }
  if (!destination)
    return refuse(`meta.destination: no destination named ${name} (requester destinations list)`);
  const checked = applyDestination(envelope, destination);
  if (!checked.ok) return refuse(`${checked.path}: ${checked.message}`);
  return {
    kind: 'call',
    applied: checked.applied,
    gates: destinationGatesOf(destination),
    call: (traced) => {
      const resolved = applyDestination(traced, destination);
      return resolved.ok ? resolved.envelope : checked.envelope;
    },
  };
}

/** A final result says which destination and version the call followed. */
export function withApplied(ending: Outcome, applied: AppliedDestination): Outcome {
  if (ending.kind !== 'result') return ending;
  return { ...ending, result: { ...ending.result, meta: { ...ending.result.meta, destination: applied } } };
}

function settledWith(
  envelope: RequestEnvelope,
  tryCount: number,
  code: 'invalid_request' | 'internal',
  message: string,
): Prepared {
  const result = errorResult(envelope.meta.requestId, code, message, {
    tryCount,
    proxyData: envelope.meta.proxyData,
  });
  return { kind: 'settled', settlement: deliver(result, code) };
}

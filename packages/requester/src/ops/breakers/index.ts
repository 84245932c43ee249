import { type BreakerSnapshot, type CircuitBreaker, originOf } from '@requester/policies';
import { UsageError } from '@requester/shared';
import { isoTime } from '../format.ts';

/**
 * The shared circuit breakers of the target origins, as an operator sees them: `requester breakers
 * list|show|reset` (./cli.ts), `/admin/api/breakers…` (./api.ts) and the UI's Breakers page (./ui.ts).
 */

export interface BreakerView {
  origin: string;
  state: BreakerSnapshot['state'];
  /** Consecutive failures while closed; null: not seen (or forgotten). */
  failures: number | null;
  opensInARow: number;
  openSince: string | null;
  openUntil: string | null;
  /** Probe / trial slots held now. */
  slots: number;
}

function breakerView(origin: string, s: BreakerSnapshot): BreakerView {
  return {
    origin,
    state: s.state,
    failures: s.failures ?? null,
    opensInARow: s.opens,
    openSince: isoTime(s.openSinceMs),
    openUntil: isoTime(s.openUntilMs),
    slots: s.slots,
  };
}

/** Open and half-open origins, latest open-until first. */
export async function listBreakers(breaker: CircuitBreaker, limit: number): Promise<BreakerView[]> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new UsageError(`limit must be a whole number ≥ 1, got ${limit}`);
  const open = await breaker.openOrigins(limit);
  return Promise.all(open.map(async ({ origin }) => breakerView(origin, await breaker.snapshot(origin))));
}

export async function showBreaker(breaker: CircuitBreaker, origin: string): Promise<BreakerView> {
  return breakerView(origin, await breaker.snapshot(origin));
}

/** Closes the breaker of an origin; `reset` false when it had no state (closed already). */
export async function resetBreaker(
  breaker: CircuitBreaker,
  origin: string,
): Promise<{ origin: string; reset: boolean }> {
  return { origin, reset: await breaker.reset(origin) };
}

/** An origin from an origin or any URL on it; a UsageError naming the input otherwise. */
export function originArg(text: string | undefined, action: string): string {
  if (!text) throw new UsageError(`breakers ${action} needs an origin, e.g. https://api.x.com`);
  try {
    return originOf(text);
  } catch {
    throw new UsageError(`not an origin or URL: ${JSON.stringify(text)} (e.g. https://api.x.com)`);
  }
}

import { type BreakerSnapshot, type CircuitBreaker, type HoldReason, originOf } from '@requester/policies';
import { UsageError } from '@requester/shared';
import { destinationBreakerKey, isDestinationBreakerKey } from '@requester/shared/destinations';
import { isoTime } from '../format.ts';

/**
 * The shared circuit breakers of the target origins, as an operator sees them: `requester breakers
 * list|show|reset` (./cli.ts), `/admin/api/breakers…` (./api.ts) and the UI's Breakers page (./ui.ts).
 */

export interface BreakerView {
  origin: string;
  /**
   * The client whose own breaker at the origin this is (only its calls failed there, or the
   * receiver's opt-out answered it: its calls alone wait); null: the origin's, every caller's.
   */
  client: string | null;
  state: BreakerSnapshot['state'];
  /** Consecutive failures while closed; null: not seen (or forgotten). */
  failures: number | null;
  opensInARow: number;
  openSince: string | null;
  openUntil: string | null;
  /** Probe / trial slots held now. */
  slots: number;
  /**
   * Held back: `failing` (failed for ORIGIN_FAILING_HOLD_AFTER; probes find it back) or `opt_out`
   * (its receiver answered `webhook-delivery: disable`; only a reset ends it); null: not held.
   */
  held: HoldReason | null;
  heldSince: string | null;
  /** The run of failures since its last success: how many, since when. */
  failuresInRun: number;
  failingSince: string | null;
}

function breakerView(origin: string, s: BreakerSnapshot, client?: string): BreakerView {
  return {
    origin,
    client: client ?? null,
    state: s.state,
    failures: s.failures ?? null,
    opensInARow: s.opens,
    openSince: isoTime(s.openSinceMs),
    openUntil: isoTime(s.openUntilMs),
    slots: s.slots,
    held: s.held ?? null,
    heldSince: isoTime(s.heldSinceMs),
    failuresInRun: s.runFailures,
    failingSince: isoTime(s.failingSinceMs),
  };
}

/** Held origins (longest held first), then the other open and half-open ones, latest open-until first. */
export async function listBreakers(breaker: CircuitBreaker, limit: number): Promise<BreakerView[]> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new UsageError(`limit must be a whole number ≥ 1, got ${limit}`);
  const [held, open, openCallers] = await Promise.all([
    breaker.heldOrigins(limit),
    breaker.openOrigins(limit),
    breaker.openCallers(limit),
  ]);
  const origins = [
    ...new Set([
      ...held.filter((h) => h.client === undefined).map((h) => h.origin),
      ...open.map((o) => o.origin),
    ]),
  ];
  // A client's own breaker (only its calls failed there, or the receiver's opt-out answered it) is
  // listed apart, with its client: the origin is not open for the others (reset ends both).
  const callers = new Map<string, { origin: string; client: string }>();
  for (const c of [...held, ...openCallers])
    if (c.client !== undefined)
      callers.set(`${c.origin}\n${c.client}`, { origin: c.origin, client: c.client });
  const views = await Promise.all([
    ...origins.map(async (origin) => breakerView(origin, await breaker.snapshot(origin))),
    ...[...callers.values()].map(async ({ origin, client }) =>
      breakerView(origin, await breaker.snapshot(origin, client), client),
    ),
  ]);
  return views.slice(0, limit);
}

export async function showBreaker(breaker: CircuitBreaker, origin: string): Promise<BreakerView> {
  return breakerView(origin, await breaker.snapshot(origin));
}

/**
 * Closes the breaker of an origin, and ends its hold if it was held (its waiting tasks come back
 * at their next probe instant); `reset` false when it had no state (closed already).
 */
export async function resetBreaker(
  breaker: CircuitBreaker,
  origin: string,
): Promise<{ origin: string; reset: boolean; held: HoldReason | null }> {
  const { held } = await breaker.snapshot(origin);
  return { origin, reset: await breaker.reset(origin), held: held ?? null };
}

/**
 * What `breakers show|reset` name: an origin (or any URL on it), or a destination's own breaker
 * (`destination <name>`, as `breakers list` shows it).
 */
export function breakerKeyArg(text: string | undefined, action: string): string {
  const trimmed = text?.trim();
  if (trimmed && isDestinationBreakerKey(trimmed))
    return destinationBreakerKey(trimmed.slice('destination '.length).trim());
  return originArg(text, action);
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

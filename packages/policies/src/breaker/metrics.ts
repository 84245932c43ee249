import { counter, gauge } from '@requester/shared/metrics';

/**
 * Breaker metrics. Origins are user input, so only `breaker_open` carries one as a label, and for
 * at most MAX_ORIGIN_LABELS origins at a time (the longest open); the rest is in the count.
 */
export const MAX_ORIGIN_LABELS = 20;

export const breakerMetrics = {
  transitions: counter(
    'breaker_transitions_total',
    "circuit breaker state changes seen by this process, by scope: `origin` (the origin's breaker, every caller's) or `caller` (one caller's own breaker at an origin)",
    ['from', 'to', 'scope'],
  ),
  rejected: counter(
    'breaker_rejected_total',
    "calls refused by the circuit breaker, by the state that refused them, whether the local cache answered, and whose breaker it was (`origin` or the `caller`'s own)",
    ['state', 'source', 'scope'],
  ),
  errors: counter(
    'breaker_errors_total',
    'breaker calls to Redis that failed (the breaker then lets calls through: it fails open)',
    ['op'],
  ),
  openOrigins: gauge(
    'breaker_open_origins',
    'origins whose breaker is open or half-open (sampled when listed)',
  ),
  openSeconds: gauge(
    'breaker_open_seconds',
    `seconds since the breaker of an origin opened (sampled when listed; at most ${MAX_ORIGIN_LABELS} origins)`,
    ['origin'],
  ),
  heldOrigins: gauge(
    'origin_failing_origins',
    "target origins held back: failing for longer than ORIGIN_FAILING_HOLD_AFTER (or ORIGIN_FAILING_HOLD_FAILURES failures in a row), or at the receiver's request (sampled when listed)",
  ),
  callersHeld: gauge(
    'breaker_callers_held',
    "callers (clients) held back at an origin by their own breaker: only their calls failed there, or the receiver's opt-out answered them (sampled when listed); the origin stays open to the others",
  ),
  heldSeconds: gauge(
    'origin_failing_seconds',
    `seconds since a target origin was held back, by reason (failing, opt_out; sampled when listed; at most ${MAX_ORIGIN_LABELS} origins, the longest held)`,
    ['origin', 'reason'],
  ),
  /**
   * The same values under the name before 0.2.0 (no `_seconds` unit suffix): deprecated, exported
   * alongside for one release so that dashboards and alerts can move (CHANGELOG.md), then removed.
   */
  open: gauge(
    'breaker_open',
    'DEPRECATED, removed in the next release: use requester_breaker_open_seconds (same values)',
    ['origin'],
  ),
};

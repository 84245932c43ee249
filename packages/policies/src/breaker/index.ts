/**
 * The shared circuit breaker (docs/architecture.md §5 outbound hygiene, §9): one per target origin, its state
 * in Redis so that every executor sees the same breaker.
 *
 *   closed ──threshold consecutive failures──▶ open ──openMs──▶ half-open ──probe ok──▶ closed
 *                                               ▲                   │
 *                                               └──probe failed─────┘ (open time doubles, capped)
 *
 * A closed origin whose last outcome was a success is "proven": its calls go through freely, and
 * executors remember that for stateCacheMs without asking Redis. Until proven (a new origin, or
 * after a failure) at most `threshold − failures` calls are out at once, each holding a slot, so a
 * dead origin costs at most `threshold` calls however many executors and workers hit it at once,
 * then one probe per open period. The Lua scripts in `commands/` hold the exact rules.
 *
 * A long run of failures holds the origin back ("failing-held", docs/architecture.md §9): once it
 * has failed for `holdAfterMs` without a success (or `holdFailures` times in a row), it is probed
 * once per `holdPeriodMs` on a fixed grid, and refused callers are sent to the next probe instant,
 * until a probe succeeds. A call whose answer carries the receiver's opt-out holds it at once, with
 * no probe, until `reset`.
 *
 * A call may name its caller (the client): the breaker then tells a failing origin from a failing
 * caller (docs/architecture.md §9, "whose trouble"). A caller's failures count in a breaker of its
 * own at that origin, which opens, holds and is probed by the rules above for its calls alone;
 * the origin's counts them only once a second caller fails before a success ends the run, and a
 * receiver's opt-out holds the caller it answered. Both states are in one slot, read and written
 * by one script call, as the origin's alone was.
 *
 * Redis errors fail open (the call goes ahead): the breaker protects targets, it must not become
 * an outage of its own.
 */

export { CircuitBreaker } from './circuit-breaker.ts';
export { breakerFromConfig, longestCallMs } from './config.ts';
export { countsAsFailure, type JudgedOutcome, originOf } from './origin.ts';
export type {
  Admission,
  BreakerScope,
  BreakerSettings,
  BreakerSnapshot,
  BreakerState,
  CallReport,
  CircuitBreakerOptions,
  HeldOrigin,
  HoldChange,
  HoldReason,
  OpenOrigin,
  RecordOutcome,
} from './types.ts';

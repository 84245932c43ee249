import type { CircuitBreaker, OriginPacer, OriginStatsRecorder, RateLimiter } from '@requester/policies';
import type { Journal } from '@requester/shared/journal';
import type { Bulkhead } from '../bulkhead/index.ts';
import type { ResponseCache } from '../cache/index.ts';
import type { KeyConcurrency } from '../concurrency/index.ts';
import type { HttpClient } from '../http/index.ts';
import type { SigningKeyring, SigningKeys } from '../signing/index.ts';
import type { CallOrRefusal } from './outcome.ts';

/** What the policies need; each is optional (a request asking for a missing one is refused). */
export interface PolicyModules {
  http: HttpClient;
  limiter?: RateLimiter | undefined;
  breaker?: CircuitBreaker | undefined;
  /** Caps the calls in flight per origin (MAX_WORKERS_PER_ORIGIN); absent = no cap. */
  bulkhead?: Bulkhead | undefined;
  /** The slots of `meta.concurrency` keys across every executor; absent = a request naming one is refused. */
  concurrency?: KeyConcurrency | undefined;
  /**
   * ORIGIN_OPT_OUT: an answer carrying `webhook-delivery: disable` holds its origin back (the
   * breaker's opt-out hold) until an operator resets it. Default false: the header is ignored.
   */
  optOut?: boolean | undefined;
  /** The pace of each origin (429/503 + Retry-After, RateLimit headers, adaptive concurrency); absent = none. */
  pacer?: OriginPacer | undefined;
  /** Calls per origin across the deployment (the Origins page), counted in memory and flushed; absent = none. */
  originStats?: OriginStatsRecorder | undefined;
  /** ADAPTIVE_CONCURRENCY: the bulkhead applies the pacer's learnt limit of each origin (default true). */
  adaptiveConcurrency?: boolean | undefined;
  cache?: ResponseCache<CallOrRefusal> | undefined;
  /** Where signing keys are found: the credential store, then SIGNING_KEYS (the role's wiring). */
  signing?: SigningKeyring | undefined;
  /** Signing keys alone, without the store (tests; deprecated SIGNING_KEYS); used when `signing` is absent. */
  signingKeys?: SigningKeys | undefined;
  /** Longest Retry-After honoured (RETRY_AFTER_MAX). */
  retryAfterMaxMs: number;
  /** REDIS_HORIZON: the longest wait of a task marked `withinHorizon` (see waitCap); absent = no cap. */
  horizonMs?: number | undefined;
  /** The jitter's dice (tests pin it). Default Math.random. */
  random?: () => number;
  /** The task journal (held, attempt, cache steps); absent = none. */
  journal?: Journal | undefined;
  /**
   * LIMITER_DISPATCH_BUDGET: the latest a call leaves after its limiter decision (ms): a
   * sliding-log slot is counted pending until then, unless settled earlier. Default 20 s; 0 =
   * one-phase, counted at the decision.
   */
  limiterDispatchBudgetMs?: number | undefined;
  /**
   * LIMITER_ARRIVAL_MARGIN: how much later than its send a sliding-log slot is counted (ms), for the
   * variation of the transit to a target that counts by arrival. Default 50 ms; 0 = at the send.
   */
  limiterArrivalMarginMs?: number | undefined;
  /**
   * Limiter keys the operator declared one quota for every caller (SHARED_LIMITER_KEYS); any
   * other `meta.limiter.key` is its client's own (`limiterKeyOf`). Default none.
   */
  sharedLimiterKeys?: ReadonlySet<string> | undefined;
}

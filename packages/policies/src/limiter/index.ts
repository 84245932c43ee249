import type { LimiterAlgorithm, LimiterSpec } from '@requester/shared/contract';
import { RequesterError } from '@requester/shared/errors';
import { counter } from '@requester/shared/metrics';
import type { RedisClient } from '@requester/shared/redis';
import { type LimiterScripts, type LimitOutcome, loadLimiterScripts, type TakeReply } from './scripts.ts';
import { limiterCall } from './spec.ts';

export { inspectLimiter, type LimiterWindowState } from './inspect.ts';
export type { LimitOutcome } from './scripts.ts';
export { type LimiterWindow, limiterKeyOf, limiterKeys, limiterWindows, longestWaitMs } from './spec.ts';

export interface LimitDecision {
  outcome: LimitOutcome;
  /** `outcome === 'allowed'`. */
  allowed: boolean;
  /** When limited: the longest wait over the denying windows (ms, >= 1); else 0. */
  retryAfterMs: number;
  /** Calls of cost 1 the tightest window still admits (after this take when allowed). */
  remaining: number;
  /** The Redis clock at the decision (ms since the epoch, microsecond fraction): the queue's clock. */
  atMs: number;
}

export interface LimitRequest {
  spec: LimiterSpec;
  /** Calls this take counts for (integer >= 1); 1 by default. */
  cost?: number;
}

export interface RateLimiterOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:`; must not contain braces (the hash tag is the limiter's own). */
  prefix: string;
}

const decisions = counter('limiter_decisions_total', 'rate limiter decisions, by algorithm and outcome', [
  'algorithm',
  'outcome',
]);

function checkedCost(cost: number): number {
  if (!Number.isSafeInteger(cost) || cost < 1)
    throw new RangeError(`limiter cost must be an integer >= 1: ${cost}`);
  return cost;
}

function decided(algorithm: LimiterAlgorithm, reply: TakeReply): LimitDecision {
  decisions.inc({ algorithm, outcome: reply.outcome });
  return { ...reply, allowed: reply.outcome === 'allowed' };
}

function unavailable(err: unknown): RequesterError {
  if (err instanceof RequesterError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new RequesterError('dependency_unavailable', `rate limiter: ${message}`, { cause: err });
}

/**
 * Rate limits of docs/architecture.md §9 in Redis: one Lua script per take checks every window of the
 * limiter and consumes from all of them only when all allow. Time is the Redis clock.
 */
export class RateLimiter {
  readonly #prefix: string;
  readonly #scripts: LimiterScripts;

  constructor(options: RateLimiterOptions) {
    if (/[{}]/.test(options.prefix)) {
      throw new RangeError(`limiter prefix must not contain braces: ${JSON.stringify(options.prefix)}`);
    }
    this.#prefix = options.prefix;
    this.#scripts = loadLimiterScripts(options.redis);
  }

  /** Takes `cost` calls from the limiter `spec` names, or says how long to wait. */
  async take(spec: LimiterSpec, cost = 1): Promise<LimitDecision> {
    const call = limiterCall(this.#prefix, spec, checkedCost(cost));
    let reply: TakeReply;
    try {
      reply = await this.#scripts.take(call);
    } catch (err) {
      throw unavailable(err);
    }
    return decided(spec.algorithm, reply);
  }

  /** Several takes in one round trip (a lease batch), decided in array order (`LimiterScripts.takeMany`). */
  async takeMany(requests: readonly LimitRequest[]): Promise<LimitDecision[]> {
    const calls = requests.map((r) => limiterCall(this.#prefix, r.spec, checkedCost(r.cost ?? 1)));
    let replies: TakeReply[];
    try {
      replies = await this.#scripts.takeMany(calls);
    } catch (err) {
      throw unavailable(err);
    }
    return replies.map((reply, i) => decided(requests[i]!.spec.algorithm, reply));
  }
}

import { join } from 'node:path';
import {
  counter,
  defineLuaCommands,
  type LimiterAlgorithm,
  type LimiterSpec,
  type LuaCaller,
  MAX_LIMITER_RATES,
  type RedisClient,
  RequesterError,
  readLuaCommands,
} from '@requester/shared';
import { type LimiterCall, limiterCall } from './spec.ts';

export { inspectLimiter, type LimiterWindowState } from './inspect.ts';
export { type LimiterWindow, limiterKeys, limiterWindows } from './spec.ts';

/**
 * `allowed`: consumed from every window. `limited`: nothing consumed; retry after `retryAfterMs`.
 * `oversized`: the cost exceeds a window's value, so no wait can ever admit it: answer with an
 * error instead of rescheduling.
 */
export type LimitOutcome = 'allowed' | 'limited' | 'oversized';

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

const COMMANDS = readLuaCommands(join(import.meta.dirname, 'commands'), 'rateLimiter');
const OUTCOMES: ReadonlyMap<number, LimitOutcome> = new Map([
  [1, 'allowed'],
  [0, 'limited'],
  [-1, 'oversized'],
]);

const decisions = counter('limiter_decisions_total', 'rate limiter decisions, by algorithm and outcome', [
  'algorithm',
  'outcome',
]);

function checkedCost(cost: number): number {
  if (!Number.isSafeInteger(cost) || cost < 1)
    throw new RangeError(`limiter cost must be an integer >= 1: ${cost}`);
  return cost;
}

function decode(algorithm: LimiterAlgorithm, reply: unknown): LimitDecision {
  const [code, retryAfterMs, remaining, nowUs] = reply as number[];
  const outcome = OUTCOMES.get(Number(code));
  if (!outcome)
    throw new RequesterError('internal', `rate limiter: unexpected reply ${JSON.stringify(reply)}`);
  decisions.inc({ algorithm, outcome });
  return {
    outcome,
    allowed: outcome === 'allowed',
    retryAfterMs: Number(retryAfterMs),
    remaining: Number(remaining),
    atMs: Number(nowUs) / 1000,
  };
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
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #call: LuaCaller;

  constructor(options: RateLimiterOptions) {
    if (/[{}]/.test(options.prefix)) {
      throw new RangeError(`limiter prefix must not contain braces: ${JSON.stringify(options.prefix)}`);
    }
    this.#redis = options.redis;
    this.#prefix = options.prefix;
    this.#call = defineLuaCommands(options.redis, COMMANDS, MAX_LIMITER_RATES);
  }

  /** Takes `cost` calls from the limiter `spec` names, or says how long to wait. */
  async take(spec: LimiterSpec, cost = 1): Promise<LimitDecision> {
    const call = limiterCall(this.#prefix, spec, checkedCost(cost));
    let reply: unknown;
    try {
      reply = await this.#send(this.#redis, call);
    } catch (err) {
      throw unavailable(err);
    }
    return decode(spec.algorithm, reply);
  }

  /**
   * Several takes in one round trip (a lease batch), decided in array order. On one node it is a
   * pipeline; on a cluster the takes go out together and ioredis pipelines them per node (the
   * limiters live in different slots, which one cluster pipeline may not span).
   */
  async takeMany(requests: readonly LimitRequest[]): Promise<LimitDecision[]> {
    const calls = requests.map((r) => limiterCall(this.#prefix, r.spec, checkedCost(r.cost ?? 1)));
    if (calls.length === 0) return [];
    let replies: unknown[];
    try {
      replies = await (this.#redis.isCluster ? this.#parallel(calls) : this.#pipelined(calls));
    } catch (err) {
      throw unavailable(err);
    }
    return replies.map((reply, i) => decode(requests[i]!.spec.algorithm, reply));
  }

  #send(target: RedisClient | ReturnType<RedisClient['pipeline']>, call: LimiterCall): unknown {
    return this.#call(target, call.op, call.keys, call.args);
  }

  #parallel(calls: LimiterCall[]): Promise<unknown[]> {
    return Promise.all(calls.map((call) => this.#send(this.#redis, call)));
  }

  async #pipelined(calls: LimiterCall[]): Promise<unknown[]> {
    const pipeline = this.#redis.pipeline();
    for (const call of calls) this.#send(pipeline, call);
    const results = (await pipeline.exec()) ?? [];
    return results.map(([err, reply]) => {
      if (err) throw err;
      return reply;
    });
  }
}

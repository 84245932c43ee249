import type { Config } from '@requester/shared/config';
import type { RedisClient } from '@requester/shared/redis';
import { CircuitBreaker } from './circuit-breaker.ts';
import type { CircuitBreakerOptions } from './types.ts';

/** The breaker configured by BREAKER_* (slot leases outlast the longest possible call). */
export function breakerFromConfig(
  config: Pick<
    Config,
    | 'redisPrefix'
    | 'breakerFailureThreshold'
    | 'breakerOpenDuration'
    | 'breakerMaxOpenDuration'
    | 'breakerStateCache'
    | 'originFailingHoldAfter'
    | 'originFailingHoldFailures'
    | 'targetConnectTimeout'
    | 'targetResponseTimeout'
  >,
  redis: RedisClient,
  options: Partial<CircuitBreakerOptions> = {},
): CircuitBreaker {
  return new CircuitBreaker({
    redis,
    prefix: `${config.redisPrefix}:breaker:`,
    failureThreshold: config.breakerFailureThreshold,
    openMs: config.breakerOpenDuration,
    maxOpenMs: config.breakerMaxOpenDuration,
    stateCacheMs: config.breakerStateCache,
    holdAfterMs: config.originFailingHoldAfter,
    holdFailures: config.originFailingHoldFailures,
    trialLeaseMs: longestCallMs(config),
    ...options,
  });
}

/**
 * The longest one call to a target can last (connect, then headers and body each within the
 * response timeout), and a margin: how long a slot held for a call that never reports (breaker
 * trial, cluster bulkhead) stays taken.
 */
export function longestCallMs(
  config: Pick<Config, 'targetConnectTimeout' | 'targetResponseTimeout'>,
): number {
  return config.targetConnectTimeout + 2 * config.targetResponseTimeout + 5_000;
}

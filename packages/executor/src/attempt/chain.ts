import { call } from './call.ts';
import type { GateSpec } from './gate.ts';
import { breaker } from './gates/breaker.ts';
import { bulkhead } from './gates/bulkhead.ts';
import { cache } from './gates/cache.ts';
import { concurrency } from './gates/concurrency.ts';
import { limit } from './gates/limit.ts';
import { pace } from './gates/pace.ts';
import { sign } from './gates/sign.ts';

/**
 * The order of an attempt (docs/architecture.md §5, "Executor decisions", generated from this
 * array by `pnpm run docs:emit`). Why each gate stands where it does is said in its file.
 */
export const CHAIN: readonly GateSpec[] = Object.freeze([
  cache,
  sign,
  pace,
  concurrency,
  bulkhead,
  limit,
  breaker,
  call,
]);

/** The executor: workers, origin concurrency, leases, parking, the record cache. */

import { z } from 'zod';
import { bool, goDuration, nonNegativeInt, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const executorVariables = {
  maxWorkers: variable('MAX_WORKERS', '32', positiveInt, 'concurrent HTTP calls per executor process'),
  maxWorkersPerOrigin: variable(
    'MAX_WORKERS_PER_ORIGIN',
    undefined,
    positiveInt.optional(),
    'calls in flight to one target origin (scheme://host:port) per executor process (per cluster with ORIGIN_CONCURRENCY_SCOPE=cluster), so a target that hangs cannot hold every worker; a task over the cap waits up to 50 ms for a freed slot in its worker, then parked in its executor without a worker (up to 30 s, within EXECUTOR_PARKED_TASKS), else in the queue (not an attempt, counted in waitTime); default MAX_WORKERS / 4 rounded up (8 with 32)',
  ),
  originConcurrencyScope: variable(
    'ORIGIN_CONCURRENCY_SCOPE',
    'process',
    z.enum(['process', 'cluster']),
    'where MAX_WORKERS_PER_ORIGIN is counted: `process` (each executor alone, free) or `cluster` (every executor together, slots leased in Redis: one more round trip per lease batch)',
  ),
  adaptiveConcurrency: variable(
    'ADAPTIVE_CONCURRENCY',
    'true',
    bool,
    "learn each target origin's concurrency limit (shared in Redis): +1 per round of calls while the recent latency stays within 1.5× its floor (the latency without load, measured again every 10 s by a probe at one call per executor) + 1 ms + the executor's own event-loop lag, down by up to as much (by how far past that bound) when a queue forms at the target, −30 % on timeouts and 5xx; MAX_WORKERS_PER_ORIGIN is its ceiling. false = the cap is MAX_WORKERS_PER_ORIGIN alone. The pace a target asks for (429/503 + Retry-After, RateLimit headers) is honoured either way",
  ),
  executorLeaseTtl: variable(
    'EXECUTOR_LEASE_TTL',
    '30s',
    goDuration,
    'lease of a task being executed; renewed every third of it, reclaimed by others when it lapses',
  ),
  executorParkedTasks: variable(
    'EXECUTOR_PARKED_TASKS',
    '1000',
    positiveInt,
    "tasks an executor keeps parked at most: a task the pace books a slot up to 30 s ahead for (or a retry due within 30 s, one a busy breaker refused, or one its origin's bulkhead refused, until a slot frees) waits in its executor under its lease, holding no worker and counted apart from the leases of the tasks being worked on, instead of going back to the queue (one lease per request, not two); beyond this (or EXECUTOR_PARKED_BYTES) it goes back to the queue",
  ),
  executorParkedBytes: variable(
    'EXECUTOR_PARKED_BYTES',
    '33554432',
    positiveInt,
    'bytes of `in` records and queued tasks the parked tasks of an executor hold at most (see EXECUTOR_PARKED_TASKS); a task that would go beyond goes back to the queue',
  ),
  executorRecordCacheBytes: variable(
    'EXECUTOR_RECORD_CACHE_BYTES',
    '33554432',
    nonNegativeInt,
    'bytes of `in` records an executor keeps after reading them by offset (a batch brings neighbours, retries re-read); 0 = none',
  ),
};

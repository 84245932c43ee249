import type { FairQueue } from '@requester/queue';
import type { Cancellations } from '@requester/shared/cancel';
import type { RequestContract } from '@requester/shared/contract';
import type { Debounces } from '@requester/shared/debounce';
import type { DestinationCatalog } from '@requester/shared/destinations';
import type { Fetcher, KafkaProducer } from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import type { Outbox } from '@requester/shared/outbox';
import type { PauseView } from '@requester/shared/pause';
import type { Parking } from './decide.ts';
import type { PolicyModules } from './policies.ts';
import type { ReplyOptions } from './settle.ts';

/**
 * What the executor needs of the queue (FairQueue provides it). `clientWeights`, when given, weighs
 * the clients' shares of the worker pool as the queue weighs their turns.
 */
export type TaskQueue = Pick<
  FairQueue,
  'lease' | 'extendMany' | 'ackMany' | 'rejectMany' | 'deadLetterMany' | 'waitForWork'
> &
  Partial<Pick<FairQueue, 'clientWeights'>>;

/**
 * The executor's wiring. The policy modules (`limiter`, `breaker`, `cache`, `signingKeys`, see
 * PolicyModules) are optional so that a bare executor (tests, benchmarks) runs without Redis
 * policies; the role always gives them all.
 */
export interface ExecutorOptions extends Omit<PolicyModules, 'retryAfterMaxMs'> {
  queue: TaskQueue;
  fetcher: Pick<Fetcher, 'fetchMany'>;
  producer: KafkaProducer;
  topicOut: string;
  /** max.message.bytes of `out` (KAFKA_MAX_MESSAGE_BYTES): a bigger result is answered as too large. */
  maxResultBytes?: number;
  /** Dead-letter records of failed requests go here; none are written without it. */
  topicDlq?: string;
  /** Where unordered tasks wait beyond `horizonMs`; without it every wait stays in Redis. */
  outbox?: Pick<Outbox, 'add'>;
  /** REDIS_HORIZON: the longest wait kept in Redis for an unordered task. */
  horizonMs?: number;
  /** Epoch ms on Redis's clock (RedisClock.now), by which start-by deadlines are judged; Date.now without it. */
  redisNow?: () => number;
  /** RETRY_AFTER_MAX (default 1 h). */
  retryAfterMaxMs?: number;
  maxWorkers: number;
  leaseTtlMs: number;
  produceTimeoutMs: number;
  logger: Logger;
  contract?: RequestContract;
  /** Names this executor in the journal's `leased` events. */
  executorId?: string;
  /** Where sync results are routed to their gateway (see `Settler.publishReplies`); none are without it. */
  replies?: ReplyOptions;
  /**
   * Cancelled requests (../../shared cancel): asked before an attempt (one read per lease batch)
   * and before a reschedule; none without it.
   */
  cancellations?: Pick<Cancellations, 'find' | 'findMany'> &
    Partial<Pick<Cancellations, 'mark' | 'unchangedSince'>>;
  /** The debounce keys (../../shared debounce): a task a newer request of its key replaced ends `debounced`. */
  debounces?: Pick<Debounces, 'replacedBy'>;
  /** Pauses by origin, client or partition (../../shared pause): a paused task waits, not attempted. */
  pauses?: Pick<PauseView, 'any' | 'match' | 'refresh'>;
  /** The destinations requests name (meta.destination); without it such a request is refused. */
  destinations?: Pick<DestinationCatalog, 'current'>;
  /** EXECUTOR_PARKED_TASKS, EXECUTOR_PARKED_BYTES: the most tasks kept parked (see ParkingLot.park). */
  parking?: Parking;
}

import { withRequestId } from '../builders/index.ts';
import type { RequestEnvelope, RequestInput, ResultEnvelope } from '../contract/index.ts';
import { newTraceparent } from '../ids.ts';

/**
 * Requester over Kafka: the record a producer writes to `in`, and a typed reader of `out`.
 * kafkajs is an optional peer dependency: nothing here imports it; the functions take a kafkajs
 * producer or consumer (or anything of the same shape), so the client adds no dependency.
 */

/** A record as Requester expects it on `in`. */
export interface RequestRecord {
  /** `meta.partition` when set (one ordered partition stays on one Kafka partition), else the requestId. */
  key: string;
  /** The envelope as JSON. */
  value: string;
  /** `traceparent` (the trace the request continues) and the caller's own headers. */
  headers: Record<string, string>;
}

export interface RecordOptions {
  /** The W3C trace to continue; default `meta.traceparent`, else a new trace. */
  traceparent?: string;
  /** More record headers (Requester ignores those it does not know). */
  headers?: Record<string, string>;
}

/** The `in` record of a request; a missing requestId is generated. */
export function toRecord(input: RequestInput | RequestEnvelope, options: RecordOptions = {}): RequestRecord {
  const envelope = withRequestId(input);
  const { sync: _httpOnly, ...meta } = envelope.meta;
  const traceparent = options.traceparent ?? meta.traceparent ?? newTraceparent();
  return {
    key: meta.partition ?? meta.requestId,
    value: JSON.stringify({ ...envelope, meta }),
    headers: { ...options.headers, traceparent },
  };
}

/** What `sendRequest` needs of a producer: kafkajs's `Producer` has it. */
export interface ProducerLike {
  send(record: {
    topic: string;
    acks?: number;
    messages: Array<{ key: string; value: string; headers?: Record<string, string> }>;
  }): Promise<unknown>;
}

export interface SendOptions extends RecordOptions {
  /** Requester's `in` topic (KAFKA_TOPIC_IN). Default `requester.in`. */
  topic?: string;
}

/**
 * Writes the request to `in` (acks from all in-sync replicas) and resolves to its requestId. A
 * producer retrying a send writes the same requestId again: Requester runs it once.
 */
export async function sendRequest(
  producer: ProducerLike,
  input: RequestInput | RequestEnvelope,
  options: SendOptions = {},
): Promise<string> {
  const envelope = withRequestId(input);
  await producer.send({
    topic: options.topic ?? 'requester.in',
    acks: -1,
    messages: [toRecord(envelope, options)],
  });
  return envelope.meta.requestId;
}

/** A message as a kafkajs consumer hands it over. */
export interface ConsumedMessage {
  key: { toString(): string } | null;
  value: { toString(): string } | null;
  offset: string;
}

/** What kafkajs's `eachBatch` is given, as far as `readResults` uses it. */
export interface ConsumedBatch {
  batch: { topic: string; partition: number; messages: ConsumedMessage[] };
  resolveOffset(offset: string): void;
  heartbeat(): Promise<void>;
  isRunning(): boolean;
  isStale(): boolean;
}

/** What `readResults` needs of a consumer: kafkajs's `Consumer` has it. */
export interface ConsumerLike {
  subscribe(subscription: { topics: string[]; fromBeginning?: boolean }): Promise<void>;
  run(config: {
    eachBatchAutoResolve?: boolean;
    eachBatch: (payload: ConsumedBatch) => Promise<void>;
  }): Promise<void>;
  stop(): Promise<void>;
}

/** One result read from `out`, with where it was. */
export interface ResultRecord {
  result: ResultEnvelope;
  topic: string;
  partition: number;
  offset: string;
}

export interface ReadOptions {
  /** Requester's `out` topic (KAFKA_TOPIC_OUT). Default `requester.out`. */
  topic?: string;
  /** Read `out` from its start (for a consumer group without committed offsets). Default false. */
  fromBeginning?: boolean;
  /** Only results of this `meta.client` (an API key's name, or what a Kafka producer set). */
  client?: string;
  /** Only results of these requestIds. */
  requestIds?: Iterable<string>;
  /** Ends the iteration (the consumer is stopped). */
  signal?: AbortSignal;
}

/**
 * The results on `out` as an async iterator, filtered by client and requestId. Records that are
 * not a result are skipped, as the contract asks of readers. One result is handed over at a time,
 * and its offset is marked consumed (for the consumer's commits) only once the loop asks for the
 * next one or leaves: a process that dies in the loop body reads that result again, and a result
 * fetched but not yet handed over when the loop ends is left for the group's next reader. Leaving
 * the loop (`break`, `return`, a throw, the signal) stops the consumer; disconnecting it stays the
 * caller's. A loop body longer than the consumer's session timeout makes the group rebalance.
 */
export function readResults(
  consumer: ConsumerLike,
  options: ReadOptions = {},
): AsyncIterableIterator<ResultRecord> {
  const topic = options.topic ?? 'requester.out';
  const ids = options.requestIds ? new Set(options.requestIds) : undefined;
  // A result fetched before the loop asked for it waits here, not yet consumed.
  let offered: { record: ResultRecord; settle: (consumed: boolean) => void } | undefined;
  // The result the loop body holds: consumed once the loop asks for the next one or leaves.
  let current: ((consumed: boolean) => void) | undefined;
  let waiting: ((value: IteratorResult<ResultRecord>) => void) | undefined;
  let started: Promise<void> | undefined;
  let ended = false;

  const wanted = (result: ResultEnvelope): boolean => {
    if (options.client !== undefined && result.meta?.client !== options.client) return false;
    return ids === undefined || (result.meta?.requestId !== undefined && ids.has(result.meta.requestId));
  };

  /** Hands `record` to the loop; resolves true once the loop is done with it, false if it never took it. */
  const hand = (record: ResultRecord) =>
    new Promise<boolean>((settle) => {
      if (waiting) {
        const resolve = waiting;
        waiting = undefined;
        current = settle;
        resolve({ value: record, done: false });
      } else {
        offered = { record, settle };
      }
    });

  const eachBatch = async ({ batch, resolveOffset, heartbeat, isRunning, isStale }: ConsumedBatch) => {
    for (const message of batch.messages) {
      if (ended || !isRunning() || isStale()) return;
      const result = parseResult(message.value?.toString());
      if (result && wanted(result)) {
        const record = { result, topic: batch.topic, partition: batch.partition, offset: message.offset };
        if (!(await hand(record))) return;
      }
      resolveOffset(message.offset);
      await heartbeat();
    }
  };

  const finish = async (): Promise<IteratorResult<ResultRecord>> => {
    if (!ended) {
      ended = true;
      options.signal?.removeEventListener('abort', onAbort);
      // Stopped first: kafkajs then hands over no further message of the batch in progress.
      const stopped = started ? consumer.stop() : undefined;
      current?.(true);
      current = undefined;
      offered?.settle(false);
      offered = undefined;
      waiting?.({ value: undefined, done: true });
      waiting = undefined;
      await stopped;
    }
    return { value: undefined, done: true };
  };
  const onAbort = () => void finish();
  options.signal?.addEventListener('abort', onAbort, { once: true });

  const iterator: AsyncIterableIterator<ResultRecord> = {
    async next() {
      current?.(true);
      current = undefined;
      if (ended || options.signal?.aborted) return finish();
      started ??= consumer
        .subscribe({ topics: [topic], fromBeginning: options.fromBeginning ?? false })
        .then(() => consumer.run({ eachBatchAutoResolve: false, eachBatch }));
      await started;
      // The signal may have ended the reader while the consumer was starting.
      if (ended) return { value: undefined, done: true };
      if (offered) {
        const { record, settle } = offered;
        offered = undefined;
        current = settle;
        return { value: record, done: false };
      }
      return new Promise((resolve) => {
        waiting = resolve;
      });
    },
    return: finish,
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}

/** A result envelope, or undefined for anything else (readers skip what they cannot read). */
function parseResult(text: string | undefined): ResultEnvelope | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<ResultEnvelope> | null;
    if (typeof value !== 'object' || value === null) return undefined;
    if (typeof value.response?.status !== 'number' || typeof value.meta !== 'object') return undefined;
    return value as ResultEnvelope;
  } catch {
    return undefined;
  }
}

import { RequesterError } from '../errors/index.ts';

/**
 * Requester's own Kafka interface: what the roles need from a Kafka client, and nothing of any
 * client library's types. The one implementation is the kafkajs adapter (`./kafkajs/`); another
 * (see README.md) implements these interfaces and passes `contract.test.ts`.
 */

/** Where one record is: a task's offset-ref to its `in` record (task/), what a Fetcher reads back. */
export interface KafkaRef {
  topic: string;
  partition: number;
  /** Kafka offsets are int64: kept as a decimal string. */
  offset: string;
}

/** Header values as read: the broker returns bytes; a header repeated under one name is a list. */
export type RecordHeaders = Record<string, Buffer | string | Array<Buffer | string> | undefined>;

/** The text of a record header (its first value when repeated); undefined when absent. */
export function headerText(headers: RecordHeaders | undefined, name: string): string | undefined {
  const value = headers?.[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined ? undefined : first.toString();
}

/** A record read from a topic. */
export interface KafkaRecord {
  topic: string;
  partition: number;
  /** int64, as a decimal string. */
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: RecordHeaders;
  /** Epoch ms, as a decimal string. */
  timestamp: string;
  /**
   * The record batch its producer wrote it in, as a consumer received it: the records the batch
   * holds, and the bytes of those delivered (keys and values). A reader by offset receives
   * the whole batch (the router copies a big record out of a big batch: see ROUTER_BODY_COPIES).
   * Absent where unknown.
   */
  batch?: RecordBatchShape;
}

export interface RecordBatchShape {
  records: number;
  bytes: number;
}

/** A record to write. Without `partition`, the key decides it (murmur2, as the Java client does). */
export interface OutgoingRecord {
  key?: Buffer | string | null;
  value: Buffer | string | null;
  headers?: Record<string, Buffer | string>;
  partition?: number;
  /** Epoch ms, as a decimal string (what ListOffsets by time finds); default: when it is sent. */
  timestamp?: string;
}

/** Where one produce request put its records: the first offset written to each partition. */
export interface ProducedBatch {
  topic: string;
  partition: number;
  baseOffset: string;
}

/** Records of one topic-partition, in offset order, as one fetch returned them. */
export interface RecordBatch {
  topic: string;
  partition: number;
  /** The data records (transaction markers and aborted records are left out). */
  records: KafkaRecord[];
  /** Offset of the last record the fetch covered, markers included: committing it moves past them. */
  lastOffset: string;
}

export interface BatchContext {
  /** Keeps the group membership alive during a long batch. */
  heartbeat(): Promise<void>;
  /** false once the consumer is stopping: a handler returns without doing its work. */
  isRunning(): boolean;
}

export interface ConsumeOptions {
  topics: string[];
  /** Where a group without committed offsets starts: the log start, or its end. */
  fromBeginning: boolean;
  /**
   * `after-batch`: once `onBatch` resolves, the batch's last offset is committed — in the
   * background, not before the next fetch (a batch whose handler throws is not, and is delivered
   * again; a commit lost to a rebalance or crash delivers its records again; `stop` commits what
   * was handled before leaving). `never`: nothing is ever committed.
   */
  commit: 'after-batch' | 'never';
  /** Partitions whose batches are handled at the same time (default 1). */
  partitionsConsumedConcurrently?: number;
  onBatch(batch: RecordBatch, context: BatchContext): Promise<void>;
}

export interface ConsumerOptions {
  groupId: string;
  /** How long the group waits for a silent member before handing its partitions on. */
  sessionTimeoutMs?: number;
  /** Longest a fetch waits for data when there is none: bounds how long `stop` waits for it. */
  maxWaitMs?: number;
  /**
   * Bytes a fetch waits for (up to maxWaitMs) before it returns (default 1: at once). More makes
   * fewer, larger batches under load, for maxWaitMs more latency when records trickle in.
   */
  minBytes?: number;
  /** Retries of a failing batch inside the client before the consumer crashes (and restarts). */
  retries?: number;
}

/** A consumer that failed: the client restarts it unless `restart` is false. */
export interface ConsumerCrash {
  error: unknown;
  restart: boolean;
  /**
   * The broker could not be reached (refused, reset, timed out): an outage of the link, which ends
   * with it, rather than a batch that fails each time it comes.
   */
  unreachable: boolean;
}

/** The partitions assigned to this member, by topic. */
export type Assignment = Record<string, number[]>;

export interface KafkaConsumer {
  readonly groupId: string;
  /** Connects, subscribes and starts handing batches to `onBatch`; resolves once running. */
  start(options: ConsumeOptions): Promise<void>;
  /** Stops fetching these topics (records stay in Kafka) until `resume`; kept across restarts. */
  pause(topics: string[]): void;
  resume(topics: string[]): void;
  /** Reads `partition` from `offset` next (call from `onAssigned` to position a fresh member). */
  seek(topic: string, partition: number, offset: string): void;
  /** Each listener returns a function that removes it. */
  onCrash(listener: (crash: ConsumerCrash) => void): () => void;
  /** Called on each group join with this member's partitions, before they are fetched. */
  onAssigned(listener: (assignment: Assignment) => void): () => void;
  /** Leaves the group; the batch in hand finishes (and is committed) first. */
  stop(): Promise<void>;
}

export interface KafkaProducer {
  connect(): Promise<void>;
  /**
   * Writes `records` to `topic` with acks from all in-sync replicas, bounded by `timeoutMs` (a
   * hung broker is a `dependency_unavailable` error). A batch larger than PRODUCE_CHUNK_BYTES goes
   * out as consecutive requests, in order, one at a time (a key's records keep their order); with
   * `readByOffset`, so does one that would put more than PARTITION_BATCH_BYTES holding a big
   * record (BIG_RECORD_BYTES) in one partition's record batch.
   */
  send(
    topic: string,
    records: OutgoingRecord[],
    timeoutMs?: number,
    options?: SendOptions,
  ): Promise<ProducedBatch[]>;
  /**
   * The partitions of `topic` as this producer's last send to it saw them; undefined before its
   * first send there (a caller that places records itself learns the count by sending one).
   */
  partitionCount(topic: string): number | undefined;
  disconnect(): Promise<void>;
}

export interface SendOptions {
  /**
   * The topic is read by offset (`in`, by the executor's fetcher), which receives the whole record
   * batch around an offset: keep a partition's batch holding a big record small (batching.ts).
   * Topics read in order by consumers (`out`, events) are better served by big batches.
   */
  readByOffset?: boolean;
}

export interface TopicSpec {
  topic: string;
  numPartitions: number;
  replicationFactor: number;
  configEntries?: Array<{ name: string; value: string }>;
}

export interface PartitionOffsets {
  partition: number;
  /** First retained offset. */
  low: string;
  /** Next offset to be written (the high watermark). */
  high: string;
}

export interface KafkaAdmin {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  listTopics(): Promise<string[]>;
  /** Deletes these topics and their records (each must exist). */
  deleteTopics(topics: string[]): Promise<void>;
  /**
   * Creates the topics that are missing (existing ones are left as they are) and returns the
   * names it created, once every partition of `topics` has a leader (whoever created them);
   * retriable broker errors are asked again for up to `patienceMs`.
   */
  ensureTopics(topics: TopicSpec[], patienceMs?: number): Promise<string[]>;
  /** Log start and end of each partition of `topic` (retriable errors asked again for `patienceMs`). */
  topicOffsets(topic: string, patienceMs?: number): Promise<PartitionOffsets[]>;
  /** The committed offset of each partition of `topic` for `groupId` (-1: none). */
  committedOffsets(groupId: string, topic: string): Promise<Array<{ partition: number; offset: string }>>;
  /** Deletes the records of `partition` below `offset` (what retention does). */
  deleteRecordsBefore(topic: string, partition: number, offset: string): Promise<void>;
  /**
   * Resolves when the cluster answers a metadata request for `topic` alone: a request for every
   * topic grows with the cluster (4–5 s against a broker of 13,000 partitions), longer than a
   * readiness probe may take.
   */
  ping(topic: string): Promise<void>;
}

/** A record read by offset (see Fetcher). */
export interface FetchedRecord {
  ref: KafkaRef;
  key: Buffer | null;
  value: Buffer | null;
  headers: RecordHeaders;
  /** Epoch ms, as a decimal string. */
  timestamp: string;
}

/**
 * A record that cannot be read and never will be: `record_expired` when retention removed it
 * (the queue held the ref longer than the topic keeps data), `not_found` when the offset never
 * held a data record (beyond the end, a control record, a compacted gap, an unknown topic).
 * The executor answers these with an error result; they are not worth retrying.
 */
export class RecordUnavailableError extends RequesterError {
  readonly ref: KafkaRef;

  constructor(code: 'record_expired' | 'not_found', ref: KafkaRef, message: string) {
    super(code, `${message} (${ref.topic}/${ref.partition}@${ref.offset})`, { details: { ref } });
    this.name = 'RecordUnavailableError';
    this.ref = ref;
  }
}

export type FetchOutcome = { ok: true; record: FetchedRecord } | { ok: false; error: RequesterError };

/** Reads records by topic, partition and offset, without a consumer group (docs/architecture.md §9). */
export interface Fetcher {
  /** One record; throws RecordUnavailableError, or `dependency_unavailable` when Kafka does not answer. */
  fetch(ref: KafkaRef): Promise<FetchedRecord>;
  /** Many records, answers aligned with `refs`; never throws. */
  fetchMany(refs: readonly KafkaRef[]): Promise<FetchOutcome[]>;
  /** Bytes the kept records are charged (never above `cacheBytes`). */
  cachedBytes(): number;
  /** What the record cache did since the fetcher was made (benchmarks and tests read it). */
  cacheStats(): FetcherCacheStats;
  /**
   * The records of one key written at or after `sinceMs`, in order, up to the partition's end when
   * the read began: only the key's partition (the producer's key → partition mapping) is read.
   * Throws `not_found` for a topic that does not exist, `dependency_unavailable` when Kafka does
   * not answer within the fetcher's timeout.
   */
  readKey(topic: string, key: string, sinceMs: number): Promise<FetchedRecord[]>;
  close(): Promise<void>;
}

export interface FetcherCacheStats {
  /** Wanted records answered from the cache. */
  hits: number;
  /** Wanted records asked of the broker. */
  misses: number;
  /** Records put in the cache that were not wanted by the fetch that brought them. */
  neighbours: number;
  /** Of those, the ones pushed out by the byte bound before anyone asked for them. */
  evictedUnread: number;
}

export interface FetcherOptions {
  /** Independent broker connections used round-robin: one slow fetch does not queue the others. */
  connections?: number;
  /** How long the broker may hold a fetch when no data is available (only at the partition end). */
  maxWaitMs?: number;
  /**
   * Bytes asked per partition range at most (the broker always returns at least one whole batch);
   * less when the wanted offsets span fewer records of the topic's size last seen.
   */
  partitionMaxBytes?: number;
  /** Bytes asked per request (one request per broker). */
  requestMaxBytes?: number;
  /** Bound on one `fetch`/`fetchMany`: what is unresolved by then fails as `dependency_unavailable`. */
  timeoutMs?: number;
  /** Bytes of recently fetched records kept in memory (retries and neighbours re-read them); 0 = none. */
  cacheBytes?: number;
}

/** One cluster's clients; each call makes a new one, which its caller connects and closes. */
export interface KafkaClient {
  consumer(options: ConsumerOptions): KafkaConsumer;
  producer(): KafkaProducer;
  admin(): KafkaAdmin;
  fetcher(options?: FetcherOptions): Fetcher;
}

import type { Batch, Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import type {
  Assignment,
  ConsumeOptions,
  ConsumerCrash,
  ConsumerOptions,
  KafkaConsumer,
  RecordBatch,
  RecordBatchShape,
} from '../types.ts';
import { isKafkaUnreachableError } from './errors.ts';

export class KafkajsConsumer implements KafkaConsumer {
  readonly groupId: string;
  private readonly consumer: Consumer;
  private readonly commits: BackgroundCommits;

  constructor(kafka: Kafka, options: ConsumerOptions) {
    this.groupId = options.groupId;
    this.commits = new BackgroundCommits((offsets) => this.consumer.commitOffsets(offsets));
    this.consumer = kafka.consumer({
      groupId: options.groupId,
      allowAutoTopicCreation: false,
      // A member that died (kill -9, or lost in a broker crash: kafkajs rejoins under a new member
      // id) holds its partitions until its session expires: 10 s, not kafkajs's 30 s, keeps that
      // stall short. The router heartbeats inside its batches, so slow batches do not expire it.
      sessionTimeout: options.sessionTimeoutMs ?? 10_000,
      heartbeatInterval: 3_000,
      // An idle fetch waits at most this long: disconnect (shutdown phase 2) waits for it to return.
      maxWaitTimeInMs: options.maxWaitMs ?? 500,
      minBytes: options.minBytes ?? 1,
      ...(options.retries === undefined
        ? {}
        : { retry: { retries: options.retries, initialRetryTime: 100 } }),
    });
  }

  async start(options: ConsumeOptions): Promise<void> {
    const explicit = options.commit === 'after-batch';
    await this.consumer.connect();
    try {
      await this.consumer.subscribe({ topics: options.topics, fromBeginning: options.fromBeginning });
      await this.consumer.run({
        // kafkajs's own commits would be awaited after every batch, before the next fetch: a
        // broker round trip on the path of every record (the router's, so every sync call's).
        // Commits go in the background instead (see BackgroundCommits).
        autoCommit: false,
        // With explicit commits the offset is resolved by hand after the handler succeeded.
        eachBatchAutoResolve: !explicit,
        partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 1,
        eachBatch: (payload) => this.handle(payload, options, explicit),
      });
    } catch (err) {
      await this.consumer.disconnect().catch(() => {});
      throw err;
    }
  }

  private async handle(
    { batch, resolveOffset, heartbeat, isRunning }: EachBatchPayload,
    options: ConsumeOptions,
    explicit: boolean,
  ): Promise<void> {
    if (!isRunning()) return;
    await options.onBatch(recordBatch(batch), { heartbeat, isRunning });
    if (!explicit) return;
    resolveOffset(batch.lastOffset());
    this.commits.add(batch.topic, batch.partition, (BigInt(batch.lastOffset()) + 1n).toString());
    // Stopping: the batch in hand is committed before the member leaves the group.
    if (!isRunning()) await this.commits.flush();
  }

  pause(topics: string[]): void {
    this.consumer.pause(topics.map((topic) => ({ topic })));
  }

  resume(topics: string[]): void {
    this.consumer.resume(topics.map((topic) => ({ topic })));
  }

  seek(topic: string, partition: number, offset: string): void {
    this.consumer.seek({ topic, partition, offset });
  }

  onCrash(listener: (crash: ConsumerCrash) => void): () => void {
    return this.consumer.on(this.consumer.events.CRASH, ({ payload }) =>
      listener({
        error: payload.error,
        restart: payload.restart,
        unreachable: isKafkaUnreachableError(payload.error),
      }),
    );
  }

  onAssigned(listener: (assignment: Assignment) => void): () => void {
    return this.consumer.on(this.consumer.events.GROUP_JOIN, ({ payload }) =>
      listener(payload.memberAssignment as Assignment),
    );
  }

  async stop(): Promise<void> {
    await this.commits.flush();
    await this.consumer.disconnect();
  }
}

type OffsetToCommit = { topic: string; partition: number; offset: string };

/**
 * Commits after-batch offsets off the fetch loop: the latest offset of each partition, one commit
 * request at a time, what arrived meanwhile in the next. Only offsets whose batch was handled are
 * ever committed, so at-least-once holds; a commit lost to a rebalance, a crash or an outage only
 * means the records after the last commit that went through are delivered again.
 */
export class BackgroundCommits {
  private readonly commit: (offsets: OffsetToCommit[]) => Promise<void>;
  private readonly latest = new Map<string, OffsetToCommit>();
  private running: Promise<void> | undefined;

  constructor(commit: (offsets: OffsetToCommit[]) => Promise<void>) {
    this.commit = commit;
  }

  add(topic: string, partition: number, offset: string): void {
    this.latest.set(`${topic}\0${partition}`, { topic, partition, offset });
    this.running ??= this.drain();
  }

  /** Resolves once everything added so far was committed (or failed to be). */
  async flush(): Promise<void> {
    while (this.running) await this.running;
  }

  private async drain(): Promise<void> {
    while (this.latest.size > 0) {
      const offsets = [...this.latest.values()];
      this.latest.clear();
      await this.commit(offsets).catch(() => {}); // delivered again later: see above
    }
    this.running = undefined;
  }
}

function recordBatch(batch: Batch): RecordBatch {
  const { topic, partition } = batch;
  const shapes = batchShapes(batch.messages as DecodedMessage[]);
  return {
    topic,
    partition,
    lastOffset: batch.lastOffset(),
    records: batch.messages.map((message) => {
      const context = (message as DecodedMessage).batchContext;
      const shape = context && shapes.get(context);
      return {
        topic,
        partition,
        offset: message.offset,
        key: message.key ?? null,
        value: message.value ?? null,
        headers: message.headers ?? {},
        timestamp: message.timestamp,
        ...(shape ? { batch: shape } : {}),
      };
    }),
  };
}

/** kafkajs's decoded message: its record batch's header, one object shared by the batch's records. */
type DecodedMessage = Batch['messages'][number] & { batchContext?: { lastOffsetDelta?: number } };

/**
 * The shape of each record batch among `messages`, keyed by kafkajs's per-batch context object:
 * its record count from the batch header (lastOffsetDelta + 1, so records before the fetch offset
 * count too), its bytes summed over the keys and values delivered (headers are left out: small,
 * and walking them would cost every record of every batch).
 */
function batchShapes(messages: DecodedMessage[]): Map<object, RecordBatchShape> {
  const shapes = new Map<object, RecordBatchShape>();
  for (const message of messages) {
    const context = message.batchContext;
    if (!context) continue;
    let shape = shapes.get(context);
    if (!shape) {
      shape = { records: (context.lastOffsetDelta ?? 0) + 1, bytes: 0 };
      shapes.set(context, shape);
    }
    shape.bytes += (message.key?.length ?? 0) + (message.value?.length ?? 0);
  }
  return shapes;
}

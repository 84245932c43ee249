import type { Batch, Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import type {
  Assignment,
  ConsumeOptions,
  ConsumerCrash,
  ConsumerOptions,
  KafkaConsumer,
  RecordBatch,
} from '../types.ts';

export class KafkajsConsumer implements KafkaConsumer {
  readonly groupId: string;
  private readonly consumer: Consumer;

  constructor(kafka: Kafka, options: ConsumerOptions) {
    this.groupId = options.groupId;
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
        autoCommit: explicit,
        // With explicit commits the offset is resolved by hand after the handler succeeded; kafkajs
        // then commits what was resolved when the batch ends (autoCommit must stay on for that).
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
    { batch, resolveOffset, commitOffsetsIfNecessary, heartbeat, isRunning }: EachBatchPayload,
    options: ConsumeOptions,
    explicit: boolean,
  ): Promise<void> {
    if (!isRunning()) return;
    await options.onBatch(recordBatch(batch), { heartbeat, isRunning });
    if (!explicit) return;
    resolveOffset(batch.lastOffset());
    await commitOffsetsIfNecessary();
    await heartbeat();
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
      listener({ error: payload.error, restart: payload.restart }),
    );
  }

  onAssigned(listener: (assignment: Assignment) => void): () => void {
    return this.consumer.on(this.consumer.events.GROUP_JOIN, ({ payload }) =>
      listener(payload.memberAssignment as Assignment),
    );
  }

  stop(): Promise<void> {
    return this.consumer.disconnect();
  }
}

function recordBatch(batch: Batch): RecordBatch {
  const { topic, partition } = batch;
  return {
    topic,
    partition,
    lastOffset: batch.lastOffset(),
    records: batch.messages.map((message) => ({
      topic,
      partition,
      offset: message.offset,
      key: message.key ?? null,
      value: message.value ?? null,
      headers: message.headers ?? {},
      timestamp: message.timestamp,
    })),
  };
}

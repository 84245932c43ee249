import { type ICustomPartitioner, type Kafka, Partitioners, type Producer } from 'kafkajs';
import { chunksOf, PRODUCE_CHUNK_BYTES, withTimeout } from '../batching.ts';
import type { KafkaProducer, OutgoingRecord, ProducedBatch, SendOptions } from '../types.ts';
import { partitionOfKey } from './partitioner.ts';

const DEFAULT_TIMEOUT_MS = 10_000;

export class KafkajsProducer implements KafkaProducer {
  private readonly producer: Producer;
  private readonly defaultTimeoutMs: number;
  /** Partitions per topic, as kafkajs's partitioner last saw them (for chunking, see partitionOf). */
  private readonly partitionCounts = new Map<string, number>();

  constructor(kafka: Kafka, defaultTimeoutMs = DEFAULT_TIMEOUT_MS) {
    this.defaultTimeoutMs = defaultTimeoutMs;
    this.producer = kafka.producer({
      createPartitioner: learningPartitioner(this.partitionCounts),
      allowAutoTopicCreation: false,
      idempotent: false,
      maxInFlightRequests: 5,
    });
  }

  connect(): Promise<void> {
    return this.producer.connect();
  }

  disconnect(): Promise<void> {
    return this.producer.disconnect();
  }

  async send(
    topic: string,
    records: OutgoingRecord[],
    timeoutMs = this.defaultTimeoutMs,
    options: SendOptions = {},
  ): Promise<ProducedBatch[]> {
    if (records.length === 0) return [];
    const produced: ProducedBatch[] = [];
    const partitionOf = options.readByOffset ? (r: OutgoingRecord) => this.partitionOf(topic, r) : undefined;
    for (const chunk of chunksOf(records, PRODUCE_CHUNK_BYTES, partitionOf)) {
      const sent = await withTimeout(
        this.producer.send({ topic, messages: chunk, acks: -1, timeout: timeoutMs }),
        timeoutMs,
        `produce to ${topic} timed out after ${timeoutMs} ms`,
      );
      for (const { topicName, partition, baseOffset } of sent)
        produced.push({ topic: topicName, partition, baseOffset: baseOffset ?? '-1' });
    }
    return produced;
  }

  partitionCount(topic: string): number | undefined {
    return this.partitionCounts.get(topic);
  }

  /**
   * The partition a record goes to, for chunking: the one it names, else its key's (murmur2, as
   * the partitioner does) once this producer has written to the topic and knows its partition
   * count, else its key. Records with neither all count as one partition (the partitioner spreads
   * them): the cautious guess, as the cap only splits requests.
   */
  private partitionOf(topic: string, record: OutgoingRecord): string | number {
    if (record.partition !== undefined) return record.partition;
    if (record.key == null) return 'unkeyed';
    const count = this.partitionCounts.get(topic);
    if (count === undefined) return `key:${record.key.toString('latin1')}`;
    return partitionOfKey(record.key, count);
  }
}

/** kafkajs's default partitioner, noting each topic's partition count as it goes. */
function learningPartitioner(counts: Map<string, number>): ICustomPartitioner {
  return () => {
    const partitioner = Partitioners.DefaultPartitioner();
    return (args) => {
      if (counts.size >= 10_000 && !counts.has(args.topic)) counts.clear();
      counts.set(args.topic, args.partitionMetadata.length);
      return partitioner(args);
    };
  };
}

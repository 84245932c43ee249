import { type Kafka, Partitioners, type Producer } from 'kafkajs';
import { chunksOf, PRODUCE_CHUNK_BYTES, withTimeout } from '../batching.ts';
import type { KafkaProducer, OutgoingRecord, ProducedBatch } from '../types.ts';

const DEFAULT_TIMEOUT_MS = 10_000;

export class KafkajsProducer implements KafkaProducer {
  private readonly producer: Producer;
  private readonly defaultTimeoutMs: number;

  constructor(kafka: Kafka, defaultTimeoutMs = DEFAULT_TIMEOUT_MS) {
    this.defaultTimeoutMs = defaultTimeoutMs;
    this.producer = kafka.producer({
      createPartitioner: Partitioners.DefaultPartitioner,
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
  ): Promise<ProducedBatch[]> {
    if (records.length === 0) return [];
    const produced: ProducedBatch[] = [];
    for (const chunk of chunksOf(records, PRODUCE_CHUNK_BYTES)) {
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
}

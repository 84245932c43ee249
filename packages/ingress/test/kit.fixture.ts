import type { KafkaConsumer, KafkaProducer } from '@requester/shared/kafka';
import {
  consumeEach,
  createTestTopics,
  silentLogger,
  TEST_KAFKA_BROKERS,
  testKafka,
  uniqueName,
} from '@requester/shared/testing';

/**
 * Test helpers of the ingress tests, on top of `@requester/shared/testing`: fresh in/out topics,
 * one shared producer, and a streaming reader of what lands on a topic.
 */
export const BROKERS = TEST_KAFKA_BROKERS;
export const silent = silentLogger;
export const kafka = testKafka('ingress-test');

export const unique = (prefix = 't'): string => uniqueName(prefix);

/** Fresh `in`/`out` topics for one test. */
export async function topics(partitions = 3): Promise<{ in: string; out: string }> {
  const base = unique();
  const names = { in: `${base}.in`, out: `${base}.out` };
  await createTestTopics([names.in, names.out], partitions);
  return names;
}

let sharedProducer: Promise<KafkaProducer> | undefined;
export function producer(): Promise<KafkaProducer> {
  sharedProducer ??= (async () => {
    const p = kafka.producer();
    await p.connect();
    return p;
  })();
  return sharedProducer;
}

export async function closeProducer(): Promise<void> {
  if (sharedProducer) await (await sharedProducer).disconnect();
  sharedProducer = undefined;
}

export async function send(topic: string, key: string, value: unknown): Promise<void> {
  await (await producer()).send(topic, [{ key, value: JSON.stringify(value) }]);
}

export interface Seen {
  key: string | undefined;
  value: string;
  partition: number;
  headers: Record<string, string>;
}

/**
 * Reads `topic` from the beginning; `next()` resolves with the next record, or fails after
 * `timeoutMs` (so a missing record fails the test instead of hanging it) or once closed.
 */
export async function reader(
  topic: string,
): Promise<{ next(timeoutMs?: number): Promise<Seen>; close(): Promise<void> }> {
  // A short fetch wait: disconnect waits for the fetch in flight.
  const consumer: KafkaConsumer = kafka.consumer({ groupId: unique('g'), maxWaitMs: 200 });
  const queue: Seen[] = [];
  const positions = new Set<string>(); // a rebalance may deliver a record again: keep each offset once
  let wake: (() => void) | undefined;
  let closed = false;
  await consumeEach(consumer, topic, (message) => {
    const position = `${message.partition}:${message.offset}`;
    if (positions.has(position)) return;
    positions.add(position);
    queue.push({
      key: message.key?.toString(),
      value: message.value?.toString() ?? '',
      partition: message.partition,
      headers: Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k, String(v)])),
    });
    wake?.();
  });
  return {
    async next(timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (queue.length === 0) {
        if (closed) throw new Error(`reader of ${topic} closed`);
        if (Date.now() > deadline) throw new Error(`nothing on ${topic} within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 100);
        });
      }
      return queue.shift()!;
    },
    async close() {
      closed = true;
      wake?.();
      await consumer.stop();
    },
  };
}

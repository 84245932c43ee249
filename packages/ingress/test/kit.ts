import { randomBytes } from 'node:crypto';
import {
  type Consumer,
  createConsumer,
  createKafka,
  createLogger,
  createProducer,
  ensureTopics,
  type Producer,
  produce,
} from '@requester/shared';

/**
 * Test helpers shared by the ingress tests: the real local Kafka, unique topic names per test,
 * and a way to read what landed on a topic.
 */
export const BROKERS = process.env['KAFKA_BROKERS'] ?? '127.0.0.1:9092';
export const silent = createLogger({ level: 'silent' });
export const kafka = createKafka({ brokers: BROKERS, clientId: 'ingress-test', logger: silent });

export function unique(prefix = 't'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

/** Fresh `in`/`out` topics for one test. */
export async function topics(partitions = 3): Promise<{ in: string; out: string }> {
  const base = unique();
  const names = { in: `${base}.in`, out: `${base}.out` };
  const admin = kafka.admin();
  await admin.connect();
  try {
    await ensureTopics(
      admin,
      [names.in, names.out].map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })),
    );
  } finally {
    await admin.disconnect();
  }
  return names;
}

let sharedProducer: Promise<Producer> | undefined;
export function producer(): Promise<Producer> {
  sharedProducer ??= (async () => {
    const p = createProducer(kafka);
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
  await produce(await producer(), topic, [{ key, value: JSON.stringify(value) }]);
}

export interface Seen {
  key: string | undefined;
  value: string;
  partition: number;
}

/**
 * Reads `topic` from the beginning; `next()` resolves with the next record, or fails after
 * `timeoutMs` (so a missing record fails the test instead of hanging it) or once closed.
 */
export async function reader(
  topic: string,
): Promise<{ next(timeoutMs?: number): Promise<Seen>; close(): Promise<void> }> {
  // A short fetch wait: disconnect waits for the fetch in flight.
  const consumer: Consumer = createConsumer(kafka, { groupId: unique('g'), maxWaitTimeInMs: 200 });
  const queue: Seen[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message, partition }) => {
      queue.push({ key: message.key?.toString(), value: message.value?.toString() ?? '', partition });
      wake?.();
    },
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
      await consumer.disconnect();
    },
  };
}

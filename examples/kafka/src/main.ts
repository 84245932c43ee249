/**
 * Runs the example against `./dev start` (Kafka on 127.0.0.1:9092, topics requester.in/out):
 *
 *   pnpm --filter @requester/example-kafka start
 *
 * It writes three wake-ups to `in` and prints their results as they come on `out`.
 * KAFKA_BROKERS (default 127.0.0.1:9092), KAFKA_TOPIC_IN, KAFKA_TOPIC_OUT.
 */
import { Kafka, logLevel } from 'kafkajs';
import { collectResults } from './consumer.ts';
import { produceRequests } from './producer.ts';

const kafka = new Kafka({
  clientId: 'requester-example',
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  logLevel: logLevel.WARN,
});
const producer = kafka.producer();
const consumer = kafka.consumer({ groupId: `requester-example-${process.pid}` });
await Promise.all([producer.connect(), consumer.connect()]);
try {
  const ids = await produceRequests(producer, { topic: process.env.KAFKA_TOPIC_IN ?? 'requester.in' });
  console.log(`sent ${ids.join(', ')}`);
  const results = await collectResults(consumer, ids, {
    topic: process.env.KAFKA_TOPIC_OUT ?? 'requester.out',
    signal: AbortSignal.timeout(60_000),
  });
  for (const [id, result] of results) console.log(id, result.response.status, result.response.body);
} finally {
  await Promise.all([producer.disconnect(), consumer.disconnect()]);
}

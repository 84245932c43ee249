/**
 * Runs the example against `./dev start` (Kafka on 127.0.0.1:9092, topics requester.in/out):
 *
 *   pnpm --filter @requester/example-kafka start
 *
 * It writes three wake-ups to `in` and prints their results as they come on `out`.
 * KAFKA_BROKERS (default 127.0.0.1:9092), KAFKA_TOPIC_IN, KAFKA_TOPIC_OUT.
 */
import { collectResults } from './consumer.ts';
import { connectKafka } from './kafka.ts';
import { produceRequests } from './producer.ts';

const kafka = await connectKafka({
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  groupId: `requester-example-${process.pid}`,
});
try {
  const ids = await produceRequests(kafka.producer, { topic: process.env.KAFKA_TOPIC_IN ?? 'requester.in' });
  console.log(`sent ${ids.join(', ')}`);
  const results = await collectResults(kafka.consumer, ids, {
    topic: process.env.KAFKA_TOPIC_OUT ?? 'requester.out',
    signal: AbortSignal.timeout(60_000),
  });
  for (const [id, result] of results) console.log(id, result.response.status, result.response.body);
} finally {
  await kafka.close();
}

import type { KafkaProducer } from '@requester/shared/kafka';
import { consumeEach, createTestTopics, eventually, testKafka, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerLag } from './samplers.ts';

describe('consumerLag', () => {
  const kafka = testKafka();
  const admin = kafka.admin();
  const topic = uniqueName('lag');
  const group = uniqueName('lag-group');
  let producer: KafkaProducer;
  const records = (partition: number, n: number) =>
    Array.from({ length: n }, (_, i) => ({ partition, value: `m${i}` }));
  const lagOf = async () =>
    (await consumerLag(admin, group, topic)).sort((a, b) => a.partition - b.partition);

  beforeAll(async () => {
    await createTestTopics([topic], 2);
    await admin.connect();
    producer = kafka.producer();
    await producer.connect();
    await producer.send(topic, [...records(0, 5), ...records(1, 3)], 10_000);
  });
  afterAll(async () => {
    await producer.disconnect();
    await admin.disconnect();
  });

  it('is the high watermark minus the committed offset; a partition never committed counts every record', async () => {
    expect(await lagOf()).toEqual([
      { partition: 0, lag: 5 },
      { partition: 1, lag: 3 },
    ]);
    // The group reads and commits everything, then two more records arrive on partition 1.
    const consumer = kafka.consumer({ groupId: group });
    let seen = 0;
    await consumeEach(consumer, topic, () => void seen++);
    await eventually(
      async () =>
        JSON.stringify(await lagOf()) ===
        JSON.stringify([
          { partition: 0, lag: 0 },
          { partition: 1, lag: 0 },
        ]),
      20_000,
      'the group committed every record',
    );
    await consumer.stop();
    expect(seen).toBe(8);
    await producer.send(topic, records(1, 2), 10_000);
    expect(await lagOf()).toEqual([
      { partition: 0, lag: 0 },
      { partition: 1, lag: 2 },
    ]);
  });
});

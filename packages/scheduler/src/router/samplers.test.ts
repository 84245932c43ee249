import { createProducer, produce } from '@requester/shared';
import { createTestTopics, testKafka, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerLag } from './samplers.ts';

describe('consumerLag', () => {
  const kafka = testKafka();
  const admin = kafka.admin();
  const topic = uniqueName('lag');
  const group = uniqueName('lag-group');

  beforeAll(async () => {
    await createTestTopics([topic], 2);
    await admin.connect();
    const producer = createProducer(kafka);
    await producer.connect();
    const messages = (partition: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({ partition, value: `m${i}` }));
    await produce(producer, topic, [...messages(0, 5), ...messages(1, 3)], 10_000);
    await producer.disconnect();
  });
  afterAll(() => admin.disconnect());

  it('is the high watermark minus the committed offset; a partition never committed counts every record', async () => {
    expect((await consumerLag(admin, group, topic)).sort((a, b) => a.partition - b.partition)).toEqual([
      { partition: 0, lag: 5 },
      { partition: 1, lag: 3 },
    ]);
    await admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '2' }] });
    const lag = await consumerLag(admin, group, topic);
    expect(lag.sort((a, b) => a.partition - b.partition)).toEqual([
      { partition: 0, lag: 3 },
      { partition: 1, lag: 3 },
    ]);
  });
});

import { createTestTopics, testKafka, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanTopic } from './scan.ts';
import type { KafkaProducer } from './types.ts';

describe('scanTopic over real Kafka', () => {
  let producer: KafkaProducer;

  beforeAll(async () => {
    producer = testKafka().producer();
    await producer.connect();
  });

  afterAll(async () => {
    await producer.disconnect();
  });

  it('reads every record up to the end offsets taken at the start, in order per partition, and stops', async () => {
    const topic = uniqueName('scan');
    await createTestTopics([topic], 3);
    const values = Array.from({ length: 30 }, (_, i) => `v${i}`);
    await producer.send(
      topic,
      values.map((value, i) => ({ key: `k${i % 7}`, value })),
    );

    const seen: Array<{ partition: number; offset: number; value: string }> = [];
    const progress: number[] = [];
    const result = await scanTopic(testKafka(), topic, {
      onMessage: async (message, partition) => {
        seen.push({ partition, offset: Number(message.offset), value: String(message.value) });
        // Written during the scan: past the end offsets, so not part of it.
        if (seen.length === 1) await producer.send(topic, [{ key: 'late', value: 'late' }]);
      },
      onProgress: (read) => progress.push(read),
    });

    expect(result).toEqual({ read: 30, failed: 0, incomplete: [] });
    expect(seen.map((s) => s.value).sort()).toEqual([...values].sort());
    for (const partition of [0, 1, 2]) {
      const offsets = seen.filter((s) => s.partition === partition).map((s) => s.offset);
      expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    }
    expect(progress.at(-1)).toBe(30);
  });

  it('returns at once for an empty topic, and names a missing one', async () => {
    const topic = uniqueName('scan-empty');
    await createTestTopics([topic], 2);
    expect(await scanTopic(testKafka(), topic, { onMessage: () => {} })).toEqual({
      read: 0,
      failed: 0,
      incomplete: [],
    });
    await expect(scanTopic(testKafka(), `${topic}-missing`, { onMessage: () => {} })).rejects.toThrow(
      /topic .*-missing does not exist/,
    );
  });

  it('skips a record its handler throws for and reads on, without a consumer crash', async () => {
    const topic = uniqueName('scan-poison');
    await createTestTopics([topic], 1);
    await producer.send(
      topic,
      ['a', 'poison', 'b'].map((value) => ({ value })),
    );
    const seen: string[] = [];
    const failed: string[] = [];
    const result = await scanTopic(testKafka(), topic, {
      onMessage: (message) => {
        if (String(message.value) === 'poison') throw new TypeError('cannot handle this one');
        seen.push(String(message.value));
      },
      onFailed: (message) => failed.push(message.offset),
    });
    expect(result).toEqual({ read: 3, failed: 1, incomplete: [] });
    expect(seen).toEqual(['a', 'b']);
    expect(failed).toEqual(['1']);
  });
});

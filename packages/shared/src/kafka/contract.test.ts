import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestTopics,
  eventually,
  silentLogger,
  TEST_KAFKA_BROKERS,
  uniqueName,
} from '../testing/index.ts';
import { PRODUCE_CHUNK_BYTES } from './batching.ts';
import { createKafka } from './kafkajs/index.ts';
import {
  type ConsumeOptions,
  type KafkaClient,
  type KafkaConsumer,
  type KafkaProducer,
  type KafkaRecord,
  RecordUnavailableError,
} from './types.ts';

/**
 * The contract of Requester's Kafka interface (types.ts), against the local broker. Written
 * against the interface only: a second adapter runs the same suite by adding its factory here.
 */
const adapters: Array<[string, () => KafkaClient]> = [
  [
    'kafkajs',
    () =>
      createKafka({ brokers: TEST_KAFKA_BROKERS, clientId: uniqueName('contract'), logger: silentLogger }),
  ],
];

describe.each(adapters)('Kafka interface contract: %s adapter', (_name, connect) => {
  let kafka: KafkaClient;
  let producer: KafkaProducer;
  const consumers: KafkaConsumer[] = [];

  beforeAll(async () => {
    kafka = connect();
    producer = kafka.producer();
    await producer.connect();
  });

  afterAll(async () => {
    await Promise.all(consumers.map((c) => c.stop().catch(() => {})));
    await producer.disconnect();
  });

  async function topic(partitions = 1): Promise<string> {
    const name = uniqueName('contract');
    await createTestTopics([name], partitions);
    return name;
  }

  function consumer(groupId = uniqueName('g')): KafkaConsumer {
    const c = kafka.consumer({ groupId, maxWaitMs: 200 });
    consumers.push(c);
    return c;
  }

  async function committed(groupId: string, name: string): Promise<number> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const offsets = await admin.committedOffsets(groupId, name);
      return offsets.reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
    } finally {
      await admin.disconnect();
    }
  }

  /** Consumes `name` with explicit commits; `onBatch` decides what happens to each batch. */
  function consume(c: KafkaConsumer, name: string, onBatch: ConsumeOptions['onBatch']): Promise<void> {
    return c.start({ topics: [name], fromBeginning: true, commit: 'after-batch', onBatch });
  }

  it('produces a batch, and consumes it in order with every record field; commits after the handler', async () => {
    const name = await topic();
    const sent = await producer.send(
      name,
      Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, headers: { n: String(i) } })),
    );
    expect(sent[0]).toMatchObject({ topic: name, partition: 0, baseOffset: '0' });
    const c = consumer();
    const seen: KafkaRecord[] = [];
    await consume(c, name, async ({ records }) => {
      seen.push(...records);
    });
    await eventually(async () => seen.length >= 20, 20_000, 'all 20 records');
    const first = seen[0]!;
    expect(first).toMatchObject({ topic: name, partition: 0, offset: '0' });
    expect(first.key?.toString()).toBe('k0');
    expect(first.value?.toString()).toBe('v0');
    expect(String(first.headers.n)).toBe('0');
    expect(Math.abs(Number(first.timestamp) - Date.now())).toBeLessThan(10 * 60_000);
    expect(seen.map((r) => r.value?.toString())).toEqual(Array.from({ length: 20 }, (_, i) => `v${i}`));
    await eventually(async () => (await committed(c.groupId, name)) === 20, 20_000, '20 committed');
  });

  it('stop commits the batches already handled before leaving (commits run off the fetch loop)', async () => {
    const name = await topic();
    await producer.send(
      name,
      Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
    );
    const c = consumer();
    let seen = 0;
    await consume(c, name, async ({ records }) => {
      seen += records.length;
    });
    await eventually(async () => seen >= 10, 20_000, 'all 10 records');
    await c.stop();
    expect(await committed(c.groupId, name)).toBe(10);
  });

  it('does not commit a batch whose handler throws: it is delivered again', async () => {
    const name = await topic();
    await producer.send(name, [{ value: 'a' }, { value: 'b' }]);
    const c = consumer();
    let attempts = 0;
    const crashes: boolean[] = [];
    c.onCrash(({ restart }) => crashes.push(restart));
    let committedWhileFailing = -1;
    await consume(c, name, async () => {
      attempts++;
      if (attempts === 2) committedWhileFailing = await committed(c.groupId, name);
      if (attempts <= 2) throw new Error('handler failed');
    });
    await eventually(async () => attempts >= 3, 30_000, 'the batch delivered a third time');
    // Until the handler succeeded, nothing was committed; then the whole batch was.
    expect(committedWhileFailing).toBe(0);
    await eventually(async () => (await committed(c.groupId, name)) === 2, 20_000, 'committed after success');
    expect(crashes.every((restart) => restart)).toBe(true);
  });

  it('commits nothing with commit: never', async () => {
    const name = await topic();
    await producer.send(name, [{ value: 'a' }]);
    const c = consumer();
    let seen = 0;
    await c.start({
      topics: [name],
      fromBeginning: true,
      commit: 'never',
      onBatch: async ({ records }) => {
        seen += records.length;
      },
    });
    await eventually(async () => seen === 1, 20_000, 'the record');
    await c.stop();
    expect(await committed(c.groupId, name)).toBe(0);
  });

  it('pauses a topic (records stay in Kafka) and resumes it', async () => {
    const name = await topic();
    const c = consumer();
    let seen = 0;
    await consume(c, name, async ({ records }) => {
      seen += records.length;
    });
    await producer.send(name, [{ value: 'before' }]);
    await eventually(async () => seen === 1, 20_000, 'the first record');
    c.pause([name]);
    await producer.send(name, [{ value: 'while paused' }]);
    // Bounded wait for what must not happen: a few fetch cycles of the consumer (maxWaitMs 200).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(seen).toBe(1);
    c.resume([name]);
    await eventually(async () => seen === 2, 20_000, 'the record held while paused');
  });

  it('positions a fresh member where onAssigned seeks', async () => {
    const name = await topic();
    await producer.send(name, [{ value: 'old' }, { value: 'new' }]);
    const c = consumer();
    c.onAssigned((assignment) => {
      for (const partition of assignment[name] ?? []) c.seek(name, partition, '1');
    });
    const seen: string[] = [];
    await consume(c, name, async ({ records }) => {
      seen.push(...records.map((r) => String(r.value)));
    });
    await eventually(async () => seen.length > 0, 20_000, 'a record');
    expect(seen).toEqual(['new']);
  });

  it('fetches by offset, and tells an expired offset and one past the end apart', async () => {
    const name = await topic(2);
    await producer.send(name, [
      { partition: 0, value: 'p0-0' },
      { partition: 0, value: 'p0-1' },
      { partition: 1, value: 'p1-0' },
    ]);
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteRecordsBefore(name, 0, '1'); // as retention would
    expect((await admin.topicOffsets(name)).find((p) => p.partition === 0)).toMatchObject({
      low: '1',
      high: '2',
    });
    await admin.disconnect();
    const fetcher = kafka.fetcher({ cacheBytes: 0 });
    try {
      const ref = (partition: number, offset: number) => ({ topic: name, partition, offset: String(offset) });
      const [expired, kept, other, beyond] = await fetcher.fetchMany([
        ref(0, 0),
        ref(0, 1),
        ref(1, 0),
        ref(1, 5),
      ]);
      expect(expired?.ok === false && expired.error).toBeInstanceOf(RecordUnavailableError);
      expect(expired?.ok === false && expired.error.code).toBe('record_expired');
      expect(kept?.ok && kept.record.value?.toString()).toBe('p0-1');
      expect(other?.ok && other.record).toMatchObject({ ref: ref(1, 0) });
      expect(beyond?.ok === false && beyond.error.code).toBe('not_found');
    } finally {
      await fetcher.close();
    }
  });

  it('splits a batch larger than one request into consecutive requests, in order', async () => {
    const name = uniqueName('contract-big');
    const admin = kafka.admin();
    await admin.connect();
    // The broker's default limit: one request with the whole batch would be refused.
    await admin.ensureTopics([
      {
        topic: name,
        numPartitions: 1,
        replicationFactor: 1,
        configEntries: [{ name: 'max.message.bytes', value: '1048588' }],
      },
    ]);
    const values = Array.from({ length: 24 }, (_, i) => `${i}:`.padEnd(100 * 1024, 'x'));
    const sent = await producer.send(
      name,
      values.map((value) => ({ partition: 0, value })),
    );
    expect(sent.length).toBeGreaterThanOrEqual(Math.ceil((24 * 100 * 1024) / PRODUCE_CHUNK_BYTES));
    expect(sent.map((s) => Number(s.baseOffset))).toEqual(
      [...sent.map((s) => Number(s.baseOffset))].sort((a, b) => a - b),
    );
    const [offsets] = await admin.topicOffsets(name);
    expect(offsets?.high).toBe(String(values.length));
    await admin.disconnect();
    const fetcher = kafka.fetcher({ cacheBytes: 0 });
    try {
      const last = await fetcher.fetch({ topic: name, partition: 0, offset: '23' });
      expect(last.value?.toString().startsWith('23:')).toBe(true);
    } finally {
      await fetcher.close();
    }
  }, 60_000);
});

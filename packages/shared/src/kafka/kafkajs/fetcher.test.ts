import { Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestTopics,
  settledMemory,
  TEST_KAFKA_BROKERS,
  testKafka,
  uniqueName,
} from '../../testing/index.ts';
import type { KafkaRef } from '../types.ts';
import { type FetchOutcome, type KafkaProducer, RecordUnavailableError } from '../types.ts';

/** Against the real local broker: every topic is new, so offsets are known from what we write. */
describe('Kafka fetcher (read by offset)', () => {
  const kafka = testKafka();
  let producer: KafkaProducer;
  const fetcher = kafka.fetcher();

  beforeAll(async () => {
    producer = kafka.producer();
    await producer.connect();
  });
  afterAll(async () => {
    await producer.disconnect();
    await fetcher.close();
  });

  /** Writes `count` records to one partition, one produce call each (so one batch each). */
  async function write(topic: string, partition: number, count: number, size = 0, batch = false) {
    const messages = Array.from({ length: count }, (_, i) => ({
      partition,
      key: `k-${partition}-${i}`,
      value: `v-${partition}-${i}`.padEnd(size, '.'),
      headers: { n: String(i) },
    }));
    if (batch)
      await producer.send(topic, messages, undefined, { readByOffset: true }); // as `in` is
    else for (const m of messages) await producer.send(topic, [m]);
    return messages;
  }

  /** Moves the log start of partition 0 to `offset`, the way retention does. */
  async function deleteBelow(topic: string, offset: number) {
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.deleteRecordsBefore(topic, 0, String(offset));
    } finally {
      await admin.disconnect();
    }
  }

  /** Waits (bounded) until partition 0 of `topic` ends at `offset`. */
  async function untilEndOffset(topic: string, offset: number) {
    const admin = kafka.admin();
    await admin.connect();
    try {
      for (let i = 0; i < 200; i++) {
        const [p0] = await admin.topicOffsets(topic);
        if (Number(p0?.high) >= offset) return;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      throw new Error(`${topic} did not reach offset ${offset}`);
    } finally {
      await admin.disconnect();
    }
  }

  const ref = (topic: string, partition: number, offset: number): KafkaRef => ({
    topic,
    partition,
    offset: String(offset),
  });
  const value = (o: FetchOutcome | undefined) => (o?.ok ? o.record.value?.toString() : o?.error.code);

  it('reads one record by offset, with key, headers and timestamp, dropping the rest of its batch', async () => {
    const topic = uniqueName('fetch-one');
    await createTestTopics([topic], 1);
    await write(topic, 0, 5, 0, true); // one batch of five: the fetch returns all of it

    const record = await fetcher.fetch(ref(topic, 0, 3));
    expect(record.ref).toEqual(ref(topic, 0, 3));
    expect(record.value?.toString()).toBe('v-0-3');
    expect(record.key?.toString()).toBe('k-0-3');
    expect(record.headers.n?.toString()).toBe('3');
    expect(Number(record.timestamp)).toBeGreaterThan(0);
  });

  it('reads many records across partitions in one call, answers aligned with the refs', async () => {
    const topic = uniqueName('fetch-many');
    await createTestTopics([topic], 3);
    for (const p of [0, 1, 2]) await write(topic, p, 10);

    const refs = [ref(topic, 2, 9), ref(topic, 0, 0), ref(topic, 1, 5), ref(topic, 0, 7), ref(topic, 2, 9)];
    const outcomes = await fetcher.fetchMany(refs);
    expect(outcomes.map(value)).toEqual(['v-2-9', 'v-0-0', 'v-1-5', 'v-0-7', 'v-2-9']);
  });

  it('reads ranges larger than one response, in several rounds', async () => {
    const topic = uniqueName('fetch-range');
    await createTestTopics([topic], 2);
    await write(topic, 0, 60, 4_000, true);
    await write(topic, 1, 60, 4_000);
    const small = kafka.fetcher({
      partitionMaxBytes: 16_000, // a few records per round
      cacheBytes: 0,
    });
    try {
      const refs = [0, 1].flatMap((p) => Array.from({ length: 60 }, (_, i) => ref(topic, p, i)));
      const outcomes = await small.fetchMany(refs);
      expect(outcomes.filter((o) => !o.ok)).toEqual([]);
      expect(outcomes.map((o) => value(o)?.slice(0, 8).replaceAll('.', ''))).toEqual(
        refs.map((r) => `v-${r.partition}-${r.offset}`),
      );
    } finally {
      await small.close();
    }
  });

  it('reads scattered offsets of big records as ranges of their own, fetched at once', async () => {
    const topic = uniqueName('fetch-scatter');
    await createTestTopics([topic], 1);
    await write(topic, 0, 40, 100_000); // one batch each; ranges split at gaps of 2+ records
    const scattered = kafka.fetcher({ cacheBytes: 0 });
    try {
      await scattered.fetch(ref(topic, 0, 39)); // learns the record size
      const offsets = [0, 1, 9, 17, 18, 30, 38, 39, 41]; // 41: past the end
      const outcomes = await scattered.fetchMany(offsets.map((o) => ref(topic, 0, o)));
      expect(outcomes.map((o) => value(o)?.replace(/\.+$/, ''))).toEqual([
        ...offsets.slice(0, -1).map((o) => `v-0-${o}`),
        'not_found',
      ]);
    } finally {
      await scattered.close();
    }
  });

  it('reads a big record of each of several partitions in one call without its neighbours (no read-ahead)', async () => {
    const topic = uniqueName('fetch-big');
    await createTestTopics([topic], 3);
    // As the producer writes big records: a batch each (PARTITION_BATCH_BYTES), sent together.
    for (const p of [0, 1, 2]) await write(topic, p, 12, 40_000, true);
    const big = kafka.fetcher();
    try {
      await big.fetch(ref(topic, 0, 11)); // learns the record size (the last offset: nothing after it)
      const before = big.cacheStats();
      // One Fetch carries the three partitions; each is asked about one record's bytes, and only
      // the first partition of a response is exempt from that bound: each must still come whole.
      const outcomes = await big.fetchMany([ref(topic, 0, 3), ref(topic, 1, 5), ref(topic, 2, 7)]);
      expect(outcomes.map((o) => value(o)?.replace(/\.+$/, ''))).toEqual(['v-0-3', 'v-1-5', 'v-2-7']);
      const after = big.cacheStats();
      expect(after.misses - before.misses).toBe(3);
      expect(after.neighbours - before.neighbours).toBe(0); // what came was what was asked for
      expect((await big.fetch(ref(topic, 1, 5))).value?.toString()).toMatch(/^v-1-5/);
      expect(big.cacheStats().hits - after.hits).toBe(1); // and it was kept for a retry
    } finally {
      await big.close();
    }
  });

  it('counts the neighbours its cache pushed out before anyone asked for them', async () => {
    const topic = uniqueName('fetch-stats');
    await createTestTopics([topic], 1);
    await write(topic, 0, 6, 20_000, true); // two batches of three: the first fetch (1 MiB) brings all six
    const small = kafka.fetcher({ cacheBytes: 50_000 }); // holds two of them
    try {
      expect((await small.fetch(ref(topic, 0, 0))).value?.toString()).toMatch(/^v-0-0/);
      const stats = small.cacheStats();
      expect(stats).toMatchObject({ hits: 0, misses: 1, neighbours: 5 });
      expect(stats.evictedUnread).toBeGreaterThanOrEqual(3);
      expect(small.cachedBytes()).toBeLessThanOrEqual(50_000);
    } finally {
      await small.close();
    }
  });

  it('answers not_found for offsets past the end, unknown partitions and unknown topics', async () => {
    const topic = uniqueName('fetch-missing');
    await createTestTopics([topic], 1);
    await write(topic, 0, 3);

    const outcomes = await fetcher.fetchMany([
      ref(topic, 0, 1),
      ref(topic, 0, 3), // the next offset to be written
      ref(topic, 0, 1_000),
      ref(topic, 7, 0),
      ref(uniqueName('no-such-topic'), 0, 0),
    ]);
    expect(outcomes.map(value)).toEqual(['v-0-1', 'not_found', 'not_found', 'not_found', 'not_found']);
    for (const o of outcomes.slice(1)) expect(!o.ok && o.error).toBeInstanceOf(RecordUnavailableError);
    await expect(fetcher.fetch(ref(topic, 0, 1_000))).rejects.toThrow(/no record yet.*@1000/);
  });

  it('answers record_expired for offsets below the log start, and still reads the rest', async () => {
    const topic = uniqueName('fetch-expired');
    await createTestTopics([topic], 1);
    await write(topic, 0, 10);
    await deleteBelow(topic, 6); // as retention would

    const outcomes = await fetcher.fetchMany([
      ref(topic, 0, 2),
      ref(topic, 0, 5),
      ref(topic, 0, 6),
      ref(topic, 0, 9),
    ]);
    expect(outcomes.map(value)).toEqual(['record_expired', 'record_expired', 'v-0-6', 'v-0-9']);
    const error = outcomes[0]?.ok === false ? outcomes[0].error : undefined;
    expect(error).toBeInstanceOf(RecordUnavailableError);
    expect(error?.message).toMatch(/log starts at 6/);
  });

  it('skips transaction markers: the marker offset holds no data record', async () => {
    const topic = uniqueName('fetch-txn');
    await createTestTopics([topic], 1);
    // Transactions are no part of Requester's interface: kafkajs itself writes the markers.
    const txProducer = new Kafka({ brokers: [TEST_KAFKA_BROKERS], clientId: uniqueName('tx') }).producer({
      transactionalId: uniqueName('tx'),
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await txProducer.connect();
    try {
      const tx = await txProducer.transaction();
      await tx.send({
        topic,
        messages: [
          { partition: 0, value: 'in-tx-0' },
          { partition: 0, value: 'in-tx-1' },
        ],
      });
      await tx.commit(); // offsets 0, 1 data; 2 the commit marker (written after commit returns)
      await untilEndOffset(topic, 3);
      await write(topic, 0, 1); // offset 3
    } finally {
      await txProducer.disconnect();
    }

    const outcomes = await fetcher.fetchMany([
      ref(topic, 0, 0),
      ref(topic, 0, 1),
      ref(topic, 0, 2),
      ref(topic, 0, 3),
    ]);
    expect(outcomes.map(value)).toEqual(['in-tx-0', 'in-tx-1', 'not_found', 'v-0-0']);
  });

  it('serves recently read records from memory', async () => {
    const topic = uniqueName('fetch-cache');
    await createTestTopics([topic], 1);
    await write(topic, 0, 4, 0, true);
    expect((await fetcher.fetch(ref(topic, 0, 0))).value?.toString()).toBe('v-0-0');

    await deleteBelow(topic, 4);

    // Its neighbours came in the same batch and were kept too: no broker round trip for them.
    const outcomes = await fetcher.fetchMany([ref(topic, 0, 0), ref(topic, 0, 3)]);
    expect(outcomes.map(value)).toEqual(['v-0-0', 'v-0-3']);
  });

  it('keeps records within cacheBytes, by its accounting and in memory (a kept record holds no fetch response)', async () => {
    const topic = uniqueName('fetch-bound');
    const partitions = 8;
    await createTestTopics([topic], partitions);
    // Per partition, one batch: a small record and a big one. The big one never fits the cache.
    for (let p = 0; p < partitions; p++) {
      await producer.send(topic, [
        { partition: p, key: 'small', value: `s-${p}` },
        { partition: p, key: 'big', value: 'b'.repeat(600_000) },
      ]);
    }
    const bounded = kafka.fetcher({
      cacheBytes: 64 * 1024,
    });
    try {
      await bounded.fetch(ref(topic, 0, 0)); // connected, metadata loaded: not part of what is measured
      const before = await settledMemory();
      for (let p = 1; p < partitions; p++) {
        expect((await bounded.fetch(ref(topic, p, 0))).value?.toString()).toBe(`s-${p}`);
        expect(bounded.cachedBytes()).toBeLessThanOrEqual(64 * 1024);
      }
      const grown = (await settledMemory()) - before;
      expect(bounded.cachedBytes()).toBeGreaterThan(0); // the small records are kept
      // 7 responses of ~600 KB went through; views kept by the cache would hold ~4 MB of them.
      expect(grown).toBeLessThan(1_000_000);
    } finally {
      await bounded.close();
    }
  });
});

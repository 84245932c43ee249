import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/index.ts';
import { createLogger } from '../../log/index.ts';
import {
  capturingLogger,
  eventually,
  type PrivateKafka,
  startPrivateKafka,
  TEST_KAFKA_BROKERS,
  testKafka,
  uniqueName,
} from '../../testing/index.ts';
import { BIG_RECORD_BYTES, chunksOf, PARTITION_BATCH_BYTES, PRODUCE_CHUNK_BYTES } from '../batching.ts';
import { kafkaSecurityFrom } from '../security.ts';
import type { KafkaClient } from '../types.ts';
import { isRetriableKafkaError } from './errors.ts';
import { createKafka } from './index.ts';
import { kafkaLogCreator } from './options.ts';

/**
 * Proves the local broker is a real Kafka: this test starts its own broker with infra/kafka.sh on
 * a spare port and its own data folder (so restarting it does not disturb other tests), produces
 * and consumes through the adapter, commits offsets in a consumer group, restarts the broker and
 * finds both the records and the committed offsets again.
 */
describe('local Kafka broker (infra/kafka.sh)', () => {
  let broker: PrivateKafka;
  let kafka: KafkaClient;
  const topic = 'broker-test';
  const group = 'broker-test-group';

  beforeAll(async () => {
    broker = await startPrivateKafka();
    kafka = createKafka({
      brokers: broker.brokers,
      clientId: 'broker-test',
      logger: createLogger({ level: 'silent' }),
    });
  }, 180_000);

  afterAll(() => broker?.stop(), 60_000);

  async function consumeAll(expected: number): Promise<string[]> {
    const consumer = kafka.consumer({ groupId: group });
    // A set: a group rebalance during the first join may deliver a record twice (at-least-once).
    const seen = new Set<string>();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${seen.size} of ${expected}`)), 30_000);
      consumer
        .start({
          topics: [topic],
          fromBeginning: true,
          commit: 'after-batch',
          onBatch: async ({ records }) => {
            for (const record of records) seen.add(record.value?.toString() ?? '');
            if (seen.size >= expected) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
    await consumer.stop(); // the batches' offsets are committed
    return [...seen];
  }

  async function retryWhileLoading<T>(ask: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await ask();
      } catch (err) {
        // A broker that just restarted answers retriable errors for a while (e.g. Kafka error 14,
        // the group coordinator still loading).
        const loading = isRetriableKafkaError(err);
        if (!loading || attempt >= 60) throw err;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  it('produces, consumes in a group, commits offsets, and keeps both across a restart', async () => {
    const admin = kafka.admin();
    await admin.connect();
    expect(await admin.ensureTopics([{ topic, numPartitions: 2, replicationFactor: 1 }])).toEqual([topic]);
    expect(await admin.ensureTopics([{ topic, numPartitions: 2, replicationFactor: 1 }])).toEqual([]);

    const producer = kafka.producer();
    await producer.connect();
    const values = Array.from({ length: 50 }, (_, i) => `m-${i}`);
    await producer.send(
      topic,
      values.map((value) => ({ key: value, value })),
    );
    await producer.disconnect();

    expect((await consumeAll(values.length)).sort()).toEqual([...values].sort());
    const committed = await admin.committedOffsets(group, topic);
    const committedTotal = committed.reduce((sum, p) => sum + Number(p.offset), 0);
    expect(committedTotal).toBe(values.length);
    await admin.disconnect();

    await broker.gracefulRestart();

    const after = kafka.admin();
    await after.connect();
    const offsets = await retryWhileLoading(() => after.topicOffsets(topic));
    expect(offsets.reduce((sum, p) => sum + Number(p.high), 0)).toBe(values.length);
    // Right after a restart the group coordinator may still be loading its state: ask again.
    const again = await retryWhileLoading(() => after.committedOffsets(group, topic));
    expect(again.reduce((sum, p) => sum + Number(p.offset), 0)).toBe(values.length);
    await after.disconnect();
  }, 180_000);

  it('a consumer crashed by a broker killed with kill -9 rejoins its group as the same member once the broker is back', async () => {
    // The patched kafkajs (patches/README.md): a member that could not leave its group keeps its id
    // across the consumer's restart, so the coordinator does not hold the group's rebalance until
    // that id's session expires. Few retries: the consumer crashes soon after the kill.
    const rejoinTopic = uniqueName('rejoin');
    const admin = kafka.admin();
    await admin.connect();
    await admin.ensureTopics([{ topic: rejoinTopic, numPartitions: 1, replicationFactor: 1 }]);
    await admin.disconnect();
    const client = new Kafka({
      clientId: 'rejoin-test',
      brokers: [broker.brokers],
      connectionTimeout: 1_000,
      retry: { initialRetryTime: 100, retries: 1 },
      logLevel: logLevel.NOTHING,
    });
    const consumer = client.consumer({ groupId: uniqueName('rejoin'), sessionTimeout: 30_000 });
    const joins: string[] = [];
    let crashes = 0;
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => void joins.push(payload.memberId));
    consumer.on(consumer.events.CRASH, () => void crashes++);
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [rejoinTopic] });
      await consumer.run({ eachBatch: async () => {} });
      await eventually(() => joins.length >= 1, 120_000, 'the first join');
      await broker.kill();
      await eventually(() => crashes >= 1, 120_000, 'a crash while the broker is down');
      await broker.restart();
      await eventually(() => joins.length >= 2, 120_000, 'a join after the restart');
      expect(joins[1]).toBe(joins[0]);
    } finally {
      await consumer.disconnect().catch(() => {});
    }
  }, 300_000);
});

describe('ensureTopics', () => {
  it('processes starting at once each return with every partition led, whoever created the topics', async () => {
    const topics = [uniqueName('race'), uniqueName('race')].map((topic) => ({
      topic,
      numPartitions: 6,
      replicationFactor: 1,
    }));
    const admins = [testKafka().admin(), testKafka().admin(), testKafka().admin()];
    await Promise.all(admins.map((a) => a.connect()));
    try {
      // One creates the first topic alone while two others create both: some of their requests
      // find a topic existing and another missing.
      const created = await Promise.all([
        admins[0]?.ensureTopics(topics.slice(0, 1)),
        admins[1]?.ensureTopics(topics),
        admins[2]?.ensureTopics(topics),
      ]);
      // Each is reported created by one process at most (kafkajs does not say which of a request's
      // topics it created when another one already existed).
      const reported = created.flat();
      expect(new Set(reported).size).toBe(reported.length);
      for (const admin of admins) {
        for (const { topic } of topics) {
          const offsets = await admin?.topicOffsets(topic, 0);
          expect(offsets?.map((o) => o.partition).sort()).toEqual([0, 1, 2, 3, 4, 5]);
        }
      }
    } finally {
      await Promise.all(admins.map((a) => a.disconnect()));
    }
  }, 60_000);
});

describe('produce', () => {
  it('writes a batch bigger than the topic allows in one request, in order, as consecutive requests', async () => {
    const kafka = createKafka({
      brokers: TEST_KAFKA_BROKERS,
      clientId: uniqueName('produce'),
      logger: createLogger({ level: 'silent' }),
    });
    const topic = uniqueName('big-batch');
    const admin = kafka.admin();
    const producer = kafka.producer();
    await Promise.all([admin.connect(), producer.connect()]);
    try {
      // The broker's default limit, which a topic created outside Requester has.
      const limit = { name: 'max.message.bytes', value: '1048588' };
      await admin.ensureTopics([{ topic, numPartitions: 1, replicationFactor: 1, configEntries: [limit] }]);
      // 24 × 100 KiB to one partition: 2.4 MB, more than twice what one record batch may hold.
      const values = Array.from({ length: 24 }, (_, i) => `${i}:`.padEnd(100 * 1024, 'x'));
      const metadata = await producer.send(
        topic,
        values.map((value) => ({ partition: 0, value })),
      );
      expect(metadata.length).toBeGreaterThan(1);
      expect(metadata[0]).toMatchObject({ partition: 0, baseOffset: '0' });
      const [offsets] = await admin.topicOffsets(topic);
      expect(offsets?.high).toBe(String(values.length));
    } finally {
      await Promise.all([admin.disconnect(), producer.disconnect()]);
    }
  }, 60_000);

  it('splits into consecutive runs within the budget; a bigger message goes alone', () => {
    const of = (bytes: number, i: number) => ({ key: `k${i}`, value: 'v'.repeat(bytes) });
    const messages = [100, 300, 500, 2_000, 50, 50].map(of);
    const chunks = chunksOf(messages, 1_000);
    expect(chunks.flat()).toEqual(messages);
    expect(chunks.map((chunk) => chunk.map((m) => m.key))).toEqual([
      ['k0', 'k1', 'k2'],
      ['k3'],
      ['k4', 'k5'],
    ]);
    expect(chunksOf([], PRODUCE_CHUNK_BYTES)).toEqual([]);
  });

  it("caps a partition's batch holding a big record at PARTITION_BATCH_BYTES; small records pack as before", () => {
    const big = (partition: number, i: number) => ({ partition, key: `b${i}`, value: 'v'.repeat(40 * 1024) });
    const small = (partition: number, i: number) => ({ partition, key: `s${i}`, value: 'v'.repeat(100) });
    const records = [big(0, 0), big(1, 1), big(0, 2), small(0, 3), big(0, 4), big(1, 5), small(2, 6)];
    const chunks = chunksOf(records, PRODUCE_CHUNK_BYTES, (r) => r.partition ?? 'unkeyed');
    expect(chunks.flat()).toEqual(records);
    // Two big records of one partition never share a request; other partitions ride along.
    expect(chunks.map((chunk) => chunk.map((m) => m.key))).toEqual([
      ['b0', 'b1'],
      ['b2', 's3'],
      ['b4', 'b5', 's6'],
    ]);
    const smalls = Array.from({ length: 2_000 }, (_, i) => small(0, i)); // ~250 KiB to one partition
    expect(chunksOf(smalls, PRODUCE_CHUNK_BYTES, (r) => r.partition ?? 'unkeyed')).toHaveLength(1);
    expect(2 * 40 * 1024).toBeGreaterThan(PARTITION_BATCH_BYTES);
    expect(40 * 1024).toBeGreaterThanOrEqual(BIG_RECORD_BYTES);
  });

  it('writes big records of a topic read by offset in batches of their own, by named partition or by key', async () => {
    const topic = uniqueName('produce-big');
    const kafka = testKafka();
    const admin = kafka.admin();
    const producer = kafka.producer();
    await Promise.all([admin.connect(), producer.connect()]);
    try {
      await admin.ensureTopics([{ topic, numPartitions: 2, replicationFactor: 1 }]);
      const value = 'v'.repeat(40 * 1024);
      const readByOffset = { readByOffset: true };
      const named = await producer.send(
        topic,
        [0, 1, 0, 1, 0].map((partition) => ({ partition, value })),
        undefined,
        readByOffset,
      );
      // Three requests (partitions in any order within one): each a batch of one record per partition.
      expect(named.map((b) => `${b.partition}@${b.baseOffset}`).sort()).toEqual([
        '0@0',
        '0@1',
        '0@2',
        '1@0',
        '1@1',
      ]);
      const smalls = await producer.send(
        topic,
        [0, 0, 0].map((partition) => ({ partition, value: 's' })),
        undefined,
        readByOffset,
      );
      expect(smalls).toEqual([{ topic, partition: 0, baseOffset: '3' }]); // one batch, as before
      // Keyed: the producer now knows the topic's partitions, so distinct keys of one partition split.
      const keys = Array.from({ length: 6 }, (_, i) => `key-${i}`);
      const keyed = await producer.send(
        topic,
        keys.map((key) => ({ key, value })),
        undefined,
        readByOffset,
      );
      const offsets = await admin.topicOffsets(topic); // partitions in any order
      const p0 = offsets.find((o) => o.partition === 0);
      const p1 = offsets.find((o) => o.partition === 1);
      // Every keyed record is a batch (a request's entry) of its own in its partition.
      expect(keyed).toHaveLength(keys.length);
      expect(Number(p0?.high) + Number(p1?.high)).toBe(5 + 3 + keys.length);
      // Without the option (a topic read in order), big records share their partition's batch.
      const shared = await producer.send(
        topic,
        [0, 0, 0].map((partition) => ({ partition, value })),
      );
      expect(shared).toEqual([{ topic, partition: 0, baseOffset: String(Number(p0?.high)) }]);
    } finally {
      await Promise.all([admin.disconnect(), producer.disconnect()]);
    }
  }, 60_000);
});

describe('kafkaLogCreator', () => {
  it('folds a line kafkajs repeats within the window, then says how many it stood for', async () => {
    const { logger, lines } = capturingLogger();
    const write = kafkaLogCreator(logger, 100)(logLevel.ERROR);
    const entry = (message: string) => ({
      namespace: 'Connection',
      level: logLevel.ERROR,
      label: 'ERROR',
      log: { timestamp: 'now', logger: 'kafkajs', message, broker: '127.0.0.1:1' },
    });
    for (let i = 0; i < 50; i++) write(entry('Connection error: connect ECONNREFUSED'));
    write(entry('another problem'));
    await new Promise((resolve) => setTimeout(resolve, 150));
    write(entry('Connection error: connect ECONNREFUSED'));
    expect(
      lines.map(({ msg, namespace, broker, repeated }) => ({ msg, namespace, broker, repeated })),
    ).toEqual([
      {
        msg: 'Connection error: connect ECONNREFUSED',
        namespace: 'Connection',
        broker: '127.0.0.1:1',
        repeated: undefined,
      },
      { msg: 'another problem', namespace: 'Connection', broker: '127.0.0.1:1', repeated: undefined },
      {
        msg: 'Connection error: connect ECONNREFUSED',
        namespace: 'Connection',
        broker: '127.0.0.1:1',
        repeated: 49,
      },
    ]);
  });

  it('writes a retriable or handled protocol error at debug, and any other response error at error', () => {
    const { logger, lines } = capturingLogger();
    const write = kafkaLogCreator(logger)(logLevel.ERROR);
    const response = (error: string) => ({
      namespace: 'Connection',
      level: logLevel.ERROR,
      label: 'ERROR',
      log: {
        timestamp: 'now',
        logger: 'kafkajs',
        message: 'Response ListOffsets(key: 2, version: 3)',
        error,
        correlationId: 7,
      },
    });
    write(response('This server is not the leader for that topic-partition'));
    write(response('The user-specified log directory is not found in the broker config'));
    write(response('Not authorized to access topics: [Topic authorization failed]'));
    // Another process created a topic first: ensureTopics lists them again (and throws what remains).
    write(response('Topic creation errors'));
    expect(lines.map(({ level, error }) => ({ level, error }))).toEqual([
      { level: 20, error: 'This server is not the leader for that topic-partition' },
      { level: 50, error: 'The user-specified log directory is not found in the broker config' },
      { level: 50, error: 'Not authorized to access topics: [Topic authorization failed]' },
      { level: 20, error: 'Topic creation errors' },
    ]);
  });
});

describe('isRetriableKafkaError', () => {
  it('finds a retriable protocol error inside the errors kafkajs wraps it in', () => {
    const protocol = Object.assign(new Error('coordinator loading'), { retriable: true, code: 14 });
    const exhausted = Object.assign(new Error('retries exceeded'), { retriable: false, cause: protocol });
    expect(isRetriableKafkaError(protocol)).toBe(true);
    expect(isRetriableKafkaError(exhausted)).toBe(true);
    expect(isRetriableKafkaError(Object.assign(new Error('bad request'), { retriable: false }))).toBe(false);
    expect(isRetriableKafkaError('not an error')).toBe(false);
  });
});

describe('kafkaSecurityFrom', () => {
  it('reads TLS and SASL from the configuration; the password never prints with it', () => {
    const config = loadConfig({
      KAFKA_SSL: 'true',
      KAFKA_SASL_MECHANISM: 'scram-sha-256',
      KAFKA_SASL_USERNAME: 'app',
      KAFKA_SASL_PASSWORD: 'p4ss-word',
    });
    expect(kafkaSecurityFrom(config)).toEqual({
      ssl: true,
      sasl: { mechanism: 'scram-sha-256', username: 'app', password: 'p4ss-word' },
    });
    expect(JSON.stringify(config)).not.toContain('p4ss-word');
    expect(kafkaSecurityFrom(loadConfig({}))).toEqual({});
  });

  it('refuses a mechanism without its credentials, and a CA file it cannot read, by name', () => {
    expect(() => kafkaSecurityFrom(loadConfig({ KAFKA_SASL_MECHANISM: 'plain' }))).toThrow(
      /KAFKA_SASL_MECHANISM=plain needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD/,
    );
    expect(() => kafkaSecurityFrom(loadConfig({ KAFKA_SSL_CA: '/nonexistent/ca.pem' }))).toThrow(
      /KAFKA_SSL_CA=\/nonexistent\/ca.pem/,
    );
  });
});

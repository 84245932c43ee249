import type { KafkaProducer } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import {
  createTestTopics,
  eventually,
  readTopic,
  silentLogger,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Relay } from './index.ts';

/**
 * The relay's workers take turns claiming and producing, so that an ordered partition's rows of
 * two claims reach `in` in due order. A claim whose produce fails is handed back (its rows' due
 * times restored): the next claim must wait for that, or it takes the partition's later rows and
 * produces them ahead of the earlier ones. The failure is injected around a real producer (Kafka
 * itself fails a produce only by going away), and the hand-back is held open by a row lock the
 * test takes, so the next claim has all the time it wants to overtake.
 */
describe('relay: a failed claim keeps its rows ahead of the later ones of their partition', () => {
  const topic = uniqueName('relay.order');
  let pg: Awaited<ReturnType<typeof testPg>>;
  let producer: KafkaProducer;
  let relay: Relay | undefined;
  let releaseLock = () => {};

  beforeAll(async () => {
    await createTestTopics([topic], 1);
    pg = await testPg();
    producer = testKafka().producer();
    await producer.connect();
  });

  afterAll(async () => {
    releaseLock();
    await relay?.stop();
    await producer?.disconnect();
    await pg?.drop();
  });

  it('produces the rows of a failed claim before the later rows of their ordered partition', async () => {
    const outbox = new Outbox(pg.sql);
    const row = (id: string, dueInMs: number) => ({
      taskId: `${id}:0`,
      requestId: id,
      dueAt: new Date(Date.now() + dueInMs),
      topic,
      key: '!p',
      payload: Buffer.from(JSON.stringify({ meta: { requestId: id, partition: '!p' } })),
    });
    await outbox.add([row('a', -10_000), row('b', -5_000)]);
    const held = new Promise<void>((resolve) => {
      releaseLock = resolve;
    });
    let locked: Promise<unknown> | undefined;
    let failed = false;
    const failingOnce: KafkaProducer = {
      connect: () => producer.connect(),
      disconnect: () => producer.disconnect(),
      partitionCount: (topic) => producer.partitionCount(topic),
      async send(...args) {
        if (failed) return producer.send(...args);
        failed = true;
        // a's hand-back will wait for this lock: a transaction of the test's holds a's row.
        let taken = () => {};
        const lockTaken = new Promise<void>((resolve) => {
          taken = resolve;
        });
        locked = pg.sql.begin(async (tx) => {
          await tx`select 1 from outbox where request_id = 'a' for update`;
          taken();
          await held;
        });
        await lockTaken;
        throw new Error('injected: the produce failed');
      },
    };
    relay = new Relay({
      outbox,
      producer: failingOnce,
      logger: silentLogger,
      workers: 2,
      batch: 1,
      produceTimeoutMs: 5_000,
    });
    await relay.start();
    // The hand-back of a's claim waits for the lock; the other worker had its turn meanwhile, if any.
    await eventually(
      async () =>
        (
          await pg.sql`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%unnest%'`
        ).length > 0,
      30_000,
      "a's hand-back waiting for the lock",
    );
    releaseLock();
    await locked;
    const records = await readTopic(topic, (messages) => messages.length >= 2);
    expect(records.map((record) => JSON.parse(String(record.value)).meta.requestId)).toEqual(['a', 'b']);
  });
});

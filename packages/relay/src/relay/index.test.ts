import type { KafkaProducer } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import {
  capturingLogger,
  createTestTopics,
  eventually,
  readTopic,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Relay } from './index.ts';

/** Short, so that a produce to a missing topic fails within the test (kafkajs would keep retrying). */
const PRODUCE_TIMEOUT_MS = 1_000;

describe('relay: outbox → Kafka in', () => {
  const topic = uniqueName('relay.in');
  let pg: Awaited<ReturnType<typeof testPg>>;
  let producer: KafkaProducer;
  let outbox: Outbox;
  let relay: Relay;
  const { logger, lines: logged } = capturingLogger('info');

  beforeAll(async () => {
    await createTestTopics([topic], 2);
    pg = await testPg();
    outbox = new Outbox(pg.sql);
    producer = testKafka().producer();
    await producer.connect();
    relay = new Relay({
      outbox,
      producer,
      logger,
      workers: 2,
      batch: 50,
      produceTimeoutMs: PRODUCE_TIMEOUT_MS,
    });
    await relay.start();
  });

  afterAll(async () => {
    await relay.stop();
    await producer.disconnect();
    await pg.drop();
  });

  const row = (id: string, dueInMs: number) => ({
    taskId: `${id}:0`,
    requestId: id,
    dueAt: new Date(Date.now() + dueInMs),
    topic,
    key: id,
    payload: Buffer.from(JSON.stringify({ meta: { requestId: id } })),
  });

  it('moves due rows to Kafka and deletes them; a later row waits for its time', async () => {
    const later = row('later', 1_500);
    expect(await outbox.add([row('now-1', -10), row('now-2', 0), later])).toBe(3);
    // The same task twice is ignored: asked of the row not due yet, as a due one may be relayed
    // and deleted already, and added again then.
    expect(await outbox.add([later])).toBe(0);

    const early = await readTopic(topic, (m) => m.length >= 2);
    expect(early.map((m) => m.key?.toString()).sort()).toEqual(['now-1', 'now-2']);
    expect(early[0]?.headers?.['requester-relayed-from']?.toString()).toBe('outbox');

    const all = await readTopic(topic, (m) => m.length >= 3);
    const lateMessage = all.find((m) => m.key?.toString() === 'later');
    expect(Number(lateMessage?.timestamp)).toBeGreaterThanOrEqual(later.dueAt.getTime());
    // A row is deleted after Kafka acknowledged it (at-least-once), so a reader may see the
    // record a moment before the delete lands.
    await eventually(async () => (await outbox.count()) === 0, 10_000, 'the delivered rows deleted');
  });

  it('keeps rows when Kafka refuses them, and delivers them once it accepts; logs the outage once', async () => {
    const missingTopic = uniqueName('relay.missing');
    const from = logged.length; // lines of this test only
    const failures = () =>
      logged.slice(from).filter((l) => l.msg === 'outbox delivery failed; retrying').length;
    await outbox.add([{ ...row('orphan', 0), topic: missingTopic }]);
    // Each try fails after PRODUCE_TIMEOUT_MS; let a few fail (both workers retry every second).
    await eventually(() => failures() === 1, 15_000, 'the first failure');
    await new Promise((resolve) => setTimeout(resolve, 2 * PRODUCE_TIMEOUT_MS + 1_000));
    expect(await outbox.count()).toBe(1);
    await createTestTopics([missingTopic], 1);
    const delivered = await readTopic(missingTopic, (m) => m.length >= 1);
    expect(delivered[0]?.key?.toString()).toBe('orphan');
    await eventually(
      () => logged.slice(from).some((l) => l.msg === 'outbox delivery works again' && Number(l.failures) > 1),
      15_000,
      'the recovery line, counting the failures',
    );
    expect(failures()).toBe(1);
  });
});

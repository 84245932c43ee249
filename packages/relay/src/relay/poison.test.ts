import { parseAnyDeadLetter, type ResultEnvelope } from '@requester/shared/contract';
import { Outbox } from '@requester/shared/outbox';
import {
  eventually,
  json,
  readTopic,
  silentLogger,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Relay } from './index.ts';

/**
 * A row Kafka refuses for good (here: bigger than the max.message.bytes of `in`) is answered and
 * dead-lettered, and deleted; it neither blocks the rows claimed with it nor comes back forever.
 */
describe('relay: a row Kafka refuses is confined to itself', () => {
  const name = uniqueName('relay-poison');
  const [topicIn, topicOut, topicDlq] = [`${name}.in`, `${name}.out`, `${name}.dlq`];
  let pg: Awaited<ReturnType<typeof testPg>>;
  const producer = testKafka().producer();
  let relay: Relay;

  beforeAll(async () => {
    const admin = testKafka().admin();
    await admin.connect();
    await admin.ensureTopics([
      {
        topic: topicIn,
        numPartitions: 1,
        replicationFactor: 1,
        configEntries: [{ name: 'max.message.bytes', value: '4096' }],
      },
      { topic: topicOut, numPartitions: 1, replicationFactor: 1 },
      { topic: topicDlq, numPartitions: 1, replicationFactor: 1 },
    ]);
    await admin.disconnect();
    pg = await testPg();
    await producer.connect();
  });

  afterAll(async () => {
    await relay?.stop();
    await producer.disconnect();
    await pg.drop();
  });

  const row = (id: string, body = '') => ({
    taskId: `${id}:0`,
    requestId: id,
    dueAt: new Date(Date.now() - 10),
    topic: topicIn,
    key: id,
    payload: Buffer.from(
      JSON.stringify({ request: { uri: '', body }, meta: { requestId: id, proxyData: { n: 1 } } }),
    ),
  });

  it('answers and dead-letters the refused row, delivers the others and empties the outbox', async () => {
    const outbox = new Outbox(pg.sql);
    await outbox.add([row('small-1'), row('huge', 'x'.repeat(10_000)), row('small-2')]);
    relay = new Relay({
      outbox,
      producer,
      logger: silentLogger,
      workers: 1,
      batch: 10,
      produceTimeoutMs: 5_000,
      topicOut,
      topicDlq,
    });
    await relay.start();

    const moved = await readTopic(topicIn, (m) => m.length >= 2);
    expect(moved.map((m) => m.key?.toString()).sort()).toEqual(['small-1', 'small-2']);
    const [answer] = await readTopic(topicOut, (m) => m.length >= 1);
    expect(answer?.key?.toString()).toBe('huge');
    expect(json<ResultEnvelope>(answer as never).meta).toMatchObject({
      requestId: 'huge',
      proxyData: { n: 1 },
      error: { code: 'payload_too_large' },
    });
    const [letter] = await readTopic(topicDlq, (m) => m.length >= 1);
    const dead = parseAnyDeadLetter(letter?.value);
    expect(dead).toMatchObject({ reason: 'unprocessable', envelope: { meta: { requestId: 'huge' } } });
    expect(dead.source).toBeUndefined();
    await eventually(async () => (await outbox.count()) === 0, 10_000, 'outbox emptied');
  });
});

import { createTestTopics, uniqueName } from '@requester/shared/testing';
import { type Consumer, Kafka, logLevel, type Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ResultRecord, readResults } from './index.ts';

/** The reader of `out` on the real Kafka, with a kafkajs consumer as a caller would give it. */
describe('readResults', () => {
  const topic = uniqueName('client-out');
  const kafka = new Kafka({
    clientId: uniqueName('client'),
    brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
    logLevel: logLevel.NOTHING,
  });
  let producer: Producer;
  const consumers: Consumer[] = [];
  const result = (client: string, requestId: string) =>
    JSON.stringify({
      response: { status: 200, body: requestId, headers: {} },
      meta: { requestId, client, tryCount: 1 },
    });

  beforeAll(async () => {
    await createTestTopics([topic], 1);
    producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic,
      messages: [
        { key: 'junk', value: 'not a result' },
        { key: 'a1', value: result('A', 'a1') },
        { key: 'b1', value: result('B', 'b1') },
        { key: 'a2', value: result('A', 'a2') },
        { key: 'a3', value: result('A', 'a3') },
      ],
    });
  });
  afterAll(async () => {
    await Promise.all([producer?.disconnect(), ...consumers.map((c) => c.disconnect())]);
  });

  const consumer = async (groupId: string) => {
    const c = kafka.consumer({ groupId });
    consumers.push(c);
    await c.connect();
    return c;
  };

  it('hands the results of one client in order, skipping what is not a result', async () => {
    const read: string[] = [];
    for await (const { result: r } of readResults(await consumer(uniqueName('g')), {
      topic,
      client: 'A',
      fromBeginning: true,
    })) {
      read.push(r.meta.requestId ?? '');
      if (read.length === 3) break;
    }
    expect(read).toEqual(['a1', 'a2', 'a3']);
  });

  it('filters by requestId', async () => {
    const iterator = readResults(await consumer(uniqueName('g')), {
      topic,
      requestIds: ['b1'],
      fromBeginning: true,
    });
    const first = await iterator.next();
    await iterator.return?.();
    expect((first.value as ResultRecord).result.meta.client).toBe('B');
  });

  it('leaves the results it did not hand over to the group’s next reader', async () => {
    const group = uniqueName('g');
    for await (const { result: r } of readResults(await consumer(group), {
      topic,
      client: 'A',
      fromBeginning: true,
    })) {
      expect(r.meta.requestId).toBe('a1');
      break;
    }
    const next = readResults(await consumer(group), { topic, client: 'A', fromBeginning: true });
    const after = await next.next();
    await next.return?.();
    expect((after.value as ResultRecord).result.meta.requestId).toBe('a2');
  });

  it('ends when its signal aborts', async () => {
    const controller = new AbortController();
    const iterator = readResults(await consumer(uniqueName('g')), {
      topic,
      requestIds: ['never'],
      fromBeginning: true,
      signal: controller.signal,
    });
    const pending = iterator.next();
    controller.abort();
    expect(await pending).toEqual({ value: undefined, done: true });
  });
});

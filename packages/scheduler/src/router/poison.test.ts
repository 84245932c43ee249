import { FairQueue } from '@requester/queue';
import { parseAnyDeadLetter, type ResultEnvelope } from '@requester/shared/contract';
import { RequesterError } from '@requester/shared/errors';
import type { KafkaProducer, KafkaRecord } from '@requester/shared/kafka';
import { Outbox } from '@requester/shared/outbox';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import {
  createTestTopics,
  eventually,
  json,
  readTopic,
  testKafka,
  testPg,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Router, TaskSink } from './index.ts';
import type { QueueTask } from './route.ts';
import { testRouter } from './router.fixture.ts';

/**
 * Poison records: whatever the router cannot write is answered (error result keyed by the
 * record's requestId or key, with its offset, plus a dead letter) and committed past; the records
 * after it on the same partition go on, and the consumer never crashes.
 */
describe('router: a record it cannot write is confined to itself', () => {
  const name = uniqueName('router-poison');
  let redis: RedisClient;
  let queue: FairQueue;
  let pg: Awaited<ReturnType<typeof testPg>>;
  let producer: KafkaProducer;
  const routers: Router[] = [];
  let crashes = 0;

  /** Topics of one test, with one partition: every record shares it. */
  async function topics(test: string) {
    const [topicIn, topicOut, topicDlq] = [
      `${name}-${test}.in`,
      `${name}-${test}.out`,
      `${name}-${test}.dlq`,
    ];
    await createTestTopics([topicIn, topicOut, topicDlq], 1);
    return { topicIn, topicOut, topicDlq };
  }

  async function startRouter(
    { topicIn, topicOut, topicDlq }: Awaited<ReturnType<typeof topics>>,
    sink: TaskSink,
    outbox: Outbox,
  ): Promise<void> {
    const consumer = testKafka().consumer({ groupId: uniqueName('g') });
    consumer.onCrash(() => crashes++);
    const router = testRouter({ consumer, queue: sink, outbox, producer, topicIn, topicOut, topicDlq });
    routers.push(router);
    await router.start();
  }

  beforeAll(async () => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    queue = new FairQueue({ redis, prefix: `${name}:`, shards: 2, refreshMs: 0 });
    pg = await testPg();
    producer = testKafka().producer();
    await producer.connect();
  });

  afterAll(async () => {
    await Promise.all(routers.map((r) => r.stop()));
    await producer.disconnect();
    const keys = await redis.keys(`${name}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await pg.drop();
  });

  const request = (requestId: string, meta: Record<string, unknown> = {}) =>
    JSON.stringify({ request: { uri: 'https://example.com/x' }, meta: { requestId, ...meta } });
  const byOffset = (messages: KafkaRecord[]) => (offset: string) =>
    messages.find((m) => json<ResultEnvelope>(m).meta.error?.source?.offset === offset);

  it('answers and dead-letters records the queue and the outbox refuse, unreadable ones too, and routes the next ones', async () => {
    // A fake sink in front of the real queue refusing one task as the queue refuses bad data.
    const sink: TaskSink = {
      publish: (tasks: QueueTask[]) => {
        const bad = tasks.find((t) => t.id === 'refused:0');
        if (bad)
          throw new RequesterError(
            'invalid_request',
            `queue task "${bad.id}": dueAt must be an integer epoch ms`,
          );
        return queue.publish(tasks);
      },
    };
    const t = await topics('refusals');
    const { topicIn, topicOut, topicDlq } = t;
    await startRouter(t, sink, new Outbox(pg.sql));
    const farAhead = new Date(Date.now() + 3_600_000).toISOString();
    const sent = await producer.send(
      topicIn,
      [
        { key: 'first', value: request('first') },
        { key: 'refused', value: request('refused') },
        // PostgreSQL refuses a NUL in a text column (SQLSTATE 22021): a real poison for the outbox.
        { key: 'nul\u0000key', value: request('nul', { scheduled: farAhead }) },
        { key: 'garbage', value: '{not json' },
        { key: null, value: '[1,2]' },
        { key: 'later', value: request('later', { scheduled: farAhead }) },
        { key: 'next', value: request('next') },
      ].map((m) => ({ ...m, partition: 0 })),
    );
    const base = BigInt(sent[0]?.baseOffset ?? '0');
    const offset = (i: number) => String(base + BigInt(i));

    const out = await readTopic(topicOut, (m) => m.length >= 4);
    const answer = byOffset(out);
    expect(answer(offset(1))?.key?.toString()).toBe('refused');
    expect(json<ResultEnvelope>(answer(offset(1)) as KafkaRecord).meta).toMatchObject({
      requestId: 'refused',
      error: { code: 'invalid_request', source: { topic: topicIn, partition: 0, offset: offset(1) } },
    });
    expect(json<ResultEnvelope>(answer(offset(2)) as KafkaRecord).meta).toMatchObject({
      requestId: 'nul',
      error: { code: 'invalid_request', message: expect.stringMatching(/outbox refused/) },
    });
    // No readable requestId: keyed by the record's own key (or none when it had none).
    expect(answer(offset(3))?.key?.toString()).toBe('garbage');
    expect(json<ResultEnvelope>(answer(offset(3)) as KafkaRecord).meta.requestId).toBeUndefined();
    expect(answer(offset(4))?.key).toBeNull();

    const dlq = await readTopic(topicDlq, (m) => m.length >= 4);
    const letters = dlq.map((m) => ({ key: m.key?.toString(), letter: parseAnyDeadLetter(m.value) }));
    expect(letters.map((l) => [l.key, l.letter.reason, l.letter.source?.offset])).toEqual([
      ['refused', 'unprocessable', offset(1)],
      ['nul', 'unprocessable', offset(2)],
      ['garbage', 'unprocessable', offset(3)],
      [undefined, 'unprocessable', offset(4)],
    ]);
    expect(letters[0]?.letter.envelope?.meta.requestId).toBe('refused');
    expect(Buffer.from(letters[2]?.letter.record?.value ?? '', 'base64').toString()).toBe('{not json');

    // The records around the poison went where they belong.
    const leased = await queue.lease(10, 30_000);
    expect(leased.tasks.map((t) => t.id).sort()).toEqual(['first:0', 'next:0']);
    await eventually(async () => (await new Outbox(pg.sql).count()) === 1, 10_000, 'later in the outbox');
    expect(crashes).toBe(0);
  });

  it('retries a batch the queue fails to write for an outage, without answering or committing it', async () => {
    let outage = true;
    const published: string[] = [];
    const sink: TaskSink = {
      publish: async (tasks: QueueTask[]) => {
        if (outage) throw new RequesterError('dependency_unavailable', 'Redis is away');
        published.push(...tasks.map((t) => t.id));
        return [];
      },
    };
    const t = await topics('outage');
    await producer.send(t.topicIn, [{ key: 'blip', value: request('blip'), partition: 0 }]);
    await startRouter(t, sink, new Outbox(pg.sql));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    outage = false;
    await eventually(async () => published.includes('blip:0'), 30_000, 'blip published once Redis is back');
    await producer.send(t.topicIn, [{ key: 'after', value: '{not json', partition: 0 }]);
    // The only answer on out is the one for the garbage sent after: the outage answered nothing.
    const out = await readTopic(t.topicOut, (m) => m.length >= 1);
    expect(out.map((m) => m.key?.toString())).toEqual(['after']);
    const dlq = await readTopic(t.topicDlq, (m) => m.length >= 1);
    expect(dlq.map((m) => m.key?.toString())).toEqual(['after']);
  });
});

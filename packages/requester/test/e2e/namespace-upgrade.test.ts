import { queueFromConfig } from '@requester/queue';
import { Dependencies, encodeQueuedTask, type KafkaProducer, Outbox } from '@requester/shared';
import { createTestTopics, silentLogger, startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  stackEnv,
  stackKey,
  startStack,
  waitReady,
} from './stack.fixture.ts';

/**
 * The upgrade to the client namespace (docs/architecture.md §10): what a version before it left in
 * Redis and PostgreSQL — tasks queued under `requestId:tryCount` in partitions named by
 * `meta.partition` or `#requestId` alone, outbox rows with such task ids — still runs after it and
 * is answered to its owner. The state is written here literally as those versions wrote it (the
 * queued task's wire format did not change), before the new version starts on the same Redis
 * prefix and database.
 */
describe('upgrade: tasks queued and outbox rows written before the client namespace complete after it', () => {
  let stack: StackEnv;
  let running: RunningProcess | undefined;
  let producer: KafkaProducer;
  let target: Target;
  let key: Awaited<ReturnType<typeof stackKey>>;
  let results: ResultCollector;
  const ids = { first: '', second: '', inline: '', outboxed: '' };

  beforeAll(async () => {
    stack = await stackEnv();
    key = await stackKey(stack); // creates and migrates the stack's database
    target = await startTarget();
    producer = await kafkaProducer();
    for (const name of Object.keys(ids) as Array<keyof typeof ids>) ids[name] = `${stack.name}-${name}`;
    const envelope = (requestId: string, meta: { partition?: string; retry?: { max: number } } = {}) => ({
      request: { uri: `${target.url}/echo?id=${requestId}`, method: 'POST', body: requestId },
      meta: { requestId, client: key.name, ...meta },
      createdAt: new Date().toISOString(),
    });

    // The `in` records the old router queued by reference (a topic no router of this stack reads,
    // so only the queued tasks lead to them).
    const legacyIn = `${stack.name}.legacy-in`;
    await createTestTopics([legacyIn], 1);
    const queued = [
      envelope(ids.first, { partition: '!legacy-order' }),
      envelope(ids.second, { partition: '!legacy-order' }),
      envelope(ids.inline),
    ];
    const [sent] = await producer.send(
      legacyIn,
      queued.map((value) => ({
        key: value.meta.partition ?? value.meta.requestId,
        value: JSON.stringify(value),
      })),
    );
    const ref = (i: number) => ({
      topic: legacyIn,
      partition: 0,
      offset: String(BigInt(sent?.baseOffset ?? '0') + BigInt(i)),
    });

    const deps = new Dependencies(stack.config, silentLogger);
    try {
      const queue = queueFromConfig(stack.config, deps.redis(), { notify: false });
      await queue.publish([
        // An ordered partition of two, by reference; then an unordered task riding inline.
        {
          id: `${ids.first}:0`,
          partition: '!legacy-order',
          payload: encodeQueuedTask({ ref: ref(0), requestId: ids.first, tryCount: 0 }),
        },
        {
          id: `${ids.second}:0`,
          partition: '!legacy-order',
          payload: encodeQueuedTask({ ref: ref(1), requestId: ids.second, tryCount: 0 }),
        },
        {
          id: `${ids.inline}:0`,
          partition: `#${ids.inline}`,
          payload: encodeQueuedTask({
            ref: ref(2),
            requestId: ids.inline,
            tryCount: 0,
            inline: { value: queued[2] },
          }),
        },
      ]);
      await queue.close();
      // A retry the old executor sent through the outbox: one attempt made, due now.
      const retried = { ...envelope(ids.outboxed, { retry: { max: 3 } }), tryCount: 1 };
      await new Outbox(await deps.sql()).add([
        {
          taskId: `${ids.outboxed}:1`,
          requestId: ids.outboxed,
          dueAt: new Date(),
          topic: stack.config.topicIn,
          key: ids.outboxed,
          payload: Buffer.from(JSON.stringify(retried)),
        },
      ]);
    } finally {
      await deps.close();
    }

    running = await startStack(stack);
    await waitReady(stack);
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
  }, 120_000);

  afterAll(async () => {
    await results?.stop();
    await producer?.disconnect();
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('runs every one of them once, in order where ordered, and answers each on out with its requestId and client', async () => {
    const all = Object.values(ids);
    await results.until(() => all.every((id) => results.byId.has(id)), 60_000, 'every old task answered');
    for (const id of all) {
      const answers = results.byId.get(id) ?? [];
      expect(answers).toHaveLength(1);
      expect(answers[0]).toMatchObject({
        response: { status: 200, body: id },
        meta: { requestId: id, client: key.name },
      });
    }
    expect(results.byId.get(ids.outboxed)?.[0]?.meta.tryCount).toBe(2);
    const order = target.calls
      .map((call) => call.body)
      .filter((body) => body === ids.first || body === ids.second);
    expect(order).toEqual([ids.first, ids.second]);
  });

  it('each result is its owner’s to read by requestId', async () => {
    for (const id of Object.values(ids)) {
      const reply = await fetch(`${stack.httpUrl}/requests/${id}?wait=30s`, { headers: key.headers });
      expect(reply.status).toBe(200);
      expect(await reply.json()).toMatchObject({
        response: { body: id },
        meta: { requestId: id, client: key.name },
      });
    }
  });
});

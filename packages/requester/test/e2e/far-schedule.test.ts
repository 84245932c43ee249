import { headerText, RELAYED_FROM_HEADER } from '@requester/shared';
import {
  eventually,
  freePort,
  readTopic,
  startTarget,
  type Target,
  testKafka,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProcess } from '../../src/runtime/index.ts';
import { dropStackDatabase, type StackEnv, stackEnv, startStack, waitReady } from './stack.fixture.ts';

/**
 * Far schedules (docs/architecture.md §5, "Staging ahead"): requests scheduled beyond the Redis
 * horizon wait in the PostgreSQL outbox, and the relay stages them into the queue before their due
 * instant (RELAY_STAGE_AHEAD), so a crowd due at one instant is waiting in Redis by then. Behaviour
 * only: staged before due, none called early, every ordered partition called in its order.
 */
describe('end to end: far schedules are staged ahead of their instant', () => {
  const PARTITIONS = 6;
  const PER_PARTITION = 25;
  let stack: StackEnv;
  let running: RunningProcess;
  let target: Target;

  beforeAll(async () => {
    target = await startTarget(await freePort());
    // Small claims: an ordered partition's rows span several claims of the relay's two workers.
    stack = await stackEnv({
      REDIS_HORIZON: '1s',
      RELAY_STAGE_AHEAD: '5m',
      RELAY_BATCH: '10',
      RELAY_WORKERS: '2',
      MAX_WORKERS: '16',
    });
    running = await startStack(stack);
    await waitReady(stack);
  }, 120_000);

  afterAll(async () => {
    await running?.shutdown('test over');
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('stages outbox rows into Redis before they are due; none runs early; ordered partitions keep their order', async () => {
    // Far enough ahead that the router sends them to the outbox (beyond the 1 s horizon), and that
    // staging (outbox → relay → in → router → queue) has room to happen before the instant.
    const due = Date.now() + 15_000;
    const scheduled = new Date(due).toISOString();
    const producer = testKafka().producer();
    await producer.connect();
    const ids: string[] = [];
    try {
      // Each ordered partition's requests are written in order under its key (one Kafka partition).
      for (let p = 0; p < PARTITIONS; p++) {
        const partition = `!far-${p}`;
        const records = Array.from({ length: PER_PARTITION }, (_, i) => {
          const requestId = `far-${p}-${i}`;
          ids.push(requestId);
          const envelope = {
            request: { uri: `${target.url}/echo?p=${p}&i=${i}` },
            meta: { requestId, partition, scheduled },
          };
          return { key: partition, value: JSON.stringify(envelope) };
        });
        await producer.send(stack.config.topicIn, records, 30_000);
      }
    } finally {
      await producer.disconnect();
    }

    // Staged: the relay put every row back on `in` before its due instant.
    const relayed = await readTopic(
      stack.config.topicIn,
      (seen) =>
        seen.filter((r) => headerText(r.headers, RELAYED_FROM_HEADER) === 'outbox').length >= ids.length,
      60_000,
    );
    const copies = relayed.filter((r) => headerText(r.headers, RELAYED_FROM_HEADER) === 'outbox');
    expect(copies).toHaveLength(ids.length);
    for (const copy of copies) expect(Number(copy.timestamp)).toBeLessThan(due);

    const calls = () => target.calls.filter((c) => c.path.startsWith('/echo?p='));
    await eventually(() => calls().length >= ids.length, 120_000, 'every scheduled request called');
    // None early: the target saw each call at or after the instant.
    for (const call of calls()) expect(call.at).toBeGreaterThanOrEqual(due);
    // Ordered partitions: called once each, in the order they were written.
    for (let p = 0; p < PARTITIONS; p++) {
      const order = calls()
        .filter((c) => new URL(c.path, target.url).searchParams.get('p') === String(p))
        .map((c) => Number(new URL(c.path, target.url).searchParams.get('i')));
      expect(order).toEqual(Array.from({ length: PER_PARTITION }, (_, i) => i));
    }
  });
});

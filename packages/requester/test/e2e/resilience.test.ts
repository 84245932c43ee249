import type { KafkaProducer } from '@requester/shared';
import { createTestTopics, startTarget, type Target } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  dropStackDatabase,
  kafkaProducer,
  ResultCollector,
  type StackEnv,
  sendSlowRequests,
  spawnRequester,
  stackEnv,
  unanswered,
  waitReady,
} from './stack.fixture.ts';

/**
 * No task is lost when the process stops in the middle of work: gracefully (SIGTERM: in-flight calls
 * finish, the rest stays queued) or brutally (SIGKILL: leases lapse and other workers reclaim them).
 * The real binary runs in a child process; 500 tasks against a slow target keep it busy.
 */
describe.each([
  { signal: 'SIGTERM' as const, expectedExit: 0 },
  { signal: 'SIGKILL' as const, expectedExit: null },
])('$signal while 500 tasks are in flight', ({ signal, expectedExit }) => {
  const TASKS = 500;
  let stack: StackEnv;
  let target: Target;
  let results: ResultCollector;
  let producer: KafkaProducer;

  beforeAll(async () => {
    target = await startTarget();
    // Every worker on the one target origin: the default per-origin cap (a quarter of MAX_WORKERS)
    // would call it 4 at a time, and the 500 slow calls would take four times as long.
    stack = await stackEnv({ MAX_WORKERS: '16', MAX_WORKERS_PER_ORIGIN: '16', EXECUTOR_LEASE_TTL: '3s' });
    const { topicIn, topicOut, topicDlq } = stack.config;
    await createTestTopics([topicIn, topicOut, topicDlq], 3); // the collector subscribes before requester starts
    results = new ResultCollector(stack.config.topicOut);
    await results.start();
    producer = await kafkaProducer();
  });

  afterAll(async () => {
    await producer?.disconnect();
    await results?.stop();
    await target?.close();
    if (stack) await dropStackDatabase(stack);
  }, 60_000);

  it('every task ends up on out after a restart', async () => {
    const first = spawnRequester(stack);
    await waitReady(stack);
    const ids = await sendSlowRequests(producer, stack, {
      url: target.url,
      prefix: 't',
      count: TASKS,
      slowMs: 250,
    });
    await results.until(() => results.byId.size >= 40, 60_000, 'the first 40 results');
    first.child.kill(signal);
    expect(await first.exited).toBe(expectedExit);
    const beforeRestart = results.byId.size;
    expect(beforeRestart).toBeLessThan(TASKS);

    const second = spawnRequester(stack);
    try {
      await results.until(() => results.byId.size >= TASKS, 120_000, `all ${TASKS} results`);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
    expect(unanswered(results, ids)).toEqual({ missing: [], failed: [] });
    const duplicates = ids.filter((id) => (results.byId.get(id)?.length ?? 0) > 1).length;
    // A graceful stop finishes what it holds: nothing runs twice. A kill may repeat only the calls that
    // were in flight (at most MAX_WORKERS of them), which the target sees with the same Idempotency-Key.
    if (signal === 'SIGTERM') expect(duplicates).toBe(0);
    else expect(duplicates).toBeLessThanOrEqual(16);
  }, 240_000);
});

import { originOf } from '@requester/policies';
import { startTarget, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * Fairness where the work waits (docs/architecture.md §5 "The worker pool"), through a real
 * executor, queue, Kafka and loopback targets: a client whose calls hang holds every worker, and
 * another client's call is still served (it borrows a worker); a held origin's backlog does not
 * crowd out a healthy origin's trickle. Order and progress are asserted, never timings.
 */
describe('fairness at the executor (end to end)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  const envelope = (client: string, requestId: string, uri: string) => ({
    requestId,
    client,
    value: JSON.stringify({ request: { uri }, meta: { requestId, client } }),
  });

  it("serves a client's call while another client's calls hang on every worker (it borrows one)", async () => {
    const hanging = await startTarget();
    h.onClose(() => hanging.close());
    const { queue } = h.startExecutor({ maxWorkers: 8, responseTimeoutMs: 60_000 });
    const run = uniqueName('hang');
    const a = Array.from({ length: 20 }, (_, i) =>
      envelope('a', `${run}-a-${i}`, `${hanging.url}/hold/${run}`),
    );
    await h.submitRaw(queue, a);
    // Every worker holds one of a's calls, which never end until released.
    await h.until(() => (hanging.holding(run) === 8 ? true : undefined));

    const b = envelope('b', `${run}-b`, `${h.target.url}/echo?run=${run}`);
    await h.submitRaw(queue, [b]);
    const result = await h.resultOf(b.requestId);
    expect(result.response.status).toBe(200);
    // b was served while every call of a was still in flight: none has ended.
    expect(hanging.holding(run)).toBe(8);
    expect(a.filter((t) => h.results.has(t.requestId))).toEqual([]);

    hanging.release(run);
    const done = await Promise.all(a.map((t) => h.resultOf(t.requestId)));
    expect(done.map((r) => r.response.status)).toEqual(a.map(() => 200));
  }, 120_000);

  it("serves a healthy origin's trickle while a paused origin's backlog of 10,000 tasks waits", async () => {
    const held = await startTarget();
    h.onClose(() => held.close());
    // The held origin is paused until resumed: its tasks go back to the queue unattempted, and
    // come back to be looked at again every PAUSE_RECHECK_MS.
    const heldOrigin = originOf(held.url);
    const pause = { scope: 'origin', value: heldOrigin, by: 'test', at: Date.now(), until: null } as const;
    const pauses = {
      any: true,
      match: (task: { origin?: string | undefined }) => (task.origin === heldOrigin ? pause : undefined),
      refresh: async () => {},
    };
    const { queue, leased } = h.countingQueue();
    h.startExecutor({ queue, pauses, maxWorkers: 8 });
    const run = uniqueName('backlog');
    const BACKLOG = 10_000;
    const backlog = Array.from({ length: BACKLOG }, (_, i) =>
      envelope('a', `${run}-held-${i}`, `${held.url}/echo?run=${run}&i=${i}`),
    );
    for (let i = 0; i < BACKLOG; i += 2_000) await h.submitRaw(queue, backlog.slice(i, i + 2_000));
    const trickle = Array.from({ length: 20 }, (_, i) =>
      envelope('b', `${run}-ok-${i}`, `${h.target.url}/echo?run=${run}&ok=${i}`),
    );
    for (const task of trickle) await h.submitRaw(queue, [task]);

    await h.until(() => (h.callsWith(`run=${run}&ok=`).length === trickle.length ? true : undefined));
    // Every trickle call reached its target before most of the held backlog was even leased once.
    const heldLeased = backlog.filter((t) => leased.has(t.requestId)).length;
    expect(heldLeased).toBeLessThan(BACKLOG / 2);
    expect(held.calls.filter((c) => c.path.includes(run))).toEqual([]);
    const results = await Promise.all(trickle.map((t) => h.resultOf(t.requestId)));
    expect(results.map((r) => r.response.status)).toEqual(trickle.map(() => 200));
  }, 180_000);
});

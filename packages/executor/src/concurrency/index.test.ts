import type { RequestEnvelopeInput } from '@requester/shared/contract';
import { registry } from '@requester/shared/metrics';
import { eventually, startCountingTarget, uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PARK_MAX_MS } from '../worker/decide.ts';
import { ExecutorHarness } from '../worker/harness.fixture.ts';
import { KeyConcurrency } from './index.ts';

const concurrencyWaits = async () =>
  (await registry.getSingleMetric('requester_concurrency_waits_total')?.get())?.values[0]?.value ?? 0;

describe('concurrency keys across executors (end to end)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  it('three executors: never more calls of a key in flight at the target than its limit, every task answered', async () => {
    const target = await startCountingTarget(15);
    h.onClose(target.close);
    const queue = h.newQueue();
    const prefix = h.prefix('concurrency');
    // Three executors, each with its own line and slots in one Redis: they share each key's limit.
    for (let i = 0; i < 3; i++)
      h.startExecutor({
        queue,
        maxWorkers: 8,
        concurrency: new KeyConcurrency({ redis: h.redis, prefix, leaseMs: 30_000 }),
      });
    const run = uniqueName('conc');
    const keys = 10;
    const tasks = 1_000;
    // Limits 1, 2 and 3 over the keys: 24 workers against 20 slots, so keys fill up and tasks park.
    const limitOf = (key: number) => 1 + (key % 3);
    const envelopes: RequestEnvelopeInput[] = Array.from({ length: tasks }, (_, i) => {
      const key = i % keys;
      return {
        request: { uri: `${target.url}/call?key=${run}-${key}&n=${i}` },
        meta: { requestId: `${run}-${i}`, concurrency: { key: `${run}-${key}`, limit: limitOf(key) } },
      };
    });
    const waitsBefore = await concurrencyWaits();
    await h.submit(queue, envelopes);
    const last = await h.resultOf(`${run}-${tasks - 1}`);
    await h.until(() => (envelopes.every((e) => h.results.has(e.meta.requestId)) ? true : undefined));
    expect(last.response?.status).toBe(200);
    expect(target.served()).toBe(tasks);
    expect(await concurrencyWaits()).toBeGreaterThan(waitsBefore);
    for (let key = 0; key < keys; key++)
      expect(target.most.get(`${run}-${key}`)).toBeLessThanOrEqual(limitOf(key));
  }, 120_000);

  it('tasks of one uri, client and partition waiting for two keys each wait for their own key', async () => {
    const queue = h.newQueue();
    const prefix = h.prefix('concurrency-own');
    h.startExecutor({
      queue,
      maxWorkers: 24,
      // The hanging call of k2 must outlast the test, not end at the harness's 10 s.
      responseTimeoutMs: 110_000,
      concurrency: new KeyConcurrency({ redis: h.redis, prefix, leaseMs: 120_000 }),
    });
    const run = uniqueName('own');
    const k1 = { key: `${run}-k1`, limit: 1 };
    const k2 = { key: `${run}-k2`, limit: 1 };
    // Whatever the outcome, nothing hangs past the test (the executor drains at close).
    h.onClose(async () => {
      h.target.release(`${run}-h1`);
      h.target.release(`${run}-h2`);
    });
    // One hanging call holds each key's only slot.
    await h.submit(queue, [
      {
        request: { uri: `${h.target.url}/hold/${run}-h1` },
        meta: { requestId: `${run}-h1`, concurrency: k1 },
      },
      {
        request: { uri: `${h.target.url}/hold/${run}-h2` },
        meta: { requestId: `${run}-h2`, concurrency: k2 },
      },
    ]);
    await h.until(() =>
      h.target.holding(`${run}-h1`) + h.target.holding(`${run}-h2`) === 2 ? true : undefined,
    );
    // Interleaved tasks of k1 and k2: one uri, no client, one partition, so one parked line.
    const waitsBefore = await concurrencyWaits();
    const waiting = Array.from({ length: 16 }, (_, i) => ({
      request: { uri: `${h.target.url}/status/200?run=${run}` },
      meta: {
        requestId: `${run}-${i % 2 ? 'b' : 'a'}${i}`,
        partition: `${run}-line`,
        concurrency: i % 2 ? k2 : k1,
      },
    }));
    await h.submit(queue, waiting);
    await eventually(
      async () => (await concurrencyWaits()) - waitsBefore >= waiting.length,
      60_000,
      'every waiting task refused by its key',
    );
    // k1 frees (its hanging call answers) while k2 stays held: every k1 task runs, none waits
    // parked in k2's line (it would wait out PARK_MAX_MS there, which this outlasts by far below).
    h.target.release(`${run}-h1`);
    const ones = waiting.filter((_, i) => i % 2 === 0).map((e) => e.meta.requestId);
    await eventually(() => ones.every((id) => h.results.has(id)), PARK_MAX_MS / 2, "k1's tasks answered");
    expect(h.target.holding(`${run}-h2`)).toBe(1);
    h.target.release(`${run}-h2`);
    await h.until(() => (waiting.every((e) => h.results.has(e.meta.requestId)) ? true : undefined));
  }, 120_000);

  it("serves a key's cold partitions before most of a hot partition's backlog (its slot line's turns)", async () => {
    const queue = h.newQueue();
    const prefix = h.prefix('concurrency-turns');
    // One executor: the order of its slot line (across executors the lease shares the work out).
    h.startExecutor({
      queue,
      maxWorkers: 8,
      concurrency: new KeyConcurrency({ redis: h.redis, prefix, leaseMs: 30_000 }),
    });
    const run = uniqueName('turns');
    const concurrency = { key: run, limit: 2 };
    const request = (name: string, partition: string): RequestEnvelopeInput => ({
      request: { uri: `${h.target.url}/slow/40?run=${run}&n=${name}` },
      meta: { requestId: `${run}-${name}`, partition, concurrency },
    });
    const calls = () =>
      h.target.calls
        .filter((c) => c.path.includes(`run=${run}&`))
        .map((c) => new URL(c.path, 'http://t').searchParams.get('n') ?? '');
    const hot = Array.from({ length: 24 }, (_, i) => request(`hot${i}`, 'hot'));
    await h.submit(queue, hot);
    // The hot backlog is leased and waiting for the key before the cold partitions are queued; it
    // fits the tasks one executor parks per line (more go back to the queue, whose turns then decide).
    await h.until(() => (calls().length >= 2 ? true : undefined));
    const cold = Array.from({ length: 6 }, (_, i) => request(`cold${i}`, `cold-${i}`));
    await h.submit(queue, cold);
    const seen = await h.until(() =>
      calls().filter((n) => n.startsWith('cold')).length === cold.length ? calls() : undefined,
    );
    const lastCold = seen.findLastIndex((n) => n.startsWith('cold'));
    const hotBefore = seen.slice(0, lastCold).filter((n) => n.startsWith('hot')).length;
    expect(hotBefore).toBeLessThan(hot.length / 2);
  }, 120_000);
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestEnvelopeInput } from '@requester/shared/contract';
import { registry } from '@requester/shared/metrics';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from '../worker/harness.fixture.ts';
import { KeyConcurrency } from './index.ts';

/**
 * A loopback target that counts the calls in flight per `key` query parameter as they arrive and
 * end, keeping the most it ever saw per key: what the limit promises, measured where it matters.
 */
async function countingTarget(holdMs: number) {
  const inFlight = new Map<string, number>();
  const most = new Map<string, number>();
  let served = 0;
  const server: Server = createServer((req, res) => {
    const key = new URL(req.url ?? '/', 'http://t').searchParams.get('key') ?? '';
    const now = (inFlight.get(key) ?? 0) + 1;
    inFlight.set(key, now);
    most.set(key, Math.max(most.get(key) ?? 0, now));
    req.resume();
    setTimeout(() => {
      inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
      served += 1;
      res.end('ok');
    }, holdMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    most,
    served: () => served,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const concurrencyWaits = async () =>
  (await registry.getSingleMetric('requester_concurrency_waits_total')?.get())?.values[0]?.value ?? 0;

describe('concurrency keys across executors (end to end)', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  it('three executors: never more calls of a key in flight at the target than its limit, every task answered', async () => {
    const target = await countingTarget(15);
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

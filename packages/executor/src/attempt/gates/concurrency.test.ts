import { RequesterError } from '@requester/shared/errors';
import { createRedis, type RedisClient } from '@requester/shared/redis';
import { uniqueName } from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linePartition } from '../../bulkhead/index.ts';
import { KeyConcurrency } from '../../concurrency/index.ts';
import type { SlotKey } from '../../worker/decide.ts';
import { Policies } from '../index.ts';
import { ANSWER, request, walkThrough } from '../walk.fixture.ts';
import { concurrency } from './concurrency.ts';

describe('the concurrency gate (real Redis)', () => {
  let redis: RedisClient;
  let keys: KeyConcurrency;
  beforeAll(() => {
    redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    keys = new KeyConcurrency({ redis, prefix: `${uniqueName('gate-concurrency')}:`, leaseMs: 30_000 });
  });
  afterAll(() => redis.disconnect());

  const capped = (limit: number, key = uniqueName('k')) => ({ concurrency: { key, limit } });

  /** A walk whose calls hang until `answer()`. */
  function hanging(modules = { concurrency: keys }) {
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    const walk = walkThrough(concurrency, modules, async () => {
      await answered;
      return ANSWER;
    });
    return { walk, answer: () => answer() };
  }

  const reached = async (walk: { reached: unknown[] }, n: number) => {
    while (walk.reached.length < n) await new Promise((resolve) => setImmediate(resolve));
  };

  it('passes a request without a key, and refuses one with a key where there are no keys', async () => {
    expect((await walkThrough(concurrency).run(request())).answer).toBe(ANSWER);
    const walk = walkThrough(concurrency);
    await expect(walk.run(request(capped(1)))).rejects.toBeInstanceOf(RequesterError);
    expect(walk.reached).toHaveLength(0);
  });

  it('holds a slot of the key through the call, makes a call over the limit a parked bulkhead wait, frees it after', async () => {
    const { walk, answer } = hanging();
    const meta = capped(2);
    const first = walk.run(request(meta));
    const second = walk.run(request(meta));
    await reached(walk, 2);
    const third = await walk.run(request(meta));
    expect(third.answer).toMatchObject({ kind: 'failure', stop: { kind: 'wait', reason: 'concurrency' } });
    expect(walk.reached).toHaveLength(2);
    answer();
    await Promise.all([first, second]);
    expect((await walk.run(request(meta))).answer).toBe(ANSWER);
  });

  it("keeps each client's key its own", async () => {
    const { walk, answer } = hanging();
    const key = uniqueName('shared-name');
    const mine = walk.run(request({ client: 'a', ...capped(1, key) }));
    await reached(walk, 1);
    const theirs = walk.run(request({ client: 'b', ...capped(1, key) }));
    await reached(walk, 2);
    const mineAgain = await walk.run(request({ client: 'a', ...capped(1, key) }));
    expect(mineAgain.answer).toMatchObject({ kind: 'failure', stop: { reason: 'concurrency' } });
    answer();
    await Promise.all([mine, theirs]);
  });

  it('hands a freed slot of the key to the task parked for it, which then calls without asking', async () => {
    const { walk, answer } = hanging();
    const meta = capped(1);
    const first = walk.run(request(meta));
    await reached(walk, 1);
    const parked = request(meta);
    const refused = await walk.run(parked);
    expect(refused.answer).toMatchObject({ stop: { reason: 'concurrency' } });
    // What the worker does with a bulkhead wait: it parks the task for a slot (Policies.waitForSlot).
    const policies = new Policies({ http: {} as never, retryAfterMaxMs: 60_000, concurrency: keys });
    const { uri } = parked.request;
    // The refusal names the key it waits for, as the worker's parking passes it on.
    const { concurrencyKey } = (refused.answer as { stop: { concurrencyKey?: SlotKey } }).stop;
    expect(concurrencyKey).toMatchObject({ limit: 1 });
    const slot = policies.waitForSlot(
      uri,
      undefined,
      new AbortController().signal,
      linePartition(parked.meta),
      {
        key: concurrencyKey,
      },
    );
    answer();
    await first;
    const handed = await slot;
    expect(handed).toMatchObject({ granted: true });
    expect((await walk.run(parked, { handed })).answer).toBe(ANSWER);
    // The slot went back with the answer: the key is free again.
    expect((await walk.run(request(meta))).answer).toBe(ANSWER);
  });
});

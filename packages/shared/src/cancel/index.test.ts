import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Pauses } from '../pause/index.ts';
import { Announcements, createRedis, Redis, type RedisClient } from '../redis/index.ts';
import {
  killSubscriber,
  redisServerAvailable,
  startRedisCluster,
  type TestCluster,
  uniqueName,
} from '../testing/index.ts';
import { Cancellations } from './index.ts';

describe('Cancellations.findMany', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  const prefix = uniqueName('cancel-test');
  const cancels = new Cancellations(redis, prefix, 60_000);
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('answers each request as find does, in order', async () => {
    const { cancellation } = await cancels.record('billing', 'r-1', 'client:billing');
    await cancels.record(undefined, 'r-2', 'cli:ops');
    const asked = [
      { client: 'billing', requestId: 'r-1' }, // cancelled
      { client: 'other', requestId: 'r-1' }, // another client's r-1: not cancelled
      { client: undefined, requestId: 'r-2', createdAtMs: cancellation.at - 1 }, // accepted before
      { client: undefined, requestId: 'r-2', createdAtMs: Date.now() + 60_000 }, // accepted after
      { client: 'billing', requestId: 'never' },
    ];
    const many = await cancels.findMany(asked);
    const one = await Promise.all(asked.map((r) => cancels.find(r.client, r.requestId, r.createdAtMs)));
    expect(many).toEqual(one);
    expect(many.map((c) => c?.by)).toEqual(['client:billing', undefined, 'cli:ops', undefined, undefined]);
    expect(await cancels.findMany([])).toEqual([]);
  });
});

describe('Cancellations.watch', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  const prefix = uniqueName('cancel-watch-test');
  const canceller = new Cancellations(redis, prefix, 60_000); // another process's, announcing
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  /** Resolves once `check` is true, polled every 5 ms (bounded by the test timeout). */
  const until = async (check: () => boolean) => {
    while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
  };

  it('vouches for a read until a cancel of that request is announced; other requests unaffected', async () => {
    const watched = new Cancellations(redis, prefix, 60_000);
    const announcements = new Announcements(redis, [watched.channel], { what: 'cancel' });
    watched.watch(announcements);
    try {
      await until(() => watched.mark() !== undefined);
      const mark = watched.mark();
      expect(watched.unchangedSince(mark, 'billing', 'w-1')).toBe(true);
      await canceller.record('billing', 'w-1', 'client:billing');
      await until(() => !watched.unchangedSince(mark, 'billing', 'w-1'));
      expect(watched.unchangedSince(mark, 'billing', 'w-2')).toBe(true);
      expect(watched.unchangedSince(mark, 'other', 'w-1')).toBe(true); // another client's w-1
      // A read after the announcement stands again; a second cancel of w-1 changes nothing (first wins).
      const after = watched.mark();
      await canceller.record('billing', 'w-1', 'cli:ops');
      expect(watched.unchangedSince(after, 'billing', 'w-1')).toBe(true);
      expect(watched.unchangedSince(undefined, 'billing', 'w-2')).toBe(false);
    } finally {
      await announcements.close();
    }
  });

  it('vouches for nothing read before its subscriber was lost, nor while it is not subscribed again', async () => {
    const name = uniqueName('cancel-watch-sub');
    // Its subscriber (a duplicate, options kept) is named, so that the test can drop it alone.
    const own = new Redis('redis://127.0.0.1:6379', { connectionName: name });
    const watched = new Cancellations(own, prefix, 60_000);
    const announcements = new Announcements(own, [watched.channel], { what: 'cancel' });
    watched.watch(announcements);
    try {
      await until(() => watched.mark() !== undefined);
      const mark = watched.mark();
      await killSubscriber(redis, name);
      // Not announced, as if announced while the subscriber was away: the read before must be made again.
      await redis.set(`${prefix}:cancel:w-3`, JSON.stringify({ by: 'cli:ops', at: Date.now() }));
      // Subscribed again (the loss counted): the reads before the loss still stand for nothing.
      await until(() => (watched.mark()?.heard ?? 0) > (mark?.heard ?? 0));
      expect(watched.unchangedSince(mark, undefined, 'w-3')).toBe(false);
      expect(watched.unchangedSince(mark, undefined, 'w-4')).toBe(false);
      // A read made now is vouched for.
      expect(watched.unchangedSince(watched.mark(), undefined, 'w-4')).toBe(true);
    } finally {
      await announcements.close();
      own.disconnect();
    }
    expect(watched.mark()).toBeUndefined();
  });
});

describe.runIf(redisServerAvailable())('Cancellations.watch on a Redis Cluster', () => {
  let cluster: TestCluster;
  let redis: RedisClient;
  beforeAll(async () => {
    cluster = await startRedisCluster(7751);
    redis = createRedis({ url: cluster.url, cluster: true });
  }, 60_000);
  afterAll(async () => {
    redis?.disconnect();
    await cluster?.stop();
  }, 30_000);

  it('hears the cancels and pauses written on any node', async () => {
    const watched = new Cancellations(redis, 'rq', 60_000);
    const pauses = new Pauses(redis, 'rq');
    // One subscriber for both, as an executor has.
    const heard = new Announcements(redis, [watched.channel, pauses.channel], { what: 'cancel and pause' });
    watched.watch(heard);
    try {
      while (watched.mark() === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
      const mark = watched.mark();
      const pauseMark = heard.mark();
      // Keys in many slots, so on every master.
      const ids = Array.from({ length: 12 }, (_, i) => `c-${i}`);
      for (const id of ids) expect((await watched.record('billing', id, 'cli:ops')).first).toBe(true);
      await pauses.pause('client', 'billing', 'cli:ops');
      while (ids.some((id) => watched.unchangedSince(mark, 'billing', id)))
        await new Promise((resolve) => setTimeout(resolve, 5));
      while (pauseMark && heard.unchanged(pauseMark, pauses.key, 60_000))
        await new Promise((resolve) => setTimeout(resolve, 5));
      expect(watched.unchangedSince(mark, 'billing', 'never')).toBe(true);
      expect(
        (await watched.findMany(ids.map((requestId) => ({ client: 'billing', requestId })))).every(Boolean),
      ).toBe(true);
      expect(await pauses.resume('client', 'billing')).toBe(true);
    } finally {
      await heard.close();
    }
  }, 60_000);
});

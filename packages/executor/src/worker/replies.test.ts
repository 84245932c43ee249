import { createRedis, type RedisClient, redisSubscriber } from '@requester/shared/redis';
import { REPLY_TO_HEADER, replyChannel, resultKey } from '@requester/shared/replies';
import {
  redisServerAvailable,
  startRedisCluster,
  type TestCluster,
  uniqueName,
} from '@requester/shared/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecutorHarness } from './harness.fixture.ts';

/**
 * Sync results routed to their gateway: after `out`, the
 * executor SPUBLISHes a result whose `in` record names a gateway, on that gateway's channel only.
 */
describe('executor: sync replies', () => {
  const h = new ExecutorHarness();
  beforeAll(() => h.open(), 60_000);
  afterAll(() => h.close(), 60_000);

  /** Every message of each gateway's channel, by gateway. */
  async function listen(redis: RedisClient, prefix: string, gateways: string[]) {
    const subscriber = redisSubscriber(redis);
    const heard = new Map<string, string[]>(gateways.map((g) => [g, []]));
    subscriber.on('smessage', (channel: string, message: string) => {
      const gateway = gateways.find((g) => replyChannel(prefix, g) === channel);
      if (gateway) heard.get(gateway)?.push(message);
    });
    for (const gateway of gateways) await subscriber.ssubscribe(replyChannel(prefix, gateway));
    return { heard, close: () => subscriber.disconnect() };
  }

  async function roundTrip(redis: RedisClient, keepMs?: number, inline = false) {
    const prefix = uniqueName('rp');
    const gateways = ['gw-a', 'gw-b', 'gw-c'].map((g) => uniqueName(g));
    const { heard, close } = await listen(redis, prefix, gateways);
    try {
      const { queue } = h.startExecutor({
        replies: { redis, prefix, ...(keepMs === undefined ? {} : { keepMs }) },
      });
      const ids = gateways.map(() => uniqueName('sync'));
      const unrouted = uniqueName('async');
      const envelope = (requestId: string) =>
        JSON.stringify({ request: { uri: `${h.target.url}/echo?id=${requestId}` }, meta: { requestId } });
      await h.submitRaw(queue, [
        ...ids.map((requestId, i) => {
          const headers = { [REPLY_TO_HEADER]: gateways[i] as string };
          const value = envelope(requestId);
          return {
            requestId,
            value,
            headers,
            ...(inline && { inline: { value: JSON.parse(value), headers } }),
          };
        }),
        { requestId: unrouted, value: envelope(unrouted) },
      ]);
      await Promise.all([unrouted, ...ids].map((id) => h.resultOf(id)));
      await h.until(() => (gateways.every((g) => heard.get(g)?.length) ? true : undefined));
      gateways.forEach((gateway, i) => {
        // Each gateway hears its own caller's result, the very record of out, and nothing else.
        const messages = heard.get(gateway) ?? [];
        expect(messages).toHaveLength(1);
        expect(JSON.parse(messages[0] as string)).toEqual(h.results.get(ids[i] as string)?.[0]);
      });
      return { prefix, ids, unrouted, heard };
    } finally {
      close();
    }
  }

  it('publishes a result to the gateway named by its in record, and nowhere for a record without one', async () => {
    const { prefix, ids, unrouted } = await roundTrip(h.redis);
    // Without keepMs (SYNC_FOLLOW_OUT=true) no result is kept in Redis.
    expect(await h.redis.exists(resultKey(prefix, ids[0] as string))).toBe(0);
    expect(await h.redis.exists(resultKey(prefix, unrouted))).toBe(0);
  }, 60_000);

  it('publishes the result of an inline task (its record carried in the queue) to its gateway too', async () => {
    await roundTrip(h.redis, undefined, true);
  }, 60_000);

  it('keeps sync results (only) in Redis for keepMs when long-polls read them there', async () => {
    const { prefix, ids, unrouted } = await roundTrip(h.redis, 60_000);
    for (const id of ids) {
      const kept = await h.redis.get(resultKey(prefix, id));
      expect(JSON.parse(kept ?? 'null')).toEqual(h.results.get(id)?.[0]);
      const ttl = await h.redis.pttl(resultKey(prefix, id));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
    }
    expect(await h.redis.exists(resultKey(prefix, unrouted))).toBe(0);
  }, 60_000);

  describe.runIf(redisServerAvailable())('on a Redis Cluster', () => {
    let cluster: TestCluster;
    let redis: RedisClient;
    beforeAll(async () => {
      cluster = await startRedisCluster(7651);
      redis = createRedis({ url: cluster.url, cluster: true });
    }, 60_000);
    afterAll(async () => {
      redis?.disconnect();
      await cluster?.stop();
    }, 30_000);

    it('routes each reply through the shard owning its gateway channel', async () => {
      await roundTrip(redis, 60_000);
    }, 60_000);
  });
});

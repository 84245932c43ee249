import { describe, expect, it } from 'vitest';
import { createPg } from '../pg/index.ts';
import { createRedis } from '../redis/index.ts';
import { createTestTopics, testKafka, uniqueName } from './index.ts';
import { deleteAtExit, deleteLeftovers } from './leftovers.ts';

describe('deleteLeftovers: what a benchmark made on the shared stores', () => {
  it('deletes its topics, the Redis keys under its prefixes and its databases, and nothing else', async () => {
    const name = uniqueName('leftovers');
    const topic = `${name}.in`;
    await createTestTopics([topic], 1);
    const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
    const admin = createPg({ url: 'postgres://postgres@127.0.0.1:5432/postgres', max: 1 });
    const database = name.replaceAll('-', '_');
    const other = uniqueName('kept');
    try {
      // Past one SCAN batch, under two prefixes; keys under neither (one starting alike) stay.
      const keys = Array.from({ length: 6_000 }, (_, i) => [`${name}:a:${i}`, '1']).flat();
      await redis.mset(...keys, `${name}b:1`, '1', `${name}c:1`, '1', `${other}:1`, '1');
      await admin.unsafe(`create database "${database}"`);
      deleteAtExit({
        redisPrefix: `${name}:`,
        databaseUrl: `postgres://postgres@127.0.0.1:5432/${database}`,
      });
      deleteAtExit({ redisPrefix: `${name}b:` });

      expect(await deleteLeftovers()).toEqual({ topics: 1, keys: 6_001, databases: 1 });

      const kafka = testKafka().admin();
      await kafka.connect();
      expect(await kafka.listTopics()).not.toContain(topic);
      await kafka.disconnect();
      expect(await redis.exists(`${name}:a:0`, `${name}:a:5999`, `${name}b:1`)).toBe(0);
      expect(await redis.mget(`${name}c:1`, `${other}:1`)).toEqual(['1', '1']);
      expect(await admin`select 1 from pg_database where datname = ${database}`).toHaveLength(0);
      // Registered once: a second call has nothing left to delete.
      expect(await deleteLeftovers()).toEqual({ topics: 0, keys: 0, databases: 0 });
    } finally {
      await redis.del(`${name}c:1`, `${other}:1`);
      redis.disconnect();
      await admin.unsafe(`drop database if exists "${database}"`);
      await admin.end({ timeout: 5 });
    }
  });
});

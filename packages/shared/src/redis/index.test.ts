import { afterAll, describe, expect, it } from 'vitest';
import type { Logger } from '../log/index.ts';
import { capturingLogger, type PrivateRedis, startPrivateRedis } from '../testing/index.ts';
import { checkRedisPersistence, createRedis, type RedisClient } from './index.ts';

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('Redis connections', () => {
  const servers: PrivateRedis[] = [];
  const clients: RedisClient[] = [];
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(servers.map((server) => server.stop()));
  });
  const open = async (persistent: boolean, log: Logger) => {
    const server = await startPrivateRedis({ persistent });
    servers.push(server);
    const client = createRedis({ url: server.url, logger: log });
    clients.push(client);
    return { server, client };
  };

  it('warns that a Redis without an append-only file loses queued tasks on restart', async () => {
    const { logger: log, lines } = capturingLogger();
    const { client } = await open(false, log);
    expect(await checkRedisPersistence(client, log)).toEqual(['none']);
    await settle();
    expect(lines.filter((l) => l.level === 40).map((l) => l.msg)).toEqual([
      'Redis persists nothing: a restart loses every queued task (run it with appendonly yes)',
    ]);
  });

  it('says nothing of a Redis with an append-only file', async () => {
    const { logger: log, lines } = capturingLogger();
    const { client } = await open(true, log);
    expect(await checkRedisPersistence(client, log)).toEqual(['aof']);
    await settle();
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('reports an outage once, and the recovery once', async () => {
    const { logger: log, lines } = capturingLogger();
    const { server, client } = await open(true, log);
    await client.set('k', 'v');
    await server.kill();
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // several reconnect attempts fail
    await server.restart();
    expect(await client.get('k')).toBe('v'); // the append-only file kept it through kill -9
    await settle();
    expect(lines.map((l) => l.msg)).toEqual([
      'Redis connection lost; reconnecting',
      'Redis connection restored',
    ]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PrivateRedis, startPrivateRedis } from '../testing/index.ts';
import { createRedis, type RedisClient } from './index.ts';

/**
 * ioredis's pipelines as patches/ioredis@5.11.1.patch leaves them. Unpatched, every pipeline (each
 * auto-pipelined batch is one) copied each of the client's scripts and added commands onto itself,
 * two properties a script: with the ~50 scripts of an executor, ~10 KB allocated and ~2 % of its
 * busy CPU per call. Now they come from a prototype built once per client and set of commands.
 */
type Scripted = RedisClient & Record<string, (...args: unknown[]) => Promise<unknown>>;
type Pipelined = ReturnType<RedisClient['pipeline']> & Record<string, (...args: unknown[]) => unknown>;

describe('ioredis pipelines of a client with scripts', () => {
  let server: PrivateRedis;
  let client: Scripted;
  beforeAll(async () => {
    server = await startPrivateRedis({ persistent: false });
    client = createRedis({ url: server.url }) as Scripted;
    for (let i = 0; i < 50; i++)
      client.defineCommand(`echoKey${i}`, { numberOfKeys: 1, lua: `return KEYS[1] .. '/${i}'` });
  });
  afterAll(async () => {
    client.disconnect();
    await server.stop();
  });

  it("runs the client's scripts without copying them onto each pipeline", async () => {
    const pipeline = client.pipeline() as Pipelined;
    pipeline.echoKey3?.('a');
    pipeline.echoKey49Buffer?.('b');
    expect(pipeline.length).toBe(2);
    expect(Object.getOwnPropertyNames(pipeline).filter((name) => name.startsWith('echoKey'))).toEqual([]);
    const replies = (await pipeline.exec()) as [Error | null, unknown][];
    expect(replies.map(([error, reply]) => [error, String(reply)])).toEqual([
      [null, 'a/3'],
      [null, 'b/49'],
    ]);
  });

  it('gives a pipeline the commands the client had when it was made', async () => {
    const before = client.pipeline() as Pipelined;
    client.defineCommand('lateEcho', { numberOfKeys: 1, lua: "return KEYS[1] .. '/late'" });
    const after = client.pipeline() as Pipelined;
    expect(before.lateEcho).toBeUndefined();
    after.lateEcho?.('c');
    after.echoKey0?.('d');
    expect(await after.exec()).toEqual([
      [null, 'c/late'],
      [null, 'd/0'],
    ]);
  });

  it('runs scripts in a transaction and auto-pipelined', async () => {
    const transaction = client.multi() as Pipelined;
    transaction.echoKey1?.('e');
    expect(await transaction.exec()).toEqual([[null, 'e/1']]);
    const auto = createRedis({ url: server.url }) as Scripted;
    auto.defineCommand('autoEcho', { numberOfKeys: 1, lua: "return KEYS[1] .. '/auto'" });
    try {
      expect(auto.options.enableAutoPipelining).toBe(true);
      expect(await Promise.all([auto.autoEcho?.('f'), auto.autoEcho?.('g')])).toEqual(['f/auto', 'g/auto']);
    } finally {
      auto.disconnect();
    }
  });
});

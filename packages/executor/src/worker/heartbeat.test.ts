import { FairQueue, type LeasedTask } from '@requester/queue';
import { createRedis } from '@requester/shared/redis';
import { capturingLogger, eventually, uniqueName } from '@requester/shared/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseHeartbeat } from './heartbeat.ts';
import type { Job } from './settlement.ts';

describe('LeaseHeartbeat on a real queue', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  const prefix = `${uniqueName('heartbeat')}:`;
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('counts as lost only the leases still held: not one settled while its renewal was on its way', async () => {
    const queue = new FairQueue({ redis, prefix, shards: 1, refreshMs: 0 });
    await queue.publish(['settled', 'taken', 'kept'].map((id) => ({ id, partition: id, payload: '' })));
    const { tasks } = await queue.lease(3, 60_000);
    const lease = (id: string) => tasks.find((t) => t.id === id) as LeasedTask;
    const { logger, lines } = capturingLogger('warn');
    const renewed: string[][] = [];
    let last: Promise<unknown> = Promise.resolve();
    const heartbeat: LeaseHeartbeat = new LeaseHeartbeat(
      {
        extendMany: async (leases) => {
          renewed.push(leases.map(({ token }) => tasks.find((t) => t.token === token)?.id ?? token));
          if (renewed.length === 1) {
            // While this renewal is in flight: `settled` ends here (acknowledged, then released),
            // `taken` is no longer this executor's (its lease answered by someone else).
            await queue.ack(lease('settled').token);
            heartbeat.release(lease('settled').token);
            await queue.ack(lease('taken').token);
          }
          last = queue.extendMany(leases);
          return last as ReturnType<FairQueue['extendMany']>;
        },
      },
      300,
      logger,
    );
    heartbeat.hold(tasks);
    heartbeat.start();
    await eventually(async () => renewed.length >= 3, 5_000, 'three renewals');
    heartbeat.stop();
    await last;
    await new Promise((resolve) => setImmediate(resolve));

    // Once lost, a lease is neither renewed nor counted again.
    expect(renewed.slice(0, 3)).toEqual([['settled', 'taken', 'kept'], ['kept'], ['kept']]);
    expect(lines.map(({ msg, lost }) => ({ msg, lost }))).toEqual([
      { msg: 'leases lost before their tasks finished', lost: 1 },
    ]);
    const job = (id: string): Job => ({ lease: lease(id), task: {} as Job['task'], leasedAt: Date.now() });
    expect(heartbeat.holds(job('taken'))).toBe(false);
    expect(heartbeat.holds(job('kept'))).toBe(true);
    expect(heartbeat.size).toBe(2);
  });
});

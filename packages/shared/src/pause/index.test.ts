import { afterAll, describe, expect, it } from 'vitest';
import { Announcements, createRedis, Redis } from '../redis/index.ts';
import { killSubscriber, uniqueName } from '../testing/index.ts';
import { Pauses, PauseView } from './index.ts';

/** Pauses that count the reads of the hash (`list`): the reads skipped are the point. */
class CountedPauses extends Pauses {
  lists = 0;
  override list(now?: number) {
    this.lists++;
    return super.list(now);
  }
}

const until = async (check: () => boolean) => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
};

describe('PauseView, watched', () => {
  const redis = createRedis({ url: 'redis://127.0.0.1:6379' });
  const prefix = uniqueName('pause-view-test');
  const operator = new Pauses(redis, prefix); // another process's, announcing
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  it('reads the pauses again only when a pause or resume was announced since its last read', async () => {
    const pauses = new CountedPauses(redis, prefix);
    const announcements = new Announcements(redis, [pauses.channel], { what: 'pause' });
    const view = new PauseView(pauses, announcements, 60_000);
    try {
      await until(() => announcements.mark() !== undefined);
      await view.refresh();
      await view.refresh();
      await view.refresh();
      expect(pauses.lists).toBe(1); // before: one per refresh (per lease batch)
      const task = { origin: 'https://api.example.com:443', partition: 'p' };
      expect(view.match(task)).toBeUndefined();
      const beforePause = announcements.mark();
      await operator.pause('origin', task.origin, 'cli:ops');
      // Heard: the next refresh reads it (as a lease batch after the pause did before).
      await until(() => !announcements.unchanged(beforePause ?? { heard: 0, at: 0 }, pauses.key, 60_000));
      await view.refresh();
      expect(pauses.lists).toBe(2);
      expect(view.match(task)?.by).toBe('cli:ops');
      await view.refresh();
      expect(pauses.lists).toBe(2);
      const beforeResume = announcements.mark();
      expect(await operator.resume('origin', task.origin)).toBe(true);
      expect(await operator.resume('origin', task.origin)).toBe(false);
      await until(() => !announcements.unchanged(beforeResume ?? { heard: 0, at: 0 }, pauses.key, 60_000));
      await view.refresh();
      expect(view.match(task)).toBeUndefined();
      expect(pauses.lists).toBe(3);
    } finally {
      await announcements.close();
    }
  });

  it('reads at every refresh while its subscriber is lost, and a pause written unheard meanwhile holds', async () => {
    const name = uniqueName('pause-view-sub');
    const own = new Redis('redis://127.0.0.1:6379', { connectionName: name });
    const pauses = new CountedPauses(own, prefix);
    const announcements = new Announcements(own, [pauses.channel], { what: 'pause' });
    const view = new PauseView(pauses, announcements, 60_000);
    try {
      await until(() => announcements.mark() !== undefined);
      const before = announcements.mark();
      await view.refresh();
      await killSubscriber(redis, name);
      // Not announced, as a write while the subscriber was away would be missed.
      await redis.hset(
        pauses.key,
        'client billing',
        JSON.stringify({ by: 'cli:ops', at: Date.now(), until: null }),
      );
      await until(() => (announcements.mark()?.heard ?? 0) > (before?.heard ?? 0)); // subscribed again
      await view.refresh();
      expect(view.match({ client: 'billing', partition: 'p' })?.by).toBe('cli:ops');
      expect(pauses.lists).toBe(2);
    } finally {
      await announcements.close();
      own.disconnect();
    }
  });
});

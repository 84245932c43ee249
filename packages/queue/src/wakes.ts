/**
 * Wake announcements: which shards have work now, told to idle workers so that they lease at once
 * instead of sleeping out `nextWakeMs`. Other processes hear them on `<prefix>wake` (Redis
 * pub/sub); the queue instances of this process hear them in memory, without the round trip.
 * An announcement is only a latency hint: a lost one costs a wait until the next view refresh.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import type { PublishWake } from './scripts.ts';

/**
 * Ends this process's announcements on Redis (`,@<random>`), so that it skips their echo (it heard
 * them in memory already); readers skip the entry as they skip any that is not `shard:inMs`. Also
 * the prefix of this process's cap slot ids, which must not collide with another process's.
 */
export const PROCESS_TAG = `@${randomBytes(6).toString('hex')}`;

/**
 * `!<shard>` in an announcement: a client joined that shard's fair share, and has the next turn
 * there; workers visit it first in their next lease. (Readers that do not know it skip it: it is not
 * `shard:inMs`.)
 */
const FIRST_MARK = '!';

/** The entry announcing that a shard has work in `inMs` (0: now). */
export function shardWake(shard: number, inMs: number): string {
  return `${shard}:${inMs}`;
}

/** The entry announcing that a client joined a shard's fair share (its turn is next there). */
export function clientJoinedWake(shard: number): string {
  return `${FIRST_MARK}${shard}`;
}

/** What an announcement updates: the process's view of the shards (`ShardView`). */
export interface WakeListener {
  wake(shard: number, inMs: number): void;
  first(shard: number): void;
}

/**
 * Wake announcements inside this process, by wake channel: a queue instance that publishes wakes
 * the idle workers of the others on the same queue without the round trip through Redis pub/sub.
 */
const localWakes = new EventEmitter().setMaxListeners(0);

export interface WakesOptions {
  redis: RedisClient;
  prefix: string;
  /** False: no announcement is sent or heard (workers find work at their view refresh). */
  enabled: boolean;
  shards: number;
  listener: WakeListener;
  name: string;
  logger: Logger | undefined;
}

/** One queue instance's side of the announcements: it sends them, hears them, and idles on them. */
export class Wakes {
  readonly channel: string;
  private subscriber: RedisClient | undefined;
  private readonly waiters = new Set<(woken: boolean) => void>();
  /** Wake messages received so far, and how many of them the latest lease call started after. */
  private heardCount = 0;
  private heardBeforeLease = 0;

  private readonly options: WakesOptions;

  constructor(options: WakesOptions) {
    this.options = options;
    this.channel = `${options.prefix}wake`;
  }

  /** What a publish script needs to announce its shard on Redis itself (none when disabled). */
  forPublish(shard: number): PublishWake | undefined {
    return this.options.enabled ? { channel: this.channel, shard, tail: `,${PROCESS_TAG}` } : undefined;
  }

  /**
   * Called as a lease call begins: announcements heard from now on may be of work that lease did
   * not see. Busy workers listen too: a client joining a shard's fair share concerns them.
   */
  async leaseStarts(): Promise<void> {
    this.heardBeforeLease = this.heardCount;
    if (this.options.enabled && !this.subscriber) await this.subscribe();
  }

  /**
   * Resolves after ms, or earlier when some process announces new work — true when woken by an
   * announcement, false on timeout or abort. An announcement that arrived while the latest lease
   * was under way answers true at once: that lease may not have seen the work, and waiting for the
   * next announcement would leave it queued for as long (a lost wake announcement).
   */
  async waitForWork(ms: number, signal?: AbortSignal): Promise<boolean> {
    if (ms <= 0 || signal?.aborted) return false;
    if (this.options.enabled) await this.subscribe();
    if (this.heardCount !== this.heardBeforeLease) return true;
    return new Promise<boolean>((resolve) => {
      const finish = (woken: boolean) => {
        clearTimeout(timer);
        this.waiters.delete(finish);
        signal?.removeEventListener('abort', abort);
        resolve(woken);
      };
      const abort = () => finish(false);
      const timer = setTimeout(abort, ms);
      this.waiters.add(finish);
      signal?.addEventListener('abort', abort, { once: true });
    });
  }

  /**
   * Tells the idle workers of this process — another instance on the same queue, e.g.
   * `--role all` — which shards have work now, at once. (A publish script told the other
   * processes itself.)
   */
  announceLocally(entries: readonly string[]): void {
    if (!this.options.enabled || entries.length === 0) return;
    localWakes.emit(this.channel, entries.join(','));
  }

  /** `announceLocally`, and to the other processes through Redis, tagged so that we skip the echo. */
  async announce(entries: readonly string[]): Promise<void> {
    if (!this.options.enabled || entries.length === 0) return;
    const message = entries.join(',');
    this.announceLocally(entries);
    try {
      await this.options.redis.publish(this.channel, `${message},${PROCESS_TAG}`);
    } catch (err) {
      // Only a latency hint: workers find the work on their next view refresh anyway.
      this.options.logger?.warn({ err, queue: this.options.name }, 'wake announcement failed');
    }
  }

  /** Ends the subscription and wakes every waiter with false. */
  async close(): Promise<void> {
    localWakes.off(this.channel, this.heardLocally);
    for (const finish of [...this.waiters]) finish(false);
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    if (subscriber) await subscriber.quit().catch(() => subscriber.disconnect());
  }

  /** An announcement (`shard:inMs` or `!shard`, comma-separated): the view first, then idle workers. */
  private heard(message: string): void {
    this.heardCount++;
    const { shards, listener } = this.options;
    for (const entry of message.split(',')) {
      if (entry.startsWith(FIRST_MARK)) {
        const shard = Number(entry.slice(FIRST_MARK.length));
        if (Number.isInteger(shard) && shard >= 0 && shard < shards) listener.first(shard);
        continue;
      }
      const [shard, inMs] = entry.split(':').map(Number);
      if (shard !== undefined && inMs !== undefined && shard < shards) listener.wake(shard, inMs);
    }
    for (const finish of [...this.waiters]) finish(true);
  }

  private readonly heardLocally = (message: string) => this.heard(message);

  private async subscribe(): Promise<void> {
    if (this.subscriber) return;
    const subscriber = this.options.redis.duplicate();
    this.subscriber = subscriber;
    subscriber.on('message', (_channel: string, message: string) => {
      // Our own announcement: heard already, through localWakes.
      if (!message.endsWith(PROCESS_TAG)) this.heard(message);
    });
    localWakes.on(this.channel, this.heardLocally);
    subscriber.on('error', (err: Error) =>
      this.options.logger?.warn({ err, queue: this.options.name }, 'wake subscription'),
    );
    await subscriber.subscribe(this.channel);
  }
}

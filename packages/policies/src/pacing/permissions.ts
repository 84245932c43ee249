import { type AnnouncementMark, Announcements, type RedisClient } from '@requester/shared/redis';
import { LRUCache } from 'lru-cache';
import { MAX_KEYS } from './keys.ts';

/**
 * The local permissions to call a free origin without a gate (`freeForMs`): granted by a gate or
 * report reply, counted here while calls leave on them (told to Redis with the next script call),
 * and dropped the moment report-1.lua announces that the origin stopped being free. None is
 * granted while the announcements go unheard, nor on a reply that an announcement may have beaten.
 */
export class LocalPermissions {
  private readonly redis: RedisClient;
  /** Where report-1.lua announces that an origin stopped being free (the key is the message). */
  readonly channel: string;
  private readonly freeForMs: number;
  private readonly onError: (err: unknown) => void;
  /** Each key's local permission: calls leave without a gate until `untilMs` (epoch ms). */
  private readonly free = new LRUCache<string, number>({ max: MAX_KEYS });
  /**
   * Each key's calls dispatched on the permission, not yet told to Redis: a plain Map (a set per
   * call and a delete per report, cheaper than the LRU's bookkeeping), its entries taken by the
   * next script call; bounded as the LRU is (the oldest key's count dropped).
   */
  private readonly dispatched = new Map<string, number>();
  /**
   * The announcements of origins that stop being free, heard from the first permission asked
   * (see listen). A reply to a call sent before an announcement of its key, or a loss of the
   * subscriber, grants no permission (it may have been read first): `permit`.
   */
  private announcements: Announcements | undefined;
  /** Keys with a report in flight that may end their freedom (see `OriginPacer.report`). */
  private readonly unsure = new Map<string, number>();
  private closed = false;

  constructor(redis: RedisClient, channel: string, freeForMs: number, onError: (err: unknown) => void) {
    this.redis = redis;
    this.channel = channel;
    this.freeForMs = freeForMs;
    this.onError = onError;
  }

  /** Whether calls to `key` may leave without a gate now. */
  isFree(key: string): boolean {
    const untilMs = this.free.get(key);
    if (untilMs === undefined) return false;
    if (untilMs > Date.now() && this.announcements?.listening) return true;
    this.free.delete(key);
    return false;
  }

  /** Drops `key`'s permission (news of the origin, a reset). */
  revoke(key: string): void {
    this.free.delete(key);
  }

  /** The permission to ask for: none while the announcements that would end it go unheard. */
  ask(): number {
    if (this.freeForMs === 0 || this.closed) return 0;
    return this.listen().listening ? this.freeForMs : 0;
  }

  /** The announcements' mark as a script call leaves (undefined: not listening). */
  mark(): AnnouncementMark | undefined {
    return this.announcements?.mark();
  }

  /**
   * A reply's permission (`freeMs`, 0 = none) to a call sent at `heard` (the announcements' mark
   * then; none while they went unheard): void if its key was announced since, or the subscriber lost.
   */
  permit(key: string, freeMs: number, heard: AnnouncementMark | undefined): void {
    const stands =
      heard !== undefined &&
      this.announcements?.unchanged(heard, key, Number.POSITIVE_INFINITY) === true &&
      !this.unsure.has(key);
    if (freeMs > 0 && stands) this.free.set(key, Date.now() + freeMs);
    else this.free.delete(key);
  }

  /** A report that may end `key`'s freedom left: no permission stands until it is settled. */
  beginNews(key: string): void {
    this.unsure.set(key, (this.unsure.get(key) ?? 0) + 1);
  }

  endNews(key: string): void {
    const left = (this.unsure.get(key) ?? 1) - 1;
    if (left > 0) this.unsure.set(key, left);
    else this.unsure.delete(key);
  }

  countDispatched(key: string): void {
    const count = this.dispatched.get(key);
    if (count === undefined && this.dispatched.size >= MAX_KEYS) {
      const oldest = this.dispatched.keys().next().value;
      if (oldest !== undefined) this.dispatched.delete(oldest);
    }
    this.dispatched.set(key, (count ?? 0) + 1);
  }

  /** The calls dispatched on `key`'s permission since the last script call, to tell Redis. */
  takeDispatched(key: string): number {
    const count = this.dispatched.get(key) ?? 0;
    if (count > 0) this.dispatched.delete(key);
    return count;
  }

  /** Grants no more permissions, and drops those granted (the pacer is closing). */
  stop(): void {
    this.closed = true;
    this.free.clear();
  }

  /** Ends the subscription to the channel (the caller owns and closes `redis`). */
  async close(): Promise<void> {
    await this.announcements?.close();
  }

  /**
   * Subscribes to the pacing channel, once: an origin announced drops its permission, a lost
   * subscriber every permission (Announcements resubscribes after a reconnection, listening again
   * only once Redis confirms).
   */
  private listen(): Announcements {
    this.announcements ??= new Announcements(this.redis, [this.channel], {
      what: 'pacing',
      onHeard: (key) => this.free.delete(key),
      onLost: () => this.free.clear(),
      onError: this.onError,
    });
    return this.announcements;
  }
}

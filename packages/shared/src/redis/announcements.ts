import type { Logger } from '../log/index.ts';
import type { RedisClient } from './client.ts';

/** Where an Announcements stood when a read was sent (see Announcements.mark). */
export interface AnnouncementMark {
  /** Announcements heard (and losses of the subscriber) by then. */
  heard: number;
  /** Epoch ms. */
  at: number;
}

/** Keys announced remembered; beyond, the oldest are forgotten (and marks before them vouch for nothing). */
const HEARD_KEYS_MAX = 10_000;

/**
 * Announcements of writes, heard on one or more channels by a subscriber connection of its own (the pattern of
 * the pacer's "free origin" permission, docs/architecture.md §9 "Round trips"), so that a process
 * can tell that what it read is still what Redis holds, and skip reading it again. A writer writes
 * and PUBLISHes the key it wrote in one script or transaction (a subscriber that hears of a write
 * and then reads, reads it). A read sent after `mark()` stands while `unchanged(mark, key, maxAgeMs)`:
 * no announcement of `key` heard since, the subscriber subscribed all along, and the mark younger
 * than `maxAgeMs` (what bounds a connection dead without a `close`, or a write not announced). The
 * keys of all its channels share one count: a process needs one subscriber for all of them.
 *
 * Each loss of the subscriber counts as an announcement of every key; while it is not subscribed
 * (again: resubscribed by hand at each `ready`, counted only once Redis confirms), no mark is
 * given, so every check reads. What is not vouched for: an announcement still on its way when the
 * check is made (a pub/sub delivery, sub-millisecond on one host), as a write landing just after a
 * read would be.
 */
export class Announcements {
  readonly #subscriber: RedisClient;
  readonly #logger: Logger | undefined;
  readonly #what: string;
  #heard = 0;
  /** Each announced key's count of `#heard` when last heard, oldest first. */
  readonly #heardOf = new Map<string, number>();
  /** The count of the last key forgotten (HEARD_KEYS_MAX), and of the last loss of the subscriber. */
  #forgotten = 0;
  #lost = 0;
  #listening = false;
  #closed = false;
  #warned = false;

  readonly #onHeard: ((key: string) => void) | undefined;
  readonly #onLost: (() => void) | undefined;
  readonly #onError: ((err: unknown) => void) | undefined;

  /**
   * `what`: what is announced, for the one warning of an outage (e.g. "cancel"); `onHeard`,
   * `onLost`: told of each announcement heard and each loss of the subscriber, for a holder of
   * local state to drop it at once (the pacer's permissions); `onError`: told of every error.
   */
  constructor(
    redis: RedisClient,
    channels: string[],
    options: {
      what: string;
      logger?: Logger | undefined;
      onHeard?: (key: string) => void;
      onLost?: () => void;
      onError?: (err: unknown) => void;
    },
  ) {
    this.#logger = options.logger;
    this.#what = options.what;
    this.#onHeard = options.onHeard;
    this.#onLost = options.onLost;
    this.#onError = options.onError;
    const subscriber = redis.duplicate();
    this.#subscriber = subscriber;
    subscriber.on('message', (_channel: string, key: string) => {
      this.#heard++;
      this.#heardOf.delete(key);
      this.#heardOf.set(key, this.#heard);
      if (this.#heardOf.size > HEARD_KEYS_MAX) {
        const [oldest, count] = this.#heardOf.entries().next().value as [string, number];
        this.#heardOf.delete(oldest);
        this.#forgotten = count;
      }
      this.#onHeard?.(key);
    });
    subscriber.on('ready', () => {
      subscriber.subscribe(...channels).then(
        () => {
          if (this.#closed) return;
          this.#listening = true;
          this.#warned = false;
        },
        (err: unknown) => this.#failed(err),
      );
    });
    subscriber.on('close', () => this.#lose());
    subscriber.on('error', (err: Error) => this.#failed(err));
  }

  /** Whether the subscriber is subscribed: what it is told now is heard. */
  get listening(): boolean {
    return this.#listening;
  }

  /** A mark to take right before a read is sent; undefined while the subscriber is not subscribed. */
  mark(): AnnouncementMark | undefined {
    return this.#listening ? { heard: this.#heard, at: Date.now() } : undefined;
  }

  /** Whether a read of `key` sent after `mark` still stands, `maxAgeMs` at most (see the class). */
  unchanged(mark: AnnouncementMark, key: string, maxAgeMs: number): boolean {
    if (!this.#listening || this.#lost > mark.heard || Date.now() - mark.at > maxAgeMs) return false;
    const heard = this.#heardOf.get(key);
    return heard === undefined ? this.#forgotten <= mark.heard : heard <= mark.heard;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#lose();
    await this.#subscriber.quit().catch(() => this.#subscriber.disconnect());
  }

  /** The announcements may go unheard: no mark given before stands. */
  #lose(): void {
    this.#listening = false;
    this.#heard++;
    this.#lost = this.#heard;
    this.#onLost?.();
  }

  /** One warning until the subscriber listens again (ioredis emits an error per reconnect attempt). */
  #failed(err: unknown): void {
    this.#onError?.(err);
    if (this.#warned || this.#closed) return;
    this.#warned = true;
    this.#logger?.warn({ err }, `${this.#what} announcements unheard: read again at each check`);
  }
}

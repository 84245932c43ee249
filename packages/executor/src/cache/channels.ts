import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';

/** What a fill announces on its key's channel; `timeout` when nothing came in time. */
export type FillSignal = 'stored' | 'released' | 'timeout';

export interface ChannelSubscription {
  /** The next announcement received since subscribing (buffered), or `timeout` after `ms`. */
  next(ms: number): Promise<FillSignal>;
  /** Stops listening; the channel is unsubscribed when its last listener leaves. */
  close(): void;
}

interface Channel {
  listeners: Set<(signal: FillSignal) => void>;
  subscribed: Promise<unknown>;
}

/**
 * Per-key pub/sub channels over one subscriber connection per cache (a connection in subscriber
 * mode can run nothing else). A channel is subscribed only while someone in this process waits on
 * it, so a fill with nobody waiting publishes to no one, and a process receives only the
 * announcements of keys it waits for.
 */
export class FillChannels {
  private readonly redis: RedisClient;
  private readonly logger: Logger | undefined;
  private subscriber: RedisClient | undefined;
  private readonly channels = new Map<string, Channel>();

  constructor(redis: RedisClient, logger?: Logger) {
    this.redis = redis;
    this.logger = logger;
  }

  /** Resolves once the subscription is active: announcements from then on are not missed. */
  async subscribe(name: string): Promise<ChannelSubscription> {
    const subscriber = this.connection();
    let channel = this.channels.get(name);
    if (!channel) {
      channel = { listeners: new Set(), subscribed: subscriber.subscribe(name) };
      this.channels.set(name, channel);
    }
    const inbox = new Inbox();
    const listener = (signal: FillSignal) => inbox.push(signal);
    channel.listeners.add(listener);
    const close = () => this.leave(name, listener);
    try {
      await channel.subscribed;
    } catch (err) {
      close();
      throw err;
    }
    return { next: (ms) => inbox.next(ms), close };
  }

  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.channels.clear();
    if (subscriber) await subscriber.quit().catch(() => subscriber.disconnect());
  }

  private leave(name: string, listener: (signal: FillSignal) => void): void {
    const channel = this.channels.get(name);
    if (!channel?.listeners.delete(listener) || channel.listeners.size > 0) return;
    this.channels.delete(name);
    // Commands of one connection run in order: a later SUBSCRIBE of this name lands after this.
    this.subscriber?.unsubscribe(name).catch(() => {});
  }

  private connection(): RedisClient {
    if (this.subscriber) return this.subscriber;
    const subscriber = this.redis.duplicate();
    subscriber.on('message', (name: string, message: string) => {
      if (message !== 'stored' && message !== 'released') return;
      for (const listener of this.channels.get(name)?.listeners ?? []) listener(message);
    });
    // ioredis reconnects and resubscribes by itself; an announcement lost meanwhile costs a waiter
    // at most its next lock check (see ResponseCache), so a connection error is only logged.
    subscriber.on('error', (err: Error) => this.logger?.warn({ err }, 'cache subscriber connection error'));
    this.subscriber = subscriber;
    return subscriber;
  }
}

/** Announcements received but not yet asked for, and the one pending `next`. */
class Inbox {
  private readonly received: FillSignal[] = [];
  private waiting: ((signal: FillSignal) => void) | undefined;

  push(signal: FillSignal): void {
    if (this.waiting) this.waiting(signal);
    else this.received.push(signal);
  }

  next(ms: number): Promise<FillSignal> {
    const ready = this.received.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve) => {
      const finish = (signal: FillSignal) => {
        clearTimeout(timer);
        this.waiting = undefined;
        resolve(signal);
      };
      const timer = setTimeout(() => finish('timeout'), Math.max(0, ms));
      this.waiting = finish;
    });
  }
}

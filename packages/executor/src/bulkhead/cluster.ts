import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import type { RedisClient } from '@requester/shared/redis';
import {
  type Bulkhead,
  capOf,
  type Granted,
  LocalBulkhead,
  OriginLoad,
  type SlotGrant,
  SlotLine,
  type Waiter,
  waitForSlotMs,
} from './local.ts';
import { type AcquireReply, type BulkheadScripts, loadBulkheadScripts } from './scripts.ts';

const errors = counter(
  'bulkhead_errors_total',
  'cluster bulkhead calls to Redis that failed (the cap is then counted in this process alone)',
  ['op'],
);

export interface ClusterBulkheadOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:bulkhead:`. */
  prefix: string;
  /** Calls in flight to one origin across every executor. */
  maxPerOrigin: number;
  /**
   * How long a slot is held when its caller never frees it (killed mid-call): longer than any
   * call can last, so a live call never loses its slot, and a dead executor's slots come back then.
   */
  leaseMs: number;
  random?: () => number;
  logger?: Logger;
}

const ERROR_LOG_EVERY_MS = 10_000;

/**
 * ORIGIN_CONCURRENCY_SCOPE=cluster: the slots of an origin are leases in one Redis ZSET shared by
 * every executor (acquire-1.lua), freed by ZREM when the call ends or by their deadline when the
 * caller died. The acquires of a lease batch share a round trip (auto-pipelining); a release is
 * fire-and-forget (a lost ZREM costs the slot until its lease ends, never a call).
 *
 * If Redis fails, the cap is applied in this process alone (LocalBulkhead): a hanging origin must
 * still not take every worker while Redis is away, and nothing stops for lack of Redis.
 */
export class ClusterBulkhead implements Bulkhead {
  private readonly options: ClusterBulkheadOptions;
  private readonly scripts: BulkheadScripts;
  private readonly random: () => number;
  private readonly load = new OriginLoad();
  private readonly fallback: LocalBulkhead;
  /**
   * Tasks of this process parked for a slot (waitForSlot): a slot this process frees wakes the one
   * whose client has the fewest calls in flight here to ask Redis again; another executor's
   * release is only seen at the next re-check.
   */
  private readonly line = new SlotLine();
  private readonly leasePrefix = randomBytes(6).toString('hex');
  private leaseSeq = 0;
  private lastErrorLogMs = 0;

  constructor(options: ClusterBulkheadOptions) {
    this.options = options;
    this.scripts = loadBulkheadScripts(options.redis);
    this.random = options.random ?? Math.random;
    // Counts every call of this process, those Redis granted included: during an outage the
    // local cap sees the calls already running.
    this.fallback = new LocalBulkhead({
      maxPerOrigin: options.maxPerOrigin,
      random: this.random,
      load: this.load,
    });
  }

  async acquire(origin: string, limit?: number, client = '', wait = true): Promise<SlotGrant> {
    const { redis, leaseMs } = this.options;
    const maxPerOrigin = capOf(this.options.maxPerOrigin, limit);
    const key = slotsKey(this.options.prefix, origin);
    const lease = `${this.leasePrefix}:${(++this.leaseSeq).toString(36)}`;
    let reply: AcquireReply;
    try {
      reply = await this.scripts.acquire(key, maxPerOrigin, leaseMs, lease);
    } catch (err) {
      this.failed('acquire', err);
      return this.fallback.acquire(origin, limit, client, wait);
    }
    const { granted, inFlight, oldestAgeMs } = reply;
    if (!granted) {
      const typicalMs = Math.max(this.load.typicalCallMs(origin), oldestAgeMs);
      return { granted: false, retryInMs: waitForSlotMs(typicalMs, inFlight, this.random()) };
    }
    const ended = this.load.start(origin);
    const uncount = this.line.took(origin, client);
    let released = false;
    return {
      granted: true,
      inFlight,
      full: inFlight >= maxPerOrigin,
      release: () => {
        if (released) return;
        released = true;
        ended();
        uncount();
        redis.zrem(key, lease).catch((err: unknown) => this.failed('release', err));
        // Sent after the ZREM on the same connection: its acquire sees the slot free.
        this.line.wakeNext(origin, 0);
      },
    };
  }

  /**
   * Asks Redis for a slot again at each `retryInMs` of its refusal (waitForSlotMs), or sooner when
   * a call of this process to `origin` ends; no lease round trip, no worker held meanwhile.
   */
  async waitForSlot(
    origin: string,
    limit: (() => number | undefined) | undefined,
    client = '',
    signal: AbortSignal,
  ): Promise<Granted | undefined> {
    while (!signal.aborted) {
      const grant = await this.acquire(origin, limit?.(), client, false);
      if (grant.granted) {
        if (!signal.aborted) return grant;
        grant.release();
        return undefined;
      }
      await this.freedOrLater(origin, client, grant.retryInMs, signal);
    }
    return undefined;
  }

  private freedOrLater(origin: string, client: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', gone);
        resolve();
      };
      const gone = () => {
        this.line.leave(origin, waiter);
        done();
      };
      // Redis counts the cap: every waiter here may ask it.
      const waiter: Waiter = { cap: Number.POSITIVE_INFINITY, client, wake: done };
      const timer = setTimeout(gone, ms);
      signal.addEventListener('abort', gone, { once: true });
      this.line.join(origin, waiter);
    });
  }

  private failed(op: string, err: unknown): void {
    errors.inc({ op });
    const now = Date.now();
    if (now - this.lastErrorLogMs < ERROR_LOG_EVERY_MS) return; // a Redis outage must not flood the log
    this.lastErrorLogMs = now;
    this.options.logger?.warn(
      { op, err: err instanceof Error ? err.message : String(err) },
      'cluster bulkhead unavailable: counting calls per origin in this process',
    );
  }
}

/** One key per origin, named by a hash: origins are user input (length, `{}`), the hash is neither. */
export function slotsKey(prefix: string, origin: string): string {
  return `${prefix}${createHash('sha256').update(origin, 'utf8').digest('hex').slice(0, 32)}`;
}

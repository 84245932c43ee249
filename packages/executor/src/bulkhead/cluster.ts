import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '@requester/shared/log';
import { counter } from '@requester/shared/metrics';
import { Announcements, type RedisClient } from '@requester/shared/redis';
import { SlotLine, type Waiter } from './line.ts';
import {
  type Bulkhead,
  capOf,
  type Granted,
  LocalBulkhead,
  MAX_WAIT_MS,
  OriginLoad,
  type SlotGrant,
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
  /** A client's weight, for the order of the line (SlotLine; 1 when not given). */
  weightOf?: (client: string) => number;
}

const ERROR_LOG_EVERY_MS = 10_000;
/**
 * An executor in the line of an origin asks at least this often (it may have missed its wake),
 * and one that has not asked for STALE_MS (stopped, killed) is out of the line: the longest a
 * free slot waits for a dead executor.
 */
const LINE_POLL_MS = 500;
const STALE_MS = 1_500;

/**
 * ORIGIN_CONCURRENCY_SCOPE=cluster: the slots of an origin are leases in one Redis ZSET shared by
 * every executor (acquire-1.lua), freed by ZREM when the call ends or by their deadline when the
 * caller died. The acquires of a lease batch share a round trip (auto-pipelining); a release is
 * fire-and-forget (a lost ZREM costs the slot until its lease ends, never a call).
 *
 * The tasks of this process waiting for an origin wait in one line (SlotLine, the queue's order),
 * and one loop per origin asks Redis for their slots: at each re-check of its refusal
 * (waitForSlotMs, at most LINE_POLL_MS), at once when a call of this process to the origin ends,
 * and when Redis tells it (a wake on its channel) that a freed slot is its turn. A slot Redis grants
 * goes to the line's next waiter; while the line is not empty, a new call is refused without asking
 * (it parks and joins the line), so it cannot take a slot ahead of those waiting.
 *
 * Between executors, Redis keeps a line too (acquire-3.lua): an executor refused with tasks
 * waiting joins it, a freed slot goes to the executor first in it, and one granted a slot goes to
 * its back. Executors take turns at a full origin, each serving its own line in the queue's order;
 * the lease gives each its share of every client's work, so the order holds across them. Without
 * it, an executor whose call ended took the slot back at once, and one holding no slot waited for
 * the other's whole backlog.
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
  /** Tasks of this process parked for a slot (waitForSlot), in the order they get one. */
  private readonly line: SlotLine;
  /** Per origin with a line: its asking loop's wake-up (a call of this process ended). */
  private readonly loops = new Map<string, { kick: () => void; limit: () => number | undefined }>();
  /** The slot being handed to the waiter wakeNext chose (see ask). */
  private handing: ((client: string) => Granted) | undefined;
  /** Per slots key with a loop: its origin (what a wake names). */
  private readonly loopOrigins = new Map<string, string>();
  /** This executor's wake channel, subscribed once a task of it first waits. */
  private wakes: Announcements | undefined;
  private closed = false;
  private readonly leasePrefix = randomBytes(6).toString('hex');
  private leaseSeq = 0;
  private lastErrorLogMs = 0;

  constructor(options: ClusterBulkheadOptions) {
    this.options = options;
    this.scripts = loadBulkheadScripts(options.redis, {
      executor: this.leasePrefix,
      staleMs: STALE_MS,
      channelPrefix: `${options.prefix}wake:`,
    });
    this.random = options.random ?? Math.random;
    this.line = new SlotLine(options.weightOf);
    // Counts every call of this process, those Redis granted included: during an outage the
    // local cap sees the calls already running.
    this.fallback = new LocalBulkhead({
      maxPerOrigin: options.maxPerOrigin,
      random: this.random,
      load: this.load,
      ...(options.weightOf ? { weightOf: options.weightOf } : {}),
    });
  }

  async acquire(
    origin: string,
    limit?: number,
    client = '',
    wait = true,
    partition = '',
  ): Promise<SlotGrant> {
    if (this.line.waiting(origin)) {
      // Behind those already waiting here: the task parks and joins the line (see waitForSlot).
      const typicalMs = this.load.typicalCallMs(origin);
      return {
        granted: false,
        retryInMs: waitForSlotMs(typicalMs, this.load.inFlight(origin), this.random()),
      };
    }
    const asked = await this.ask(origin, limit, false);
    if (asked === 'failed') return this.fallback.acquire(origin, limit, client, wait, partition);
    if (!asked.granted) return asked;
    return asked.grant(client);
  }

  /**
   * Joins this process's line for `origin` and waits there until its asking loop hands it a slot,
   * or `signal` aborts; no lease round trip, no worker held meanwhile.
   */
  waitForSlot(
    origin: string,
    limit: (() => number | undefined) | undefined,
    client = '',
    signal: AbortSignal,
    partition = '',
  ): Promise<Granted | undefined> {
    if (signal.aborted) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const gone = () => {
        this.line.leave(origin, waiter);
        resolve(undefined);
      };
      // Redis counts the cap: every waiter here may be handed a slot.
      const waiter: Waiter = {
        cap: Number.POSITIVE_INFINITY,
        client,
        partition,
        parked: true,
        wake: () => {
          signal.removeEventListener('abort', gone);
          const grant = this.handing?.(client);
          this.handing = undefined;
          resolve(grant);
        },
      };
      signal.addEventListener('abort', gone, { once: true });
      this.line.join(origin, waiter);
      const loop = this.loops.get(origin);
      if (loop) loop.limit = limit ?? (() => undefined);
      else void this.askFor(origin, limit ?? (() => undefined));
    });
  }

  /**
   * The asking loop of `origin`'s line: a slot for its next waiter at a time, while any waits.
   * Re-asks at once after a grant, else at the refusal's re-check or when a call here ends.
   */
  private async askFor(origin: string, limit: () => number | undefined): Promise<void> {
    const loop = { kick: () => {}, limit };
    const key = slotsKey(this.options.prefix, origin);
    this.loops.set(origin, loop);
    this.loopOrigins.set(key, origin);
    this.listen();
    /** Whether the last ask left this executor in Redis's line (refused, joining it). */
    let inLine = false;
    try {
      while (this.line.waiting(origin)) {
        const asked = await this.ask(origin, loop.limit(), true);
        inLine = asked !== 'failed' && !asked.granted;
        // Redis away: a slot under the cap counted in this process alone, as for acquire.
        const local =
          asked === 'failed' ? await this.fallback.acquire(origin, loop.limit(), '', false) : undefined;
        const grant = local?.granted
          ? () => local
          : asked !== 'failed' && asked.granted
            ? asked.grant
            : undefined;
        if (grant) {
          this.handing = grant;
          const woken = this.line.wakeNext(origin, 0);
          // Everyone left meanwhile: the slot goes back.
          if (!woken) grant('').release();
          this.handing = undefined;
          continue;
        }
        let retryInMs = MAX_WAIT_MS / 4;
        if (local && !local.granted) retryInMs = local.retryInMs;
        else if (asked !== 'failed' && !asked.granted) retryInMs = Math.min(asked.retryInMs, LINE_POLL_MS);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, retryInMs);
          loop.kick = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        loop.kick = () => {};
      }
    } finally {
      this.loops.delete(origin);
      this.loopOrigins.delete(key);
      if (inLine)
        this.scripts
          .leave(key, capOf(this.options.maxPerOrigin, loop.limit()))
          .catch((err: unknown) => this.failed('leave', err));
    }
  }

  /** Subscribes this executor's wake channel, once: a wake names the slots key whose turn it is. */
  private listen(): void {
    if (this.wakes || this.closed) return;
    this.wakes = new Announcements(this.options.redis, [`${this.options.prefix}wake:${this.leasePrefix}`], {
      what: 'origin slot turn',
      logger: this.options.logger,
      onHeard: (key) => {
        const origin = this.loopOrigins.get(key);
        if (origin) this.loops.get(origin)?.kick();
      },
    });
  }

  /** Closes the wake subscriber; waits still in progress go on, re-asking on their timers. */
  async close(): Promise<void> {
    this.closed = true;
    await this.wakes?.close();
  }

  /** One acquire in Redis: a slot to give (to whose call it becomes), a refusal, or 'failed'. */
  private async ask(
    origin: string,
    limit: number | undefined,
    joins: boolean,
  ): Promise<
    { granted: true; grant: (client: string) => Granted } | { granted: false; retryInMs: number } | 'failed'
  > {
    const { leaseMs } = this.options;
    const maxPerOrigin = capOf(this.options.maxPerOrigin, limit);
    const key = slotsKey(this.options.prefix, origin);
    const lease = `${this.leasePrefix}:${(++this.leaseSeq).toString(36)}`;
    let reply: AcquireReply;
    try {
      reply = await this.scripts.acquire(key, maxPerOrigin, leaseMs, lease, joins);
    } catch (err) {
      this.failed('acquire', err);
      return 'failed';
    }
    const { granted, inFlight, oldestAgeMs } = reply;
    // Refused for a full origin, or yielding a free slot to the executor first in the line (which
    // is told): either way this one asks again at the re-check, or when a wake says it is its turn.
    if (!granted) {
      const typicalMs = Math.max(this.load.typicalCallMs(origin), oldestAgeMs);
      return { granted: false, retryInMs: waitForSlotMs(typicalMs, inFlight, this.random()) };
    }
    const grant = (client: string): Granted => {
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
          this.scripts.release(key, lease, maxPerOrigin).catch((err: unknown) => this.failed('release', err));
          // Sent after the release on the same connection: its acquire sees the slot free.
          this.loops.get(origin)?.kick();
        },
      };
    };
    return { granted: true, grant };
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

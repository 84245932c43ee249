import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '@requester/shared/log';
import { BoundedLabel, counter, gauge } from '@requester/shared/metrics';
import { type AnnouncementMark, Announcements, type RedisClient } from '@requester/shared/redis';
import { LRUCache } from 'lru-cache';
import { eventLoopLagMs } from './loop-lag.ts';
import { loadPacingScripts, type PacingScripts, type ReportAnswer } from './scripts.ts';
import { type PacedOutcome, paceSignal, type SignalKind } from './signals.ts';

export { type PacedOutcome, type PaceSignal, paceSignal, type SignalKind, signalKind } from './signals.ts';

/**
 * Origin pacing (docs/architecture.md §9): what a target asks for, shared by every executor
 * through one Redis hash per origin (scheme://host:port, see `originOf`).
 *
 *   answer ──report──▶ hold (Retry-After, quota used up) · pace (calls/s) · concurrency limit
 *   call   ◀──gate──── no start before the hold's end, one start per 1000/pace ms
 *
 * - A 429, or a 503 with Retry-After, is the target asking to slow down: the origin is held for
 *   the time asked, then paced at 70 % of the rate we were sending at (without a
 *   `RateLimit-Policy`: at most 90 % of the rate the target served, counted in Redis), and the
 *   pace grows back gradually up to what the target advertises, or, when it advertises nothing,
 *   fast up to what it served and slowly past it (see report-1.lua). It is not a breaker
 *   failure, and the tasks it holds wait in the queue, spaced at the pace.
 * - The concurrency limit adapts: +1 per round of calls (of every executor applying it, counted
 *   from their reports) while the latency stays near its floor
 *   (the latency without load: the least seen, measured again every 10 s by a probe at one call
 *   per executor), down when
 *   it grows (queueing at the target) while the limit binds (the bulkhead's grant tells: see
 *   PaceSlot), −30 % on timeouts and 5xx (a 429 is met by the pace);
 *   MAX_WORKERS_PER_ORIGIN is its ceiling. The executor applies it to its bulkhead. The caller's
 *   own event-loop lag is allowed for: it delays the answers, it is no queue at the target.
 * Redis errors fail open (the call goes ahead unpaced), as the breaker does.
 *
 * Whose pace (docs/architecture.md §9, "whose trouble"): a call may name the credential identity it
 * goes with (`identity`: the named credential, or a hash of the caller's own `Authorization`). A
 * target that counts quotas per credential answers one credential's 429 for it alone, so the pace
 * of such calls is kept per origin and identity, each a hash of its own; calls without one share
 * the origin's. Metrics and logs name the origin only.
 *
 * Round trips (issue 26): the answers of one origin are reported in batches (those of
 * `reportEveryMs` for a free origin, of a turn of the event loop for another; REPORT_BATCH at most;
 * a 429, 503 or failure at once), one script call each. With
 * `freeForMs`, an origin known free (unpaced, not held, no probe of the floor under way) needs no
 * gate: a gate or report reply grants a local permission for that long, renewed by each report,
 * under which calls leave at once, counted here and told with the next report (the gate's
 * dispatches per second, which a 429 cuts). report-1.lua announces on `<prefix>held` whenever an
 * origin stops being free; every pacer listening drops its permission for it on the spot, and
 * grants none while it does not listen (its subscriber connection down).
 */

export interface OriginPacerOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:pace:`. */
  prefix: string;
  /** The ceiling of the adaptive concurrency limit (MAX_WORKERS_PER_ORIGIN). */
  maxLimit: number;
  /** The longest hold a target may ask for (RETRY_AFTER_MAX). */
  retryAfterMaxMs: number;
  /**
   * A dispatch slot this close is waited for in the process (the worker sleeps); a later one sends
   * the task back to the queue. Default 250 ms: at 50 calls/s, about a dozen workers asleep.
   */
  maxLocalWaitMs?: number;
  /**
   * How far ahead dispatch slots are booked for a paced origin (default and
   * least: maxLocalWaitMs, i.e. a slot is taken only by a worker about to sleep until it): a task
   * whose slot would be farther takes none
   * and is told when to ask again, so that a backlog goes at the pace of the moment, not at the one
   * it was booked at (see gate-1.lua). Infinity: every slot is booked however far (before).
   */
  bookAheadMs?: number;
  /** An origin not called for this long is forgotten (default 1 h). */
  stateTtlMs?: number;
  /**
   * How long a local permission to call a free origin without a gate lasts (ms; default 0: every
   * call asks the gate). Each report renews it; the announcement of a hold, a pace or a probe ends
   * it at once. It bounds how long a lost announcement goes unheard.
   */
  freeForMs?: number;
  /**
   * How late this process reads its answers (ms), allowed for in the latency bound (default: its
   * event loop's lag, `eventLoopLagMs`; tests pass a constant to be deterministic).
   */
  loopLagMs?: () => number;
  /**
   * How long an answer of a free origin (see `freeForMs`) that is no news (no slow-down, overload or
   * advertised pace) waits for others of its origin to share its report (ms; default
   * REPORT_EVERY_MS). Under load a report per turn of the event loop carried ~3 answers, one Redis
   * script call per 3 tasks; the waiting answers only feed the adaptive limit and the latency
   * floor, which a few ms do not change. Other origins' answers, and all with 0: those of one turn
   * of the event loop.
   */
  reportEveryMs?: number;
  logger?: Logger;
}

export type PaceGrant =
  /** Sleep `waitMs`, then call (the slot is taken). */
  | { admitted: true; waitMs: number }
  /**
   * Not before `retryInMs`: back to the queue (or parked), not an attempt, carrying `slotMs`, the
   * slot reserved for it: given back to `gate` then, it is let through at that slot. `slotMs` 0:
   * none reserved (beyond the booking horizon, or held without a pace): it asks for one then.
   */
  | { admitted: false; retryInMs: number; slotMs: number };

export interface PaceReport {
  kind: SignalKind;
  /** The answer lowered the origin's pace or concurrency limit. */
  throttled: boolean;
  limit: number;
  /** calls/s; undefined = unpaced. */
  rate: number | undefined;
  /** How long the origin is still held (ms). */
  holdMs: number;
}

/**
 * The bulkhead's slot of a reported call: whether the limit held our calls back. Only the latency
 * of a call that took the last slot (`full`) lowers the limit step by step; a queue seen below it
 * brings the limit down to the calls in flight + 1 at most, where it binds, never under: our calls
 * queue nothing the limit could spare, whatever the target's latency (a slow receiver, a client
 * capped elsewhere), and a limit lowered under them would take away concurrency the target takes.
 */
export interface PaceSlot {
  /** Calls to the origin in flight in the bulkhead's scope when it was granted, this one included. */
  inFlight: number;
  /** It took the last slot the limit (or MAX_WORKERS_PER_ORIGIN) allowed. */
  full: boolean;
}

/** One origin's shared pace; undefined = not set. */
export interface PaceSnapshot {
  /** No call starts before it (Redis epoch ms). */
  holdUntilMs: number | undefined;
  /** calls/s. */
  rate: number | undefined;
  /** The pace the target advertised (calls/s). */
  ceiling: number | undefined;
  /** The adaptive concurrency limit applied (fractional; 1 during a probe of the floor). */
  limit: number | undefined;
  /** The next free dispatch slot of a paced origin (Redis epoch ms). */
  nextSlotMs: number | undefined;
  /** The next free time of the return lane: a task beyond the booking horizon asks again then (Redis epoch ms). */
  laneMs: number | undefined;
  /** The latency without load (ms), as the last probe measured it (or less since). */
  floorMs: number | undefined;
  /** The recent latency (ms), a fast moving average. */
  recentMs: number | undefined;
  /** A probe of the floor is under way. */
  probing: boolean;
}

interface PendingReport {
  origin: string;
  /** The origin, or the origin and the identity the answers' pace is kept for (see scopeOf). */
  scope: string;
  answers: ReportAnswer[];
  kinds: SignalKind[];
  resolves: Array<(report: PaceReport | undefined) => void>;
  /** It may end the origin's freedom: no permission is granted until its reply. */
  news: boolean;
  /** It holds an answer of an origin that was not free: reported at the next turn, not the window. */
  soon: boolean;
}

/** Most answers of one origin in one report script call: a full batch is sent at once. */
const REPORT_BATCH = 64;
/** The default of `reportEveryMs`. */
export const REPORT_EVERY_MS = 20;

/** Target origins with a label of their own in the pacing metrics; later ones are `other`. */
const MAX_ORIGIN_LABELS = 50;
const originLabel = new BoundedLabel(MAX_ORIGIN_LABELS);
const ERROR_LOG_EVERY_MS = 10_000;
/** The most origins each of the pacer's local maps remembers. */
const MAX_KEYS = 10_000;

/** The least lateness past its slot that sends a call back to the gate: timers' own jitter is a few ms. */
export const LATE_FLOOR_MS = 10;

export const pacingMetrics = {
  limit: gauge(
    'origin_concurrency_limit',
    `adaptive concurrency limit of a target origin, last seen by this process (at most ${MAX_ORIGIN_LABELS} origins)`,
    ['origin'],
  ),
  rate: gauge(
    'origin_pace_rate',
    `calls per second a target origin is paced at (0 = unpaced), last seen by this process (at most ${MAX_ORIGIN_LABELS} origins)`,
    ['origin'],
  ),
  throttled: counter(
    'origin_throttled_total',
    'answers that lowered the pace or the concurrency limit of an origin, by signal (slow: 429 or 503 + Retry-After; overload: timeout, transport error, 5xx)',
    ['origin', 'signal'],
  ),
  waits: counter(
    'pacing_waits_total',
    'dispatches the pace delayed: `local` (the worker slept until the slot), `queued` (the task went back to the queue) or `late` (the worker woke past its slot and asked the gate again)',
    ['where'],
  ),
  errors: counter(
    'pacing_errors_total',
    'pacing calls to Redis that failed (the call then goes ahead unpaced)',
    ['op'],
  ),
};

export class OriginPacer {
  private readonly options: OriginPacerOptions;
  private readonly scripts: PacingScripts;
  private readonly maxLocalWaitMs: number;
  /** 0: no horizon. */
  private readonly bookAheadMs: number;
  private readonly ttlMs: number;
  /** The last limit Redis told of each origin: what the bulkhead applies without a round trip. */
  private readonly limits = new LRUCache<string, number>({ max: MAX_KEYS });
  /** The last pace Redis told of each scope (calls/s): how late a woken call may still leave. */
  private readonly rates = new LRUCache<string, number>({ max: MAX_KEYS });
  /** Each origin's key, hashed once: a gate and a report per call would hash it twice. */
  private readonly keys = new LRUCache<string, string>({ max: MAX_KEYS });
  /** Each origin's last hold this process's reports heard of: when it ends, when it was heard (epoch ms). */
  private readonly holds = new LRUCache<string, { untilMs: number; heardMs: number }>({ max: MAX_KEYS });
  private lastErrorLogMs = 0;
  private readonly freeForMs: number;
  /** Each key's local permission: calls leave without a gate until `untilMs` (epoch ms). */
  private readonly free = new LRUCache<string, number>({ max: MAX_KEYS });
  /**
   * Each key's calls dispatched on the permission, not yet told to Redis: a plain Map (a set per
   * call and a delete per report, where the LRU's bookkeeping cost ~5 µs a task), its entries
   * taken by the next report; bounded as the LRU was (the oldest key's count dropped).
   */
  private readonly dispatched = new Map<string, number>();
  /**
   * The announcements of origins that stop being free, heard from the first permission asked
   * (see listen). A reply to a call sent before an announcement of its key, or a loss of the
   * subscriber, grants no permission (it may have been read first): `permit`.
   */
  private announcements: Announcements | undefined;
  /** Keys with a report in flight that may end their freedom (see report). */
  private readonly unsure = new Map<string, number>();
  private closed = false;
  /** Answers waiting to be reported, by key. */
  private pending = new Map<string, PendingReport>();
  /**
   * Cancel the flushes scheduled: `turn`, the batches of origins that were not free, at the next
   * turn of the event loop; `window`, every batch, after `reportEveryMs`.
   */
  private readonly scheduled: { turn?: (() => void) | undefined; window?: (() => void) | undefined } = {};
  private readonly reportEveryMs: number;
  /** Names this pacer (one per executor) in its reports: the limit's steps count the executors. */
  private readonly reporter = randomBytes(6).toString('base64url');

  constructor(options: OriginPacerOptions) {
    if (!Number.isInteger(options.maxLimit) || options.maxLimit < 1)
      throw new RangeError('maxLimit must be a positive integer');
    this.options = options;
    this.scripts = loadPacingScripts(options.redis);
    this.maxLocalWaitMs = Math.max(0, Math.round(options.maxLocalWaitMs ?? 250));
    const bookAheadMs = options.bookAheadMs ?? this.maxLocalWaitMs;
    // At least 1 ms: 0 tells the script to book every slot.
    this.bookAheadMs = Number.isFinite(bookAheadMs)
      ? Math.max(1, this.maxLocalWaitMs, Math.round(bookAheadMs))
      : 0;
    this.ttlMs = Math.max(1, Math.round(options.stateTtlMs ?? 3_600_000));
    this.freeForMs = Math.max(0, Math.round(options.freeForMs ?? 0));
    this.reportEveryMs = Math.max(0, Math.round(options.reportEveryMs ?? REPORT_EVERY_MS));
  }

  /** Where report-1.lua announces that an origin stopped being free (the key is the message). */
  get channel(): string {
    return `${this.options.prefix}held`;
  }

  /**
   * When may a call to `origin` leave? Asked just before it does (see gate-1.lua); `reservedMs`:
   * the slot a previous refusal reserved for this task.
   */
  async gate(origin: string, reservedMs?: number, identity?: string): Promise<PaceGrant> {
    const scope = scopeOf(origin, identity);
    const key = this.keyOf(scope);
    if (!reservedMs && this.isFree(key)) {
      this.countDispatched(key);
      return { admitted: true, waitMs: 0 };
    }
    const dispatched = this.takeDispatched(key);
    const asked = this.askFree();
    const heard = this.announcements?.mark();
    try {
      const reply = await this.scripts.gate(key, {
        maxLocalWaitMs: this.maxLocalWaitMs,
        ttlMs: this.ttlMs,
        reservedMs: reservedMs ?? 0,
        bookAheadMs: this.bookAheadMs,
        dispatched,
        freeMs: asked,
      });
      this.remember(origin, scope, reply.limit, reply.rate);
      this.permit(key, reply.freeMs, heard);
      if (!reply.admitted) {
        pacingMetrics.waits.inc({ where: 'queued' });
        return { admitted: false, retryInMs: Math.max(1, reply.waitMs), slotMs: reply.slotMs };
      }
      if (reply.waitMs > 0) pacingMetrics.waits.inc({ where: 'local' });
      return { admitted: true, waitMs: reply.waitMs };
    } catch (err) {
      this.failed('gate', err);
      return { admitted: true, waitMs: 0 };
    }
  }

  /**
   * What `outcome` (a call to `origin` that took `latencyNs`) says about the origin's pace. `slot`:
   * what the bulkhead granted the call (see PaceSlot); unknown: taken as the last slot. Resolves
   * once Redis took it: news (a slow-down, an overload, an advertised pace) at once, any other
   * answer with its origin's next batch (`reportEveryMs` while the origin is free), whose reply the
   * caller need not wait for (see `signalKind`).
   */
  async report(
    origin: string,
    outcome: PacedOutcome,
    latencyNs: number,
    slot?: PaceSlot,
    identity?: string,
  ): Promise<PaceReport | undefined> {
    const signal = paceSignal(outcome, Date.now(), this.options.retryAfterMaxMs);
    const answer: ReportAnswer = {
      kind: signal.kind === 'slow' ? 1 : signal.kind === 'overload' ? 2 : 0,
      holdMs: signal.holdMs,
      ceilingPerSec: signal.ceilingPerSec,
      // A failure's duration says nothing of the target's queue: only answers feed the floor.
      latencyUs: outcome.kind === 'response' && outcome.status < 400 ? latencyNs / 1000 : 0,
      inFlight: slot?.inFlight ?? 0,
      full: slot?.full ?? true,
    };
    const scope = scopeOf(origin, identity);
    const key = this.keyOf(scope);
    return new Promise((resolve) => {
      let batch = this.pending.get(key);
      if (batch === undefined) {
        batch = { origin, scope, answers: [], kinds: [], resolves: [], news: false, soon: false };
        this.pending.set(key, batch);
      }
      batch.answers.push(answer);
      batch.kinds.push(signal.kind);
      batch.resolves.push(resolve);
      // A slow-down, an overload or an advertised pace is news for every executor: told at once,
      // and no call leaves without a gate until the reply says whether the origin is still free.
      const news = signal.kind !== 'ok' || signal.ceilingPerSec !== undefined;
      if (news) {
        this.free.delete(key);
        batch.news = true;
      }
      // The window is for a free origin, whose answers only feed its limit and latency floor. A
      // paced or held one's answers also feed its pace and the rate it served, which report-1.lua
      // reads by the time they reach Redis: those go at the next turn, as they come.
      if (this.reportEveryMs === 0 || !this.isFree(key)) batch.soon = true;
      if (news || batch.answers.length >= REPORT_BATCH) this.flush(key);
      else this.scheduleFlush(batch.soon);
    });
  }

  /**
   * Reports the answers waiting, then ends the subscription to the pacing channel (the caller owns
   * and closes `redis`).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.free.clear();
    this.scheduled.turn?.();
    this.scheduled.window?.();
    this.scheduled.turn = this.scheduled.window = undefined;
    await Promise.all([...this.pending.keys()].map((key) => this.flush(key)));
    await this.announcements?.close();
  }

  /**
   * How much longer `origin` is held by a hold this process heard of (an answer reported here, a
   * 429's Retry-After) after `sinceMs`, without a round trip; 0 when none. A call admitted to sleep
   * until its slot asks it before it leaves, with the time it was admitted: a hold set meanwhile
   * voids the slot, as the gate asked then would. One heard before is the gate's business (it
   * admitted the call knowing it; the two clocks differ by a round trip).
   */
  heldForMs(origin: string, sinceMs: number, nowMs = Date.now(), identity?: string): number {
    const scope = scopeOf(origin, identity);
    const hold = this.holds.get(scope);
    if (hold === undefined) return 0;
    if (hold.untilMs <= nowMs) {
      this.holds.delete(scope);
      return 0;
    }
    return hold.heardMs >= sinceMs ? hold.untilMs - nowMs : 0;
  }

  /**
   * The origin's adaptive concurrency limit as last seen (whole calls, at least 1), learnt from the
   * calls of `identity` when given and heard of, else from the origin's; undefined = not learnt.
   */
  limitOf(origin: string, identity?: string): number | undefined {
    const limit =
      (identity === undefined ? undefined : this.limits.get(scopeOf(origin, identity))) ??
      this.limits.get(origin);
    return limit === undefined ? undefined : Math.max(1, Math.floor(limit));
  }

  /**
   * How late past its slot a call that slept for it may still leave (ms): half the pace's interval,
   * at least LATE_FLOOR_MS. Later, it would arrive in the slot of the call after it, and calls woken
   * together by a stalled process would reach the target together; it asks the gate again instead.
   * Infinity when the scope has no pace.
   */
  lateToleranceMs(origin: string, identity?: string): number {
    const rate = this.rates.get(scopeOf(origin, identity)) ?? this.rates.get(origin);
    return rate && rate > 0 ? Math.max(LATE_FLOOR_MS, 500 / rate) : Number.POSITIVE_INFINITY;
  }

  /** Counts a call woken past its slot that asked the gate again (`pacing_waits_total{where="late"}`). */
  countLate(): void {
    pacingMetrics.waits.inc({ where: 'late' });
  }

  /** The shared state of one origin, or of its calls of `identity` (tests, admin); times are Redis epoch ms. */
  async snapshot(origin: string, identity?: string): Promise<PaceSnapshot> {
    const fields = await this.options.redis.hmget(
      this.keyOf(scopeOf(origin, identity)),
      'h',
      'r',
      'x',
      'c',
      't',
      'w',
      'm',
      'l',
      'q',
    );
    const [holdUntilMs, rate, ceiling, limit, nextSlotMs, laneMs, floorMs, recentMs, probe] = fields.map(
      (value) => (value == null ? undefined : Number(value)),
    );
    return {
      holdUntilMs,
      rate,
      ceiling,
      limit,
      nextSlotMs,
      laneMs,
      floorMs,
      recentMs,
      probing: probe !== undefined,
    };
  }

  /** Measures the origin's latency floor again from its next answer (tests, admin). */
  async probe(origin: string, identity?: string): Promise<void> {
    await this.options.redis.hset(this.keyOf(scopeOf(origin, identity)), 'qn', 0);
  }

  /** Forgets an origin's pace, or that of its calls of `identity` (tests, admin). */
  async reset(origin: string, identity?: string): Promise<void> {
    const scope = scopeOf(origin, identity);
    await this.options.redis.del(this.keyOf(scope));
    this.limits.delete(scope);
    this.free.delete(this.keyOf(scope));
  }

  private scheduleFlush(soon: boolean): void {
    const { scheduled } = this;
    if (soon && scheduled.turn === undefined) {
      const immediate = setImmediate(() => {
        scheduled.turn = undefined;
        for (const [key, batch] of [...this.pending]) if (batch.soon) void this.flush(key);
      });
      scheduled.turn = () => clearImmediate(immediate);
    } else if (!soon && scheduled.window === undefined) {
      // Unref'd: answers waiting are no reason to stay up (close reports them).
      const timer = setTimeout(() => {
        scheduled.window = undefined;
        for (const key of [...this.pending.keys()]) void this.flush(key);
      }, this.reportEveryMs).unref();
      scheduled.window = () => clearTimeout(timer);
    }
  }

  /** One script call for the answers of `key` waiting; settles when their promises are resolved. */
  private flush(key: string): Promise<void> {
    const batch = this.pending.get(key);
    if (batch === undefined) return Promise.resolve();
    this.pending.delete(key);
    const dispatched = this.takeDispatched(key);
    const asked = this.askFree();
    const heard = this.announcements?.mark();
    const { origin, scope, answers, kinds, resolves, news } = batch;
    if (news) this.unsure.set(key, (this.unsure.get(key) ?? 0) + 1);
    const settled = () => {
      if (!news) return;
      const left = (this.unsure.get(key) ?? 1) - 1;
      if (left > 0) this.unsure.set(key, left);
      else this.unsure.delete(key);
    };
    return this.scripts
      .report(
        key,
        {
          lagUs: (this.options.loopLagMs ?? eventLoopLagMs)() * 1000,
          maxLimit: this.options.maxLimit,
          ttlMs: this.ttlMs,
          dispatched,
          freeMs: asked,
          channel: this.freeForMs > 0 ? this.channel : '',
          reporter: this.reporter,
        },
        answers,
      )
      .then(
        ({ replies, freeMs }) => {
          settled();
          const last = replies[replies.length - 1];
          if (last) {
            this.remember(origin, scope, last.limit, last.rate);
            if (last.holdMs > 0) {
              const now = Date.now();
              this.holds.set(scope, { untilMs: now + last.holdMs, heardMs: now });
            }
          }
          this.permit(key, freeMs, heard);
          replies.forEach((reply, i) => {
            const kind = kinds[i] as SignalKind;
            if (reply.throttled) {
              pacingMetrics.throttled.inc({ origin: originLabel.of(origin), signal: kind });
              this.options.logger?.info(
                { origin, signal: kind, limit: reply.limit, rate: reply.rate, holdMs: reply.holdMs },
                'origin throttled',
              );
            }
            resolves[i]?.({ kind, ...reply });
          });
        },
        (err: unknown) => {
          settled();
          this.failed('report', err);
          for (const resolve of resolves) resolve(undefined);
        },
      );
  }

  /** Whether calls to `key` may leave without a gate now. */
  private isFree(key: string): boolean {
    const untilMs = this.free.get(key);
    if (untilMs === undefined) return false;
    if (untilMs > Date.now() && this.announcements?.listening) return true;
    this.free.delete(key);
    return false;
  }

  /** The permission to ask for: none while the announcements that would end it go unheard. */
  private askFree(): number {
    if (this.freeForMs === 0 || this.closed) return 0;
    return this.listen().listening ? this.freeForMs : 0;
  }

  /**
   * A reply's permission (`freeMs`, 0 = none) to a call sent at `heard` (the announcements' mark
   * then; none while they went unheard): void if its key was announced since, or the subscriber lost.
   */
  private permit(key: string, freeMs: number, heard: AnnouncementMark | undefined): void {
    const stands =
      heard !== undefined &&
      this.announcements?.unchanged(heard, key, Number.POSITIVE_INFINITY) === true &&
      !this.unsure.has(key);
    if (freeMs > 0 && stands) this.free.set(key, Date.now() + freeMs);
    else this.free.delete(key);
  }

  private countDispatched(key: string): void {
    const count = this.dispatched.get(key);
    if (count === undefined && this.dispatched.size >= MAX_KEYS) {
      const oldest = this.dispatched.keys().next().value;
      if (oldest !== undefined) this.dispatched.delete(oldest);
    }
    this.dispatched.set(key, (count ?? 0) + 1);
  }

  private takeDispatched(key: string): number {
    const count = this.dispatched.get(key) ?? 0;
    if (count > 0) this.dispatched.delete(key);
    return count;
  }

  /**
   * Subscribes to the pacing channel, once: an origin announced drops its permission, a lost
   * subscriber every permission (Announcements resubscribes after a reconnection, listening again
   * only once Redis confirms).
   */
  private listen(): Announcements {
    this.announcements ??= new Announcements(this.options.redis, [this.channel], {
      what: 'pacing',
      onHeard: (key) => this.free.delete(key),
      onLost: () => this.free.clear(),
      onError: (err) => this.failed('subscribe', err),
    });
    return this.announcements;
  }

  private remember(origin: string, scope: string, limit: number | undefined, rate: number | undefined): void {
    const label = originLabel.of(origin);
    if (rate === undefined) this.rates.delete(scope);
    else this.rates.set(scope, rate);
    if (limit !== undefined) {
      this.limits.set(scope, limit);
      pacingMetrics.limit.set({ origin: label }, Math.floor(limit));
    }
    pacingMetrics.rate.set({ origin: label }, rate ?? 0);
  }

  /** One key per origin (or origin and identity: see scopeOf), named by a hash: origins are user input. */
  private keyOf(scope: string): string {
    let key = this.keys.get(scope);
    if (key === undefined) {
      key = `${this.options.prefix}${createHash('sha256').update(scope, 'utf8').digest('hex').slice(0, 32)}`;
      this.keys.set(scope, key);
    }
    return key;
  }

  private failed(op: string, err: unknown): void {
    pacingMetrics.errors.inc({ op });
    const now = Date.now();
    if (now - this.lastErrorLogMs < ERROR_LOG_EVERY_MS) return; // a Redis outage must not flood the log
    this.lastErrorLogMs = now;
    this.options.logger?.warn(
      { op, err: err instanceof Error ? err.message : String(err) },
      'origin pacing unavailable: calls go ahead unpaced',
    );
  }
}

/**
 * What a pace is kept for: the origin, or the origin and a credential identity (a newline is in
 * no origin, so no origin's scope is another's). The origin's alone hashes as before.
 */
function scopeOf(origin: string, identity: string | undefined): string {
  return identity === undefined ? origin : `${origin}\n${identity}`;
}

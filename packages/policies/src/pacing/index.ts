import { randomBytes } from 'node:crypto';
import { REPORT_BATCH, REPORT_EVERY_MS, ReportBatches } from './batches.ts';
import { PaceKeys, scopeOf } from './keys.ts';
import { LearntPace } from './learnt.ts';
import { eventLoopLagMs } from './loop-lag.ts';
import { originLabel, pacingMetrics } from './metrics.ts';
import { LocalPermissions } from './permissions.ts';
import { loadPacingScripts, type PacingScripts, type ReportAnswer } from './scripts.ts';
import { type PacedOutcome, paceSignal, type SignalKind } from './signals.ts';
import type { OriginPacerOptions, PaceGrant, PaceReport, PaceSlot, PaceSnapshot } from './types.ts';

export { REPORT_EVERY_MS } from './batches.ts';
export { LATE_FLOOR_MS } from './learnt.ts';
export { pacingMetrics } from './metrics.ts';
export { type PacedOutcome, type PaceSignal, paceSignal, type SignalKind, signalKind } from './signals.ts';
export type { OriginPacerOptions, PaceGrant, PaceReport, PaceSlot, PaceSnapshot } from './types.ts';

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
 * Round trips: the answers of one origin are reported in batches (those of
 * `reportEveryMs` for a free origin, of a turn of the event loop for another; REPORT_BATCH at most;
 * a 429, 503 or failure at once), one script call each. With
 * `freeForMs`, an origin known free (unpaced, not held, no probe of the floor under way) needs no
 * gate: a gate or report reply grants a local permission for that long, renewed by each report,
 * under which calls leave at once, counted here and told with the next report (the gate's
 * dispatches per second, which a 429 cuts). report-1.lua announces on `<prefix>held` whenever an
 * origin stops being free; every pacer listening drops its permission for it on the spot, and
 * grants none while it does not listen (its subscriber connection down).
 */

const ERROR_LOG_EVERY_MS = 10_000;

export class OriginPacer {
  private readonly options: OriginPacerOptions;
  private readonly scripts: PacingScripts;
  private readonly maxLocalWaitMs: number;
  /** 0: no horizon. */
  private readonly bookAheadMs: number;
  private readonly ttlMs: number;
  private readonly keys: PaceKeys;
  private readonly learnt = new LearntPace();
  private readonly permits: LocalPermissions;
  private readonly batches: ReportBatches;
  private lastErrorLogMs = 0;
  private readonly freeForMs: number;
  private readonly reportEveryMs: number;
  private readonly weightOf: (client: string) => number;
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
    this.keys = new PaceKeys(options.prefix);
    this.weightOf = options.weightOf ?? (() => 1);
    this.permits = new LocalPermissions(options.redis, `${options.prefix}held`, this.freeForMs, (err) =>
      this.failed('subscribe', err),
    );
    this.batches = new ReportBatches(this.reportEveryMs, (key) => this.flush(key));
  }

  /** Where report-1.lua announces that an origin stopped being free (the key is the message). */
  get channel(): string {
    return this.permits.channel;
  }

  /**
   * When may a call to `origin` leave? Asked just before it does (see gate-1.lua); `reservedMs`:
   * the slot a previous refusal reserved for this task; `client`: whose call (meta.client), whose
   * waiters beyond the booking horizon come back at its weighted share of the pace.
   */
  async gate(origin: string, reservedMs?: number, identity?: string, client = ''): Promise<PaceGrant> {
    const scope = scopeOf(origin, identity);
    const key = this.keys.of(scope);
    if (!reservedMs && this.permits.isFree(key)) {
      this.permits.countDispatched(key);
      return { admitted: true, waitMs: 0 };
    }
    const dispatched = this.permits.takeDispatched(key);
    const asked = this.permits.ask();
    const heard = this.permits.mark();
    try {
      const reply = await this.scripts.gate(key, {
        maxLocalWaitMs: this.maxLocalWaitMs,
        ttlMs: this.ttlMs,
        reservedMs: reservedMs ?? 0,
        bookAheadMs: this.bookAheadMs,
        dispatched,
        freeMs: asked,
        client,
        weight: this.weightOf(client),
      });
      this.learnt.remember(origin, scope, reply.limit, reply.rate);
      this.permits.permit(key, reply.freeMs, heard);
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
    const key = this.keys.of(scope);
    return new Promise((resolve) => {
      const batch = this.batches.of(key, origin, scope);
      batch.answers.push(answer);
      batch.kinds.push(signal.kind);
      batch.resolves.push(resolve);
      // A slow-down, an overload or an advertised pace is news for every executor: told at once,
      // and no call leaves without a gate until the reply says whether the origin is still free.
      const news = signal.kind !== 'ok' || signal.ceilingPerSec !== undefined;
      if (news) {
        this.permits.revoke(key);
        batch.news = true;
      }
      // The window is for a free origin, whose answers only feed its limit and latency floor. A
      // paced or held one's answers also feed its pace and the rate it served, which report-1.lua
      // reads by the time they reach Redis: those go at the next turn, as they come.
      if (this.reportEveryMs === 0 || !this.permits.isFree(key)) batch.soon = true;
      if (news || batch.answers.length >= REPORT_BATCH) this.flush(key);
      else this.batches.schedule(batch.soon);
    });
  }

  /**
   * Reports the answers waiting, then ends the subscription to the pacing channel (the caller owns
   * and closes `redis`).
   */
  async close(): Promise<void> {
    this.permits.stop();
    await this.batches.flushAll();
    await this.permits.close();
  }

  /**
   * How much longer `origin` is held by a hold this process heard of (an answer reported here, a
   * 429's Retry-After) after `sinceMs`, without a round trip; 0 when none. A call admitted to sleep
   * until its slot asks it before it leaves, with the time it was admitted: a hold set meanwhile
   * voids the slot, as the gate asked then would. One heard before is the gate's business (it
   * admitted the call knowing it; the two clocks differ by a round trip).
   */
  heldForMs(origin: string, sinceMs: number, nowMs = Date.now(), identity?: string): number {
    return this.learnt.heldForMs(origin, sinceMs, nowMs, identity);
  }

  /**
   * The origin's adaptive concurrency limit as last seen (whole calls, at least 1), learnt from the
   * calls of `identity` when given and heard of, else from the origin's; undefined = not learnt.
   */
  limitOf(origin: string, identity?: string): number | undefined {
    return this.learnt.limitOf(origin, identity);
  }

  /**
   * How late past its slot a call that slept for it may still leave (ms): half the pace's interval,
   * at least LATE_FLOOR_MS. Later, it would arrive in the slot of the call after it, and calls woken
   * together by a stalled process would reach the target together; it asks the gate again instead.
   * Infinity when the scope has no pace.
   */
  lateToleranceMs(origin: string, identity?: string): number {
    return this.learnt.lateToleranceMs(origin, identity);
  }

  /** Counts a call woken past its slot that asked the gate again (`pacing_waits_total{where="late"}`). */
  countLate(): void {
    pacingMetrics.waits.inc({ where: 'late' });
  }

  /** The shared state of one origin, or of its calls of `identity` (tests, admin); times are Redis epoch ms. */
  async snapshot(origin: string, identity?: string): Promise<PaceSnapshot> {
    const fields = await this.options.redis.hmget(
      this.keys.of(scopeOf(origin, identity)),
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
    await this.options.redis.hset(this.keys.of(scopeOf(origin, identity)), 'qn', 0);
  }

  /** Forgets an origin's pace, or that of its calls of `identity` (tests, admin). */
  async reset(origin: string, identity?: string): Promise<void> {
    const scope = scopeOf(origin, identity);
    await this.options.redis.del(this.keys.of(scope));
    this.learnt.forget(scope);
    this.permits.revoke(this.keys.of(scope));
  }

  /** One script call for the answers of `key` waiting; settles when their promises are resolved. */
  private flush(key: string): Promise<void> {
    const batch = this.batches.take(key);
    if (batch === undefined) return Promise.resolve();
    const dispatched = this.permits.takeDispatched(key);
    const asked = this.permits.ask();
    const heard = this.permits.mark();
    const { origin, scope, answers, kinds, resolves, news } = batch;
    if (news) this.permits.beginNews(key);
    const settled = () => {
      if (news) this.permits.endNews(key);
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
            this.learnt.remember(origin, scope, last.limit, last.rate);
            if (last.holdMs > 0) this.learnt.heardHold(scope, last.holdMs);
          }
          this.permits.permit(key, freeMs, heard);
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

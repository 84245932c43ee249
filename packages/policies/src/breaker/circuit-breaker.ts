import { randomBytes } from 'node:crypto';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { BreakerCache, cacheKeyOf, HEALTHY } from './cache.ts';
import { holdChangeOf, logTransition } from './events.ts';
import { indexHold, indexTransition, unlistCallers } from './indexes.ts';
import * as inspect from './inspect.ts';
import {
  callerIdOf,
  callerKeysOf,
  callersKey,
  heldIndexKey,
  openCallersIndexKey,
  openIndexKey,
  originKeys,
  scopeKeys,
} from './keys.ts';
import { breakerMetrics } from './metrics.ts';
import { HOLDS, heldMember, STATES, TRANSITIONS, toLocal } from './replies.ts';
import { type AdmitReply, type BreakerScripts, loadBreakerScripts, type RecordReply } from './scripts.ts';
import type {
  Admission,
  BreakerScope,
  BreakerSettings,
  BreakerSnapshot,
  BreakerState,
  CallReport,
  CircuitBreakerOptions,
  HeldOrigin,
  HoldChange,
  OpenOrigin,
  RecordOutcome,
} from './types.ts';

const ERROR_LOG_EVERY_MS = 10_000;

/** The shared circuit breaker of every target origin (the rules: index.ts and the scripts). */
export class CircuitBreaker {
  readonly prefix: string;
  private readonly redis: RedisClient;
  private readonly scripts: BreakerScripts;
  private readonly threshold: number;
  private readonly openMs: number;
  private readonly maxOpenMs: number;
  private readonly trialLeaseMs: number;
  private readonly busyRetryMs: number;
  private readonly stateTtlMs: number;
  private readonly holdAfterMs: number;
  private readonly holdFailures: number;
  private readonly holdPeriodMs: number;
  private readonly cache: BreakerCache;
  private readonly store: inspect.BreakerStore;
  private readonly logger: Logger | undefined;
  private readonly ticketPrefix = randomBytes(6).toString('hex');
  private ticketSeq = 0;
  private lastErrorLogMs = 0;

  constructor(options: CircuitBreakerOptions) {
    if (!Number.isInteger(options.failureThreshold) || options.failureThreshold < 1)
      throw new RangeError('failureThreshold must be a positive integer');
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.scripts = loadBreakerScripts(options.redis);
    this.threshold = options.failureThreshold;
    this.openMs = Math.max(1, Math.round(options.openMs));
    this.maxOpenMs = Math.max(this.openMs, Math.round(options.maxOpenMs ?? 10 * this.openMs));
    this.trialLeaseMs = Math.max(1, Math.round(options.trialLeaseMs ?? 60_000));
    this.busyRetryMs = Math.max(1, Math.round(options.busyRetryMs ?? 1_000));
    this.stateTtlMs = Math.max(1, Math.round(options.stateTtlMs ?? 3_600_000));
    this.holdAfterMs = Math.max(0, Math.round(options.holdAfterMs ?? 0));
    this.holdFailures = Math.max(0, Math.round(options.holdFailures ?? 0));
    this.holdPeriodMs = Math.max(1, Math.round(options.holdPeriodMs ?? this.maxOpenMs));
    this.logger = options.logger;
    this.cache = new BreakerCache(options.stateCacheMs, options.maxCachedOrigins ?? 10_000);
    this.store = { redis: this.redis, prefix: this.prefix, stateTtlMs: this.stateTtlMs };
  }

  /**
   * May a call to `origin` by `caller` (a client; undefined: none, the origin's breaker alone) go
   * ahead now? A refusal says when to come back, and `scope` whose breaker refused.
   */
  async admit(origin: string, caller?: string, settings?: BreakerSettings): Promise<Admission> {
    const scoped = caller === undefined ? {} : { caller };
    const cacheKey = cacheKeyOf(origin, caller);
    const local = this.cache.admission(cacheKey);
    if (local) return { ...local, ...scoped };
    const ticket = `${this.ticketPrefix}:${(++this.ticketSeq).toString(36)}`;
    const callerId = caller === undefined ? '' : callerIdOf(caller);
    let reply: AdmitReply;
    try {
      reply = await this.scripts.admit(scopeKeys(this.prefix, origin, callerId), {
        threshold: settings?.failureThreshold ?? this.threshold,
        trialLeaseMs: this.trialLeaseMs,
        ticket,
        busyRetryMs: this.busyRetryMs,
        holdPeriodMs: this.holdPeriodMs,
        caller: callerId,
      });
    } catch (err) {
      this.failedOpen('admit', origin, err);
      return { admitted: true, probe: false, ...scoped };
    }
    const { admitted, probe, retryAtMs: retryAt, nowMs: now, stateCode, proven, heldCode } = reply;
    const state = STATES[stateCode] ?? 'closed';
    const held = HOLDS[heldCode];
    const scope: BreakerScope = reply.callerScope ? 'caller' : 'origin';
    if (admitted) {
      this.cache.remember(cacheKey, proven ? HEALTHY : undefined);
      if (proven) return { admitted: true, probe: false, ...scoped };
      if (probe) logTransition(this.logger, origin, 'open', 'half_open', 'origin');
      if (reply.callerProbe) logTransition(this.logger, origin, 'open', 'half_open', 'caller', caller);
      return {
        admitted: true,
        probe,
        ticket,
        ...scoped,
        ...(reply.callerProbe ? { callerProbe: true } : {}),
        ...(held ? { held, scope } : {}),
      };
    }
    const retryAtMs = toLocal(retryAt, now);
    this.cache.remember(cacheKey, { healthy: false, state, retryAtMs, held, scope });
    breakerMetrics.rejected.inc({ state, source: 'redis', scope });
    return { admitted: false, retryAtMs, state, scope, ...(held ? { held } : {}) };
  }

  /**
   * Reports the outcome of an admitted call (`{ ...admission, success }`): whether the origin (or
   * the caller's own breaker there) is held after it, and a hold that began or ended with it.
   * Never throws.
   */
  async record(origin: string, report: CallReport): Promise<RecordOutcome> {
    const { caller } = report;
    const cacheKey = cacheKeyOf(origin, caller);
    if (this.cache.successAlreadyWritten(cacheKey, report)) return {};
    let reply: RecordReply;
    try {
      const callerId = caller === undefined ? '' : callerIdOf(caller);
      reply = await this.scripts.record(scopeKeys(this.prefix, origin, callerId), {
        ...this.thresholdsOf(report.settings),
        stateTtlMs: this.stateTtlMs,
        success: report.success,
        probe: report.probe,
        ticket: report.ticket ?? '',
        origin,
        holdAfterMs: this.holdAfterMs,
        holdFailures: this.holdFailures,
        optOut: report.optOut === true,
        holdPeriodMs: this.holdPeriodMs,
        caller: callerId,
        callerProbe: report.callerProbe === true,
      });
    } catch (err) {
      this.failedOpen('record', origin, err);
      return {};
    }
    const mine = reply.caller;
    const { nowMs: now } = reply;
    const held = HOLDS[reply.heldCode];
    const callerHeld = mine ? HOLDS[mine.heldCode] : undefined;
    const openUntil = Math.max(
      STATES[reply.stateCode] === 'open' ? reply.retryAtMs : 0,
      mine && STATES[mine.stateCode] === 'open' ? mine.retryAtMs : 0,
    );
    if (reply.proven && (mine === undefined || mine.proven))
      this.cache.remember(cacheKey, report.success ? { healthy: true, successAt: Date.now() } : HEALTHY);
    else if (openUntil > 0) {
      const scope: BreakerScope = openUntil === reply.retryAtMs ? 'origin' : 'caller';
      const heldNow = scope === 'origin' ? held : callerHeld;
      this.cache.remember(cacheKey, {
        healthy: false,
        state: 'open',
        retryAtMs: toLocal(openUntil, now),
        held: heldNow,
        scope,
      });
    } else this.cache.remember(cacheKey, undefined);
    const change = TRANSITIONS[reply.transition];
    if (change) {
      logTransition(
        this.logger,
        origin,
        change.from,
        change.to,
        'origin',
        undefined,
        toLocal(reply.retryAtMs, now),
      );
      await this.updateIndex(origin, change.to, reply.retryAtMs);
    }
    const holdChange = holdChangeOf(this.logger, origin, reply, held, undefined);
    if (holdChange) await this.updateHeldIndex(origin, holdChange.kind, reply.heldSinceMs);
    // The caller's own breaker: told in the log, the journal and the metrics' `scope`, never in
    // the origins' listings (the origin is fine for everyone else).
    const callerChange = mine ? TRANSITIONS[mine.transition] : undefined;
    if (mine && callerChange)
      logTransition(
        this.logger,
        origin,
        callerChange.from,
        callerChange.to,
        'caller',
        caller,
        toLocal(mine.retryAtMs, now),
      );
    if (mine && callerChange)
      await this.updateIndex(
        heldMember(origin, caller),
        callerChange.to,
        mine.retryAtMs,
        openCallersIndexKey(this.prefix),
      );
    const callerHoldChange = mine ? holdChangeOf(this.logger, origin, mine, callerHeld, caller) : undefined;
    if (mine && callerHoldChange)
      await this.updateHeldIndex(heldMember(origin, caller), callerHoldChange.kind, mine.heldSinceMs);
    // The hold that concerns the call: its probe's scope, else the origin's, else the caller's.
    const heldScope: BreakerScope | undefined = report.callerProbe
      ? callerHeld && 'caller'
      : held
        ? 'origin'
        : callerHeld && 'caller';
    const heldUntil = heldScope === 'origin' ? reply.retryAtMs : mine?.retryAtMs;
    const anyChange = holdChange ?? callerHoldChange;
    return {
      ...(heldScope && heldUntil !== undefined
        ? {
            held: heldScope === 'origin' ? held : callerHeld,
            retryAtMs: toLocal(heldUntil, now),
            scope: heldScope,
          }
        : {}),
      ...(anyChange ? { change: anyChange } : {}),
    };
  }

  /** `admit` for a lease batch (one Redis round trip with auto-pipelining). */
  admitMany(
    calls: ReadonlyArray<
      string | { origin: string; caller?: string | undefined; settings?: BreakerSettings | undefined }
    >,
  ): Promise<Admission[]> {
    return Promise.all(
      calls.map((call) =>
        typeof call === 'string' ? this.admit(call) : this.admit(call.origin, call.caller, call.settings),
      ),
    );
  }

  /** The thresholds a record follows: the call's own settings (a destination's), else the deployment's. */
  private thresholdsOf(settings: BreakerSettings | undefined): {
    threshold: number;
    openMs: number;
    maxOpenMs: number;
  } {
    const openMs = Math.max(1, Math.round(settings?.openMs ?? this.openMs));
    return {
      threshold: settings?.failureThreshold ?? this.threshold,
      openMs,
      maxOpenMs: Math.max(openMs, Math.round(settings?.maxOpenMs ?? this.maxOpenMs)),
    };
  }

  /** `record` for a lease batch. */
  recordMany(reports: ReadonlyArray<CallReport & { origin: string }>): Promise<RecordOutcome[]> {
    return Promise.all(reports.map((report) => this.record(report.origin, report)));
  }

  /**
   * Origins whose breaker is open or half-open, latest open-until first (for backpressure: e.g.
   * pause when one stays open long). Also samples the `breaker_open*` gauges.
   */
  openOrigins(limit = 1_000): Promise<OpenOrigin[]> {
    return inspect.openOrigins(this.store, limit);
  }

  /**
   * Callers whose own breaker at an origin is open or half-open (only their calls failed there),
   * latest open-until first: the operator's listing; never backpressure (the origin is fine).
   */
  openCallers(limit = 1_000): Promise<Array<OpenOrigin & { client: string }>> {
    return inspect.openCallers(this.store, limit);
  }

  /** Origins held back, longest held first (also in `openOrigins`, which samples their gauges). */
  heldOrigins(limit = 1_000): Promise<HeldOrigin[]> {
    return inspect.heldOrigins(this.store, limit);
  }

  /** The shared state of one origin, or of a caller's own breaker there, read from Redis (admin, tests). */
  snapshot(origin: string, caller?: string): Promise<BreakerSnapshot> {
    return inspect.snapshot(this.store, origin, caller);
  }

  /**
   * Closes an origin's breaker by hand (`requester breakers reset`): its shared state is forgotten,
   * a hold (failing or opt-out) with it, so the next call is admitted as for a new origin.
   * Executors that cached the open state keep refusing for at most stateCacheMs; tasks sent to a
   * held origin's next probe instant come back then. Returns whether there was a state to forget.
   */
  async reset(origin: string): Promise<boolean> {
    const callers = callersKey(this.prefix, origin);
    const ids = await this.redis.smembers(callers);
    const keys = [...originKeys(this.prefix, origin), ...callerKeysOf(this.prefix, origin, ids), callers];
    const [removed] = await Promise.all([
      this.redis.del(...keys),
      this.redis.zrem(openIndexKey(this.prefix), origin),
      this.redis.zrem(heldIndexKey(this.prefix), origin),
    ]);
    await unlistCallers(this.redis, this.prefix, origin);
    this.cache.forgetOrigin(origin);
    return removed > 0;
  }

  /** Forgets the locally cached states (tests, admin after a manual reset). */
  clearCache(): void {
    this.cache.clear();
  }

  /** Keeps the held index after a hold began or ended (best effort: repaired when listed). */
  private async updateHeldIndex(
    member: string,
    kind: HoldChange['kind'],
    sinceRedisMs: number,
  ): Promise<void> {
    try {
      await indexHold(this.redis, heldIndexKey(this.prefix), member, kind, sinceRedisMs);
    } catch (err) {
      this.failedOpen('index', member, err);
    }
  }

  /** Keeps an open index after a transition (best effort: repaired when listed). */
  private async updateIndex(
    member: string,
    to: BreakerState,
    untilRedisMs: number,
    index = openIndexKey(this.prefix),
  ): Promise<void> {
    try {
      await indexTransition(this.redis, index, member, to, untilRedisMs);
    } catch (err) {
      this.failedOpen('index', member, err);
    }
  }

  private failedOpen(op: string, origin: string, err: unknown): void {
    breakerMetrics.errors.inc({ op });
    const now = Date.now();
    if (now - this.lastErrorLogMs < ERROR_LOG_EVERY_MS) return; // a Redis outage must not flood the log
    this.lastErrorLogMs = now;
    this.logger?.warn(
      { origin, op, err: err instanceof Error ? err.message : String(err) },
      'circuit breaker unavailable: letting calls through',
    );
  }
}

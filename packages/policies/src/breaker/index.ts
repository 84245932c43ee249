import { randomBytes } from 'node:crypto';
import type { Config } from '@requester/shared/config';
import type { Logger } from '@requester/shared/log';
import type { RedisClient } from '@requester/shared/redis';
import { LRUCache } from 'lru-cache';
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
import { breakerMetrics, MAX_ORIGIN_LABELS } from './metrics.ts';
import {
  type AdmitReply,
  type BreakerScripts,
  loadBreakerScripts,
  type RecordReply,
  type ScopeReply,
} from './scripts.ts';

/**
 * The shared circuit breaker (docs/architecture.md §5 outbound hygiene, §9): one per target origin, its state
 * in Redis so that every executor sees the same breaker.
 *
 *   closed ──threshold consecutive failures──▶ open ──openMs──▶ half-open ──probe ok──▶ closed
 *                                               ▲                   │
 *                                               └──probe failed─────┘ (open time doubles, capped)
 *
 * A closed origin whose last outcome was a success is "proven": its calls go through freely, and
 * executors remember that for stateCacheMs without asking Redis. Until proven (a new origin, or
 * after a failure) at most `threshold − failures` calls are out at once, each holding a slot, so a
 * dead origin costs at most `threshold` calls however many executors and workers hit it at once,
 * then one probe per open period. The Lua scripts in `commands/` hold the exact rules.
 *
 * A long run of failures holds the origin back ("failing-held", docs/architecture.md §9): once it
 * has failed for `holdAfterMs` without a success (or `holdFailures` times in a row), it is probed
 * once per `holdPeriodMs` on a fixed grid, and refused callers are sent to the next probe instant,
 * until a probe succeeds. A call whose answer carries the receiver's opt-out holds it at once, with
 * no probe, until `reset`.
 *
 * A call may name its caller (the client): the breaker then tells a failing origin from a failing
 * caller (docs/architecture.md §9, "whose trouble"). A caller's failures count in a breaker of its
 * own at that origin, which opens, holds and is probed by the rules above for its calls alone;
 * the origin's counts them only once a second caller fails before a success ends the run, and a
 * receiver's opt-out holds the caller it answered. Both states are in one slot, read and written
 * by one script call, as the origin's alone was.
 *
 * Redis errors fail open (the call goes ahead): the breaker protects targets, it must not become
 * an outage of its own.
 */

export type BreakerState = 'closed' | 'open' | 'half_open';

/**
 * Why an origin is held back: `failing` (its run of failures reached the bound; probes find it
 * back), `opt_out` (a receiver's answer asked to stop delivering; an operator's reset ends it).
 */
export type HoldReason = 'failing' | 'opt_out';

/** Whose breaker decided: the origin's (every caller's), or the caller's own at that origin. */
export type BreakerScope = 'origin' | 'caller';

export type Admission =
  /**
   * `ticket`: hand it back to `record` (it frees the call's slot); absent for proven origins.
   * `held`: the call is the probe of a held origin (or of the caller's held breaker: `scope`).
   * `caller`: as given to `admit`; `callerProbe`: the call is the probe of the caller's own breaker.
   */
  | {
      admitted: true;
      probe: boolean;
      ticket?: string;
      held?: HoldReason;
      scope?: BreakerScope;
      caller?: string;
      callerProbe?: boolean;
    }
  /**
   * `retryAtMs`: local epoch ms when the origin may take calls again (reschedule the task there).
   * `held`: the origin is held back (the task waits for its next probe instant).
   */
  | { admitted: false; retryAtMs: number; state: BreakerState; held?: HoldReason; scope?: BreakerScope };

/** What `record` needs: `{ ...admission, success }`. */
export interface CallReport {
  success: boolean;
  probe: boolean;
  ticket?: string | undefined;
  /** The answer carried the receiver's opt-out (`webhook-delivery: disable`): hold the caller (or, without one, the origin). */
  optOut?: boolean | undefined;
  /** The caller given to `admit` (undefined: the origin's breaker alone). */
  caller?: string | undefined;
  callerProbe?: boolean | undefined;
}

/** A hold that began or ended with a recorded outcome (times are local epoch ms). */
export interface HoldChange {
  kind: 'began' | 'ended';
  reason: HoldReason;
  /** When the hold began. */
  sinceMs: number;
  /** Failures in the run (when it ended: before the success that ended it). */
  failures: number;
  /** When the run of failures began (undefined: none, e.g. an opt-out after a success). */
  failingSinceMs: number | undefined;
  /** `caller`: the hold is the caller's own breaker's at the origin, not the origin's. */
  scope: BreakerScope;
}

/** What `record` learnt: whether the origin is held after the outcome, and a hold that began or ended. */
export interface RecordOutcome {
  held?: HoldReason;
  /** Held: the next probe instant (local epoch ms), where a task of the origin should wait. */
  retryAtMs?: number;
  /** Whose breaker is held: the origin's, or the caller's own. */
  scope?: BreakerScope;
  change?: HoldChange;
}

export interface HeldOrigin {
  origin: string;
  /** Set when the hold is this caller's own breaker at the origin (its calls alone wait). */
  client?: string;
  reason: HoldReason;
  /** Local epoch ms. */
  sinceMs: number;
  failures: number;
  failingSinceMs: number | undefined;
  /** When the next probe may go (local epoch ms; past while it is out, or for an opt-out nobody asked about since). */
  nextProbeMs: number | undefined;
}

export interface CircuitBreakerOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `rq:breaker:`. */
  prefix: string;
  failureThreshold: number;
  /** First open period; each failed probe doubles it, up to maxOpenMs. */
  openMs: number;
  /** How long an executor trusts what it last learnt of an origin (0 = ask Redis every time). */
  stateCacheMs: number;
  /** Cap on the open period (default 10 × openMs). */
  maxOpenMs?: number;
  /** How long a probe or trial slot is held when its caller never reports (default 60 s): longer than any call. */
  trialLeaseMs?: number;
  /** When a caller refused by a busy origin (probe or trial slots taken) should come back (default 1 s). */
  busyRetryMs?: number;
  /** An origin not heard of for this long (beyond its open period) is forgotten (default 1 h). */
  stateTtlMs?: number;
  /** Origins remembered locally (LRU), default 10,000. */
  maxCachedOrigins?: number;
  /** A run of failures this long (without a success) holds the origin back; 0 = never (default). */
  holdAfterMs?: number;
  /** A run of this many failures holds the origin back; 0 = never (default). */
  holdFailures?: number;
  /** The probe period of a held origin (default maxOpenMs). */
  holdPeriodMs?: number;
  logger?: Logger;
}

export interface OpenOrigin {
  origin: string;
  state: 'open' | 'half_open';
  /** Local epoch ms when it half-opens (past for half-open). */
  retryAtMs: number;
  /** Local epoch ms when its current run of opens began. */
  openSinceMs: number;
}

export interface BreakerSnapshot {
  state: BreakerState;
  /** Consecutive failures while closed; undefined = not seen yet (or forgotten). */
  failures: number | undefined;
  /** Opens in a row (0 when closed). */
  opens: number;
  /** Local epoch ms; set when open or half-open. */
  openUntilMs: number | undefined;
  openSinceMs: number | undefined;
  /** Probe / trial slots held now. */
  slots: number;
  /** Held back, and since when (local epoch ms). */
  held: HoldReason | undefined;
  heldSinceMs: number | undefined;
  /** The run of failures since the last success: how many, since when (local epoch ms). */
  runFailures: number;
  failingSinceMs: number | undefined;
}

const STATES: readonly BreakerState[] = ['closed', 'open', 'half_open'];
/** Indexed by the scripts' `held` code (includes/state.lua). */
const HOLDS: ReadonlyArray<HoldReason | undefined> = [undefined, 'failing', 'opt_out'];
const HOLD_CODES: Readonly<Record<string, HoldReason>> = { '1': 'failing', '2': 'opt_out' };
const TRANSITIONS = [
  undefined,
  { from: 'closed', to: 'open' },
  { from: 'half_open', to: 'open' },
  { from: 'half_open', to: 'closed' },
] as const;
/** Bound on the open-origins index: origins are user input. */
const MAX_INDEXED = 10_000;
const ERROR_LOG_EVERY_MS = 10_000;

/** `successAt`: when this executor last wrote a success of the (proven) origin to Redis. */
type CacheEntry =
  | { healthy: true; successAt?: number }
  | {
      healthy: false;
      state: BreakerState;
      retryAtMs: number;
      held?: HoldReason | undefined;
      scope: BreakerScope;
    };
const HEALTHY: CacheEntry = { healthy: true };

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
  private readonly cache: LRUCache<string, CacheEntry> | undefined;
  private readonly stateCacheMs: number;
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
    this.stateCacheMs = options.stateCacheMs;
    this.cache =
      options.stateCacheMs > 0
        ? new LRUCache({ max: options.maxCachedOrigins ?? 10_000, ttl: options.stateCacheMs })
        : undefined;
  }

  /**
   * May a call to `origin` by `caller` (a client; undefined: none, the origin's breaker alone) go
   * ahead now? A refusal says when to come back, and `scope` whose breaker refused.
   */
  async admit(origin: string, caller?: string): Promise<Admission> {
    const scoped = caller === undefined ? {} : { caller };
    const cacheKey = cacheKeyOf(origin, caller);
    const local = this.fromCache(cacheKey);
    if (local) return { ...local, ...scoped };
    const ticket = `${this.ticketPrefix}:${(++this.ticketSeq).toString(36)}`;
    const callerId = caller === undefined ? '' : callerIdOf(caller);
    let reply: AdmitReply;
    try {
      reply = await this.scripts.admit(scopeKeys(this.prefix, origin, callerId), {
        threshold: this.threshold,
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
      this.remember(cacheKey, proven ? HEALTHY : undefined);
      if (proven) return { admitted: true, probe: false, ...scoped };
      if (probe) this.transition(origin, 'open', 'half_open', 'origin');
      if (reply.callerProbe) this.transition(origin, 'open', 'half_open', 'caller', caller);
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
    this.remember(cacheKey, { healthy: false, state, retryAtMs, held, scope });
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
    if (this.successAlreadyWritten(cacheKey, report)) return {};
    let reply: RecordReply;
    try {
      const callerId = caller === undefined ? '' : callerIdOf(caller);
      reply = await this.scripts.record(scopeKeys(this.prefix, origin, callerId), {
        threshold: this.threshold,
        openMs: this.openMs,
        maxOpenMs: this.maxOpenMs,
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
      this.remember(cacheKey, report.success ? { healthy: true, successAt: Date.now() } : HEALTHY);
    else if (openUntil > 0) {
      const scope: BreakerScope = openUntil === reply.retryAtMs ? 'origin' : 'caller';
      const heldNow = scope === 'origin' ? held : callerHeld;
      this.remember(cacheKey, {
        healthy: false,
        state: 'open',
        retryAtMs: toLocal(openUntil, now),
        held: heldNow,
        scope,
      });
    } else this.remember(cacheKey, undefined);
    const change = TRANSITIONS[reply.transition];
    if (change) {
      this.transition(origin, change.from, change.to, 'origin', undefined, toLocal(reply.retryAtMs, now));
      await this.updateIndex(origin, change.to, reply.retryAtMs);
    }
    const holdChange = this.holdChange(origin, reply, held, undefined);
    if (holdChange) await this.updateHeldIndex(origin, holdChange.kind, reply.heldSinceMs);
    // The caller's own breaker: told in the log, the journal and the metrics' `scope`, never in
    // the origins' listings (the origin is fine for everyone else).
    const callerChange = mine ? TRANSITIONS[mine.transition] : undefined;
    if (mine && callerChange)
      this.transition(
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
    const callerHoldChange = mine ? this.holdChange(origin, mine, callerHeld, caller) : undefined;
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
    calls: ReadonlyArray<string | { origin: string; caller?: string | undefined }>,
  ): Promise<Admission[]> {
    return Promise.all(
      calls.map((call) =>
        typeof call === 'string' ? this.admit(call) : this.admit(call.origin, call.caller),
      ),
    );
  }

  /** `record` for a lease batch. */
  recordMany(reports: ReadonlyArray<CallReport & { origin: string }>): Promise<RecordOutcome[]> {
    return Promise.all(reports.map((report) => this.record(report.origin, report)));
  }

  /**
   * Origins whose breaker is open or half-open, latest open-until first (for backpressure: e.g.
   * pause when one stays open long). Also samples the `breaker_open*` gauges.
   */
  async openOrigins(limit = 1_000): Promise<OpenOrigin[]> {
    const index = openIndexKey(this.prefix);
    const now = await this.redisNow();
    // Half-open origins nobody probed: their state has expired by now.
    await this.redis.zremrangebyscore(index, '-inf', now - this.stateTtlMs);
    const members = await this.redis.zrevrange(index, 0, limit - 1);
    const states = await Promise.all(
      members.map((origin) => this.redis.hmget(originKeys(this.prefix, origin)[0], 'u', 's')),
    );
    const open: OpenOrigin[] = [];
    const stale: string[] = [];
    for (const [i, origin] of members.entries()) {
      const [u, s] = (states[i] ?? []).map(Number);
      if (!u) {
        stale.push(origin); // closed by a process that died before unlisting it
        continue;
      }
      open.push({
        origin,
        state: now < u ? 'open' : 'half_open',
        retryAtMs: toLocal(u, now),
        openSinceMs: toLocal(s || u, now),
      });
    }
    if (stale.length > 0) await this.redis.zrem(index, ...stale);
    sampleGauges(open);
    sampleHeldGauges(await this.heldOrigins(limit));
    return open;
  }

  /**
   * Callers whose own breaker at an origin is open or half-open (only their calls failed there),
   * latest open-until first: the operator's listing; never backpressure (the origin is fine).
   */
  async openCallers(limit = 1_000): Promise<Array<OpenOrigin & { client: string }>> {
    const index = openCallersIndexKey(this.prefix);
    const now = await this.redisNow();
    const members = await this.redis.zrevrange(index, 0, limit - 1);
    const states = await Promise.all(
      members.map((member) => {
        const { origin, client = '' } = ofHeldMember(member);
        return this.redis.hmget(scopeKeys(this.prefix, origin, callerIdOf(client))[2] ?? '', 'u', 's');
      }),
    );
    const open: Array<OpenOrigin & { client: string }> = [];
    const stale: string[] = [];
    for (const [i, member] of members.entries()) {
      const [u, s] = (states[i] ?? []).map(Number);
      if (!u) {
        stale.push(member); // closed, or forgotten
        continue;
      }
      const { origin, client = '' } = ofHeldMember(member);
      open.push({
        origin,
        client,
        state: now < u ? 'open' : 'half_open',
        retryAtMs: toLocal(u, now),
        openSinceMs: toLocal(s || u, now),
      });
    }
    if (stale.length > 0) await this.redis.zrem(index, ...stale);
    return open;
  }

  /** Origins held back, longest held first (also in `openOrigins`, which samples their gauges). */
  async heldOrigins(limit = 1_000): Promise<HeldOrigin[]> {
    const index = heldIndexKey(this.prefix);
    const [now, members] = await Promise.all([this.redisNow(), this.redis.zrange(index, 0, limit - 1)]);
    const states = await Promise.all(
      members.map((member) => {
        const { origin, client } = ofHeldMember(member);
        const key =
          client === undefined
            ? originKeys(this.prefix, origin)[0]
            : (scopeKeys(this.prefix, origin, callerIdOf(client))[2] ?? '');
        return this.redis.hmget(key, 'h', 'hw', 'fc', 'fs', 'u');
      }),
    );
    const held: HeldOrigin[] = [];
    const stale: string[] = [];
    for (const [i, member] of members.entries()) {
      const [h, hw, fc, fs, u] = states[i] ?? [];
      const reason = hw ? HOLD_CODES[hw] : undefined;
      if (!h || !reason) {
        stale.push(member); // ended (or forgotten) without its index entry being removed
        continue;
      }
      const { origin, client } = ofHeldMember(member);
      held.push({
        origin,
        ...(client === undefined ? {} : { client }),
        reason,
        sinceMs: toLocal(Number(h), now),
        failures: Number(fc ?? 0),
        failingSinceMs: fs ? toLocal(Number(fs), now) : undefined,
        nextProbeMs: reason === 'failing' && u ? toLocal(Number(u), now) : undefined,
      });
    }
    if (stale.length > 0) await this.redis.zrem(index, ...stale);
    return held;
  }

  /** The shared state of one origin, or of a caller's own breaker there, read from Redis (admin, tests). */
  async snapshot(origin: string, caller?: string): Promise<BreakerSnapshot> {
    const [stateKey = '', trialsKey = ''] =
      caller === undefined
        ? originKeys(this.prefix, origin)
        : scopeKeys(this.prefix, origin, callerIdOf(caller)).slice(2, 4);
    const now = await this.redisNow();
    const [fields, slots] = await Promise.all([
      this.redis.hgetall(stateKey),
      this.redis.zcount(trialsKey, `(${now}`, '+inf'),
    ]);
    const u = fields.u === undefined ? undefined : Number(fields.u);
    const held = fields.hw === undefined ? undefined : HOLD_CODES[fields.hw];
    const local = (field: string | undefined) =>
      field === undefined ? undefined : toLocal(Number(field), now);
    return {
      state: u === undefined ? 'closed' : now < u ? 'open' : 'half_open',
      failures: fields.f === undefined ? undefined : Number(fields.f),
      opens: Number(fields.n ?? 0),
      openUntilMs: u === undefined ? undefined : toLocal(u, now),
      openSinceMs: local(fields.s),
      slots,
      held,
      heldSinceMs: held ? local(fields.h) : undefined,
      runFailures: Number(fields.fc ?? 0),
      failingSinceMs: local(fields.fs),
    };
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
    // The callers' open and held states listed (a member each); those of forgotten states are
    // repaired when listed.
    for (const index of [heldIndexKey(this.prefix), openCallersIndexKey(this.prefix)]) {
      const listed = await this.redis.zrange(index, 0, MAX_INDEXED);
      const mine = listed.filter((member) => ofHeldMember(member).origin === origin && member !== origin);
      if (mine.length > 0) await this.redis.zrem(index, ...mine);
    }
    // Every caller's cached state of the origin goes too (a key per caller: found by its prefix).
    if (this.cache)
      for (const key of this.cache.keys()) if (originOfCacheKey(key) === origin) this.cache.delete(key);
    return removed > 0;
  }

  /** Forgets the locally cached states (tests, admin after a manual reset). */
  clearCache(): void {
    this.cache?.clear();
  }

  /**
   * A success of a proven origin, admitted without a slot, changes nothing in Redis but a failure
   * count another executor may have started since, and the state's TTL. Written once per
   * stateCacheMs per origin (as long as this executor trusts its cached state anyway), it still
   * resets those, at most stateCacheMs late, and saves a script call per call to a healthy origin.
   */
  private successAlreadyWritten(origin: string, report: CallReport): boolean {
    if (!report.success || report.probe || report.ticket !== undefined || report.optOut) return false;
    const entry = this.cache?.get(origin);
    return (
      entry?.healthy === true &&
      entry.successAt !== undefined &&
      Date.now() - entry.successAt < this.stateCacheMs
    );
  }

  private fromCache(origin: string): Admission | undefined {
    const entry = this.cache?.get(origin);
    if (!entry) return undefined;
    if (entry.healthy) return { admitted: true, probe: false };
    if (Date.now() < entry.retryAtMs) {
      breakerMetrics.rejected.inc({ state: entry.state, source: 'cache', scope: entry.scope });
      const held = entry.held ? { held: entry.held } : {};
      return { admitted: false, retryAtMs: entry.retryAtMs, state: entry.state, scope: entry.scope, ...held };
    }
    this.cache?.delete(origin); // its time has come: ask Redis
    return undefined;
  }

  private remember(origin: string, entry: CacheEntry | undefined): void {
    if (!this.cache) return;
    if (entry) this.cache.set(origin, entry);
    else this.cache.delete(origin);
  }

  private transition(
    origin: string,
    from: BreakerState,
    to: BreakerState,
    scope: BreakerScope,
    caller?: string,
    retryAtMs?: number,
  ): void {
    breakerMetrics.transitions.inc({ from, to, scope });
    const who = scope === 'caller' ? { origin, scope, client: caller } : { origin };
    if (to === 'open')
      this.logger?.warn(
        { ...who, from, retryAt: new Date(retryAtMs ?? 0) },
        scope === 'caller' ? "circuit opened for one caller's calls" : 'circuit opened',
      );
    else this.logger?.info({ ...who, from, to }, 'circuit breaker state changed');
  }

  /** The hold that began or ended with a recorded outcome (logged; the caller journals it). */
  private holdChange(
    origin: string,
    reply: ScopeReply,
    held: HoldReason | undefined,
    caller: string | undefined,
  ): HoldChange | undefined {
    if (reply.holdChange === 0) return undefined;
    const kind = reply.holdChange === 1 ? 'began' : 'ended';
    const change: HoldChange = {
      kind,
      reason: held ?? 'failing',
      sinceMs: toLocal(reply.heldSinceMs, reply.nowMs),
      failures: reply.runFailures,
      failingSinceMs: reply.runSinceMs > 0 ? toLocal(reply.runSinceMs, reply.nowMs) : undefined,
      scope: caller === undefined ? 'origin' : 'caller',
    };
    const fields = {
      origin,
      ...(caller === undefined ? {} : { scope: 'caller', client: caller }),
      reason: change.reason,
      since: new Date(change.sinceMs),
      failures: change.failures,
    };
    if (kind === 'began')
      this.logger?.warn(fields, 'origin held back: its tasks wait for a probe to find it back');
    else this.logger?.info(fields, 'held origin recovered: its tasks resume');
    return change;
  }

  /** Keeps the held-origins index after a hold began or ended (best effort: repaired when listed). */
  private async updateHeldIndex(
    origin: string,
    kind: HoldChange['kind'],
    sinceRedisMs: number,
  ): Promise<void> {
    const index = heldIndexKey(this.prefix);
    try {
      if (kind === 'ended') await this.redis.zrem(index, origin);
      else {
        await this.redis.zadd(index, sinceRedisMs, origin);
        await this.redis.zremrangebyrank(index, MAX_INDEXED, -1);
      }
    } catch (err) {
      this.failedOpen('index', origin, err);
    }
  }

  /** Keeps the open-origins index after a transition (best effort: repaired when listed). */
  private async updateIndex(
    origin: string,
    to: BreakerState,
    untilRedisMs: number,
    index = openIndexKey(this.prefix),
  ): Promise<void> {
    try {
      if (to === 'closed') {
        await this.redis.zrem(index, origin);
        return;
      }
      await this.redis.zadd(index, untilRedisMs, origin);
      await this.redis.zremrangebyrank(index, 0, -(MAX_INDEXED + 1));
    } catch (err) {
      this.failedOpen('index', origin, err);
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

  private async redisNow(): Promise<number> {
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }
}

/** The held index's member of a hold: the origin, or the origin and the client whose breaker it is. */
function heldMember(origin: string, client: string | undefined): string {
  return client === undefined ? origin : `${origin}\n${client}`;
}

function ofHeldMember(member: string): { origin: string; client?: string } {
  const end = member.indexOf('\n');
  return end < 0 ? { origin: member } : { origin: member.slice(0, end), client: member.slice(end + 1) };
}

/** The local cache's key of an origin's state as one caller sees it (the newline is in no origin). */
function cacheKeyOf(origin: string, caller: string | undefined): string {
  return caller === undefined ? origin : `${origin}\n${caller}`;
}

function originOfCacheKey(key: string): string {
  const end = key.indexOf('\n');
  return end < 0 ? key : key.slice(0, end);
}

/** A Redis-time instant on the local clock (the script replied `now` alongside it). */
function toLocal(redisMs: number, redisNowMs: number): number {
  return Date.now() + (redisMs - redisNowMs);
}

/** `origin_failing_origins`, and `origin_failing_seconds` of the longest held (held is sorted by since). */
function sampleHeldGauges(all: readonly HeldOrigin[]): void {
  // A caller's own hold is counted apart: the origin is not held for the others.
  const held = all.filter((h) => h.client === undefined);
  breakerMetrics.callersHeld.set(all.length - held.length);
  breakerMetrics.heldOrigins.set(held.length);
  breakerMetrics.heldSeconds.reset();
  const now = Date.now();
  for (const h of held.slice(0, MAX_ORIGIN_LABELS))
    breakerMetrics.heldSeconds.set(
      { origin: h.origin, reason: h.reason },
      Math.max(0, (now - h.sinceMs) / 1000),
    );
}

function sampleGauges(open: readonly OpenOrigin[]): void {
  breakerMetrics.openOrigins.set(open.length);
  // The deprecated `breaker_open` carries the same values as `breaker_open_seconds` for one release.
  const gauges = [breakerMetrics.openSeconds, breakerMetrics.open];
  for (const g of gauges) g.reset();
  const now = Date.now();
  const longest = [...open].sort((a, b) => a.openSinceMs - b.openSinceMs).slice(0, MAX_ORIGIN_LABELS);
  for (const o of longest)
    for (const g of gauges) g.set({ origin: o.origin }, Math.max(0, (now - o.openSinceMs) / 1000));
}

/**
 * The breaker key of a target: `scheme://host:port` (default ports spelled out, so that
 * `https://a` and `https://a:443` share a breaker). Userinfo, path and query never enter it.
 */
export function originOf(uri: string | URL): string {
  if (typeof uri !== 'string' || uri.length > ORIGIN_CACHE_URI_MAX) return originOfUrl(new URL(uri));
  let origin = origins.get(uri);
  if (origin === undefined) {
    origin = originOfUrl(new URL(uri));
    if (origins.size >= ORIGIN_CACHE_SIZE) origins.clear();
    origins.set(uri, origin);
  }
  return origin;
}

function originOfUrl(url: URL): string {
  const port = url.port || DEFAULT_PORTS[url.protocol] || '';
  return `${url.protocol}//${url.hostname}${port ? `:${port}` : ''}`;
}

/**
 * The origins of the URIs called last: most calls go to a few endpoints, and a URL parse per call
 * (~2 µs) for the same answer was a visible share of an executor's CPU. Bounded in entries and in
 * the length of a URI kept (a longer one is parsed each time).
 */
const origins = new Map<string, string>();
const ORIGIN_CACHE_SIZE = 1_000;
const ORIGIN_CACHE_URI_MAX = 512;

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/**
 * What `countsAsFailure` judges: the shape of an HTTP call's outcome (the executor's `CallOutcome`
 * is one), so that this package needs nothing of the executor's.
 */
export type JudgedOutcome =
  | { kind: 'response'; status: number }
  | { kind: 'failure'; error: { code: string } };

/**
 * The failures a breaker counts (the worker's default judgement): transport errors and timeouts,
 * 5xx, 429 and 408: the target is down, overloaded or too slow. Other answers, 4xx included, show
 * a live target; a refused (SSRF) or oversized call is not the target's fault.
 */
export function countsAsFailure(outcome: JudgedOutcome): boolean {
  if (outcome.kind === 'failure')
    return outcome.error.code === 'timeout' || outcome.error.code === 'transport_error';
  return outcome.status >= 500 || outcome.status === 429 || outcome.status === 408;
}

/** The breaker configured by BREAKER_* (slot leases outlast the longest possible call). */
export function breakerFromConfig(
  config: Pick<
    Config,
    | 'redisPrefix'
    | 'breakerFailureThreshold'
    | 'breakerOpenDuration'
    | 'breakerMaxOpenDuration'
    | 'breakerStateCache'
    | 'originFailingHoldAfter'
    | 'originFailingHoldFailures'
    | 'targetConnectTimeout'
    | 'targetResponseTimeout'
  >,
  redis: RedisClient,
  options: Partial<CircuitBreakerOptions> = {},
): CircuitBreaker {
  return new CircuitBreaker({
    redis,
    prefix: `${config.redisPrefix}:breaker:`,
    failureThreshold: config.breakerFailureThreshold,
    openMs: config.breakerOpenDuration,
    maxOpenMs: config.breakerMaxOpenDuration,
    stateCacheMs: config.breakerStateCache,
    holdAfterMs: config.originFailingHoldAfter,
    holdFailures: config.originFailingHoldFailures,
    trialLeaseMs: longestCallMs(config),
    ...options,
  });
}

/**
 * The longest one call to a target can last (connect, then headers and body each within the
 * response timeout), and a margin: how long a slot held for a call that never reports (breaker
 * trial, cluster bulkhead) stays taken.
 */
export function longestCallMs(
  config: Pick<Config, 'targetConnectTimeout' | 'targetResponseTimeout'>,
): number {
  return config.targetConnectTimeout + 2 * config.targetResponseTimeout + 5_000;
}

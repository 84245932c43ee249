import { createHash } from 'node:crypto';
import {
  type Admission,
  type CallReport,
  type CircuitBreaker,
  type HoldChange,
  type LimitDecision,
  limiterKeyOf,
  limiterWindows,
  type OriginPacer,
  type OriginStatsRecorder,
  originOf,
  type PaceReport,
  type PaceSlot,
  type RateLimiter,
  type RecordOutcome,
  type Reservation,
  signalKind,
} from '@requester/policies';
import {
  attemptsInBudget,
  clientScoped,
  errorResult,
  isWakeUp,
  type LimiterSpec,
  type RequestEnvelope,
  type ResultEnvelope,
  wakeUpResult,
} from '@requester/shared/contract';
import { isDestinationLimiterKey } from '@requester/shared/destinations';
import { RequesterError } from '@requester/shared/errors';
import type { Journal } from '@requester/shared/journal';
import type { LineLogger } from '@requester/shared/log';
import { msToNs } from '@requester/shared/time';
import {
  inSpan,
  type Span,
  SpanKind,
  type SpanOptions,
  SpanStatusCode,
  tracingEnabled,
  untracedTraceparent,
} from '@requester/shared/tracing';
import { type Bulkhead, type Granted, linePartition } from '../bulkhead/index.ts';
import { type ResponseCache, requestIdentity } from '../cache/index.ts';
import type { CallOutcome, HttpCall, HttpClient } from '../http/index.ts';
import { toHttpCall } from '../http/request.ts';
import { executorMetrics as metrics, originLabel, outcomeLabel } from '../metrics.ts';
import { callResult } from '../result/index.ts';
import { SigningKeyring, type SigningKeys, signRequest } from '../signing/index.ts';
import { batched } from './batch.ts';
import {
  addWait,
  breakerFailure,
  breakerStep,
  bulkheadStep,
  CALL,
  capped,
  type DeadLetterReason,
  type GateStep,
  heldProbeStep,
  limiterStep,
  optsOut,
  outcomeStep,
  pacedStep,
  type Step,
  waitCap,
} from './decide.ts';

/**
 * The delivery policies around one attempt (docs/architecture.md §5): response cache, rate limiter, circuit
 * breaker, signing, the call, and the retry decision. The rules live in decide.ts; this module
 * gathers their facts (Redis, the target) and says how the attempt ended. Queue, outbox and Kafka
 * writes are the worker's.
 *
 * Order: **cache → sign → pace → bulkhead → limiter → breaker → HTTP → record**.
 * - The cache comes first, unlike the founding design's "limiter → cache → HTTP": a hit does not reach the
 *   target, so it must not spend the target's quota nor wait for its breaker, and the limiter and
 *   breaker run inside the cache fill, so N concurrent misses of one key cost one token and one
 *   call (the limiter protects the target's quota; requests the cache answers never touch it).
 * - Signing before the gate: an unknown key id fails before it spends a token or a breaker slot.
 *   The few ms to the call leave `webhook-timestamp` well inside any receiver's tolerance.
 * - The bulkhead (calls in flight per origin) first in the gate: a task refused by a full origin
 *   comes back within a few hundred ms, again and again while the origin hangs; after the limiter
 *   each of those polls would spend a token. Its slot is held from there to the end of the call
 *   (the limiter and breaker round trip included) and freed whatever happens.
 * - The pace (OriginPacer: what the target asked for, shared in Redis) before the bulkhead: a
 *   dispatch slot a few ms ahead is slept for in the worker, holding none of the origin's
 *   concurrency; a later one is reserved and the task goes back to the queue until then (not an
 *   attempt). The limiter's token is taken after that sleep, close to when the call leaves, as
 *   the target counts it. A bulkhead refusal after the pace wastes the slot: the pace is a bound.
 * - Limiter before breaker: a breaker admission may hold a half-open probe or a trial slot, which
 *   only `record` gives back, so nothing may refuse the call after it. The price: a task refused
 *   by an open breaker has spent a token (the rate stays a bound, never exceeded), except for a
 *   sliding log, whose two-phase slot is given back.
 * - The limit holds where the target counts it (docs/architecture.md §9): a sliding-log take is
 *   two-phase. The slot is taken pending, counted as if sent at the latest instant allowed (the
 *   dispatch budget), and settled with the instant the request was handed to the socket (the
 *   http client's `sent` hook), so the window is counted by send time whatever the gap between
 *   the decision and the send (the breaker's round trip, a connection, an executor under load).
 *   A call that reaches the breaker more than LATEST_START_MS after its take is not made: its
 *   slot is given back and the task takes a fresh one.
 */

/** What the policies need; each is optional (a request asking for a missing one is refused). */
export interface PolicyModules {
  http: HttpClient;
  limiter?: RateLimiter | undefined;
  breaker?: CircuitBreaker | undefined;
  /** Caps the calls in flight per origin (MAX_WORKERS_PER_ORIGIN); absent = no cap. */
  bulkhead?: Bulkhead | undefined;
  /**
   * ORIGIN_OPT_OUT: an answer carrying `webhook-delivery: disable` holds its origin back (the
   * breaker's opt-out hold) until an operator resets it. Default false: the header is ignored.
   */
  optOut?: boolean | undefined;
  /** The pace of each origin (429/503 + Retry-After, RateLimit headers, adaptive concurrency); absent = none. */
  pacer?: OriginPacer | undefined;
  /** Calls per origin across the deployment (the Origins page), counted in memory and flushed; absent = none. */
  originStats?: OriginStatsRecorder | undefined;
  /** ADAPTIVE_CONCURRENCY: the bulkhead applies the pacer's learnt limit of each origin (default true). */
  adaptiveConcurrency?: boolean | undefined;
  cache?: ResponseCache<Tried> | undefined;
  /** Where signing keys are found: the credential store, then SIGNING_KEYS (the role's wiring). */
  signing?: SigningKeyring | undefined;
  /** Signing keys alone, without the store (tests; deprecated SIGNING_KEYS); used when `signing` is absent. */
  signingKeys?: SigningKeys | undefined;
  /** Longest Retry-After honoured (RETRY_AFTER_MAX). */
  retryAfterMaxMs: number;
  /** REDIS_HORIZON: the longest wait of a task marked `withinHorizon` (see waitCap); absent = no cap. */
  horizonMs?: number | undefined;
  /** The jitter's dice (tests pin it). Default Math.random. */
  random?: () => number;
  /** The task journal (held, attempt, cache steps); absent = none. */
  journal?: Journal | undefined;
  /**
   * LIMITER_DISPATCH_BUDGET: the latest a call leaves after its limiter decision (ms): a
   * sliding-log slot is counted pending until then, unless settled earlier. Default 20 s; 0 =
   * one-phase, counted at the decision.
   */
  limiterDispatchBudgetMs?: number | undefined;
  /**
   * LIMITER_ARRIVAL_MARGIN: how much later than its send a sliding-log slot is counted (ms), for the
   * variation of the transit to a target that counts by arrival. Default 50 ms; 0 = at the send.
   */
  limiterArrivalMarginMs?: number | undefined;
  /**
   * Limiter keys the operator declared one quota for every caller (SHARED_LIMITER_KEYS); any
   * other `meta.limiter.key` is its client's own (`limiterKeyOf`). Default none.
   */
  sharedLimiterKeys?: ReadonlySet<string> | undefined;
}

/** Where a task stands: attempts already made and time already waited (limiter, breaker). */
export interface Progress {
  tryCount: number;
  waitedMs: number;
  /** The dispatch slot its origin's pacer reserved for the task when it sent it back (Redis epoch ms). */
  pacedAt?: number | undefined;
}

/** How an attempt ended. */
export type Ending =
  /** Final. `deadLetter`: the request failed for good, a DLQ record goes beside the result. */
  | { kind: 'result'; result: ResultEnvelope; label: string; deadLetter?: DeadLetterReason | undefined }
  /** Try again in `delayMs`, with the progress the task then carries. */
  | { kind: 'reschedule'; delayMs: number; reason: string; progress: Progress };

/** A call the gate stopped before it reached the target (shaped for the cache: a failure, never stored). */
interface Stopped {
  kind: 'failure';
  stop: Exclude<GateStep, { kind: 'call' }>;
}

/** What one attempt inside the cache yields: the target's outcome, or a stop before the call. */
export type Tried = CallOutcome | Stopped;

type OriginReport = CallReport & { origin: string };
/** `slot`: the bulkhead's grant (calls in flight, the last slot taken); undefined: no bulkhead. */

const HELD_BY = {
  rate_limited: 'limiter',
  circuit_open: 'breaker',
  breaker_busy: 'breaker',
  bulkhead: 'bulkhead',
  paced: 'pacing',
  origin_held: 'hold',
} as const;

const NONE_SHARED: ReadonlySet<string> = new Set();

/** Errors of the request itself, thrown before the call: an error result, never retried. */
const PERMANENT: ReadonlySet<string> = new Set([
  'invalid_request',
  'invalid_config',
  'credential_revoked',
  'credential_origin_refused',
]);

/** A Redis hiccup of the gate: come back soon; neither an attempt nor a wait. */
const GATE_UNAVAILABLE_RETRY_MS = 1_000;

/**
 * The longest from a two-phase limiter take to the breaker's admission, the last step before the
 * call (a stalled event loop, a slow Redis reply): later, the call is not made and its slot is
 * given back.
 */
export const LATEST_START_MS = 5_000;

/**
 * LIMITER_DISPATCH_BUDGET's default: the latest start, then DNS lookup, TCP connect and TLS
 * handshake each bounded by TARGET_CONNECT_TIMEOUT (5 s). A call of a credential that first
 * fetches an OAuth2 token can leave later: it is then counted from its real send all the same,
 * and `limiter_late_dispatch_total` counts it (decisions made meanwhile did not see it).
 */
const DEFAULT_DISPATCH_BUDGET_MS = 20_000;

/** LIMITER_ARRIVAL_MARGIN's default. */
const DEFAULT_ARRIVAL_MARGIN_MS = 50;

/** The limiter's answer to one task: go (with the two-phase slot to settle, if any) or stop. */
interface Limited {
  step: GateStep;
  reservation?: Reservation | undefined;
}

export class Policies {
  private readonly modules: PolicyModules;
  private readonly signing: SigningKeyring;
  private readonly random: () => number;
  private readonly take: ((spec: LimiterSpec) => Promise<LimitDecision>) | undefined;
  private readonly admit: ((call: { origin: string; caller: string }) => Promise<Admission>) | undefined;
  private readonly record: ((report: OriginReport) => Promise<RecordOutcome>) | undefined;

  constructor(modules: PolicyModules) {
    this.modules = modules;
    this.signing = modules.signing ?? new SigningKeyring({ legacy: modules.signingKeys });
    this.random = modules.random ?? Math.random;
    // The tasks of a lease batch reach each of these together: one round trip per batch.
    const { limiter, breaker } = modules;
    const dispatchWithinMs = modules.limiterDispatchBudgetMs ?? DEFAULT_DISPATCH_BUDGET_MS;
    this.take =
      limiter &&
      batched((specs: LimiterSpec[]) =>
        limiter.takeMany(specs.map((spec) => ({ spec, cost: spec.cost ?? 1, dispatchWithinMs }))),
      );
    this.admit =
      breaker && batched((calls: Array<{ origin: string; caller: string }>) => breaker.admitMany(calls));
    this.record = breaker && batched((reports: OriginReport[]) => breaker.recordMany(reports));
  }

  /**
   * One attempt of `envelope`, `progress` being where the task stood when leased; `handed`: a slot
   * of its origin's bulkhead handed to it while it waited parked (see waitForSlot), used instead
   * of asking the bulkhead (released here when the call ends; its caller releases it whatever
   * happens, a second release doing nothing). What the request
   * itself gets wrong (an unknown signing key, a bad limiter window) ends in an error result; a
   * policy store that is down, in a reschedule; only bugs throw.
   */
  async attempt(
    envelope: RequestEnvelope,
    progress: Progress,
    log: LineLogger,
    handed?: Granted,
  ): Promise<Ending> {
    const tryCount = progress.tryCount + 1;
    const answer = { tryCount, waitTimeNs: msToNs(progress.waitedMs) };
    try {
      if (isWakeUp(envelope)) return await this.wakeUp(envelope, answer);
      // Without the cache, the attempt's own promise: no closure and `then` of their own per call.
      const fetched =
        this.modules.cache && envelope.meta.cache
          ? await this.fetch(envelope, tryCount, progress.pacedAt, log, handed)
          : {
              cached: false as const,
              outcome: await this.gateAndCall(envelope, tryCount, progress.pacedAt, log, handed),
              shared: false,
            };
      if (fetched.cached || fetched.shared) this.journalCache(envelope, fetched.cached ? 'hit' : 'coalesced');
      if (fetched.cached) {
        const result = callResult(envelope, fetched.outcome, { ...answer, cached: true });
        return { kind: 'result', result, label: 'cached' };
      }
      const tried = fetched.outcome;
      if ('stop' in tried) return this.stopped(envelope, progress, tried.stop);
      const step = outcomeStep({
        outcome: tried,
        retry: envelope.meta.retry,
        attempts: attemptsInBudget(envelope, tryCount),
        nowMs: Date.now(),
        random: this.random(),
        retryAfterMaxMs: this.modules.retryAfterMaxMs,
        maxWaitMs: waitCap(envelope, this.modules.horizonMs),
      });
      if (step.kind === 'retry') {
        log.info({ tryCount, delayMs: step.delayMs, reason: step.reason }, 'attempt failed; retrying later');
        return {
          kind: 'reschedule',
          delayMs: step.delayMs,
          reason: 'retry',
          progress: { ...progress, tryCount, pacedAt: undefined },
        };
      }
      const result = callResult(envelope, tried, { ...answer, coalesced: fetched.shared });
      return { kind: 'result', result, label: outcomeLabel(tried), deadLetter: deadLetterOf(step) };
    } catch (err) {
      if (!(err instanceof RequesterError)) throw err;
      if (err.code === 'dependency_unavailable') {
        log.warn({ err }, 'a policy store is unavailable; the task will be tried again');
        return {
          kind: 'reschedule',
          delayMs: GATE_UNAVAILABLE_RETRY_MS,
          reason: 'policy_unavailable',
          progress: { ...progress, pacedAt: undefined },
        };
      }
      if (!PERMANENT.has(err.code)) throw err;
      // e.g. an unknown or revoked signing key id, a limiter window under 1 ms: no retry can fix the request.
      log.warn({ err }, 'request refused by a delivery policy');
      const result = errorResult(envelope.meta.requestId, err.code, err.message, {
        ...answer,
        tryCount: progress.tryCount,
        proxyData: envelope.meta.proxyData,
      });
      return { kind: 'result', result, label: err.code, deadLetter: 'permanent' };
    }
  }

  /**
   * The attempt through the response cache when the request asks for it (and this executor has
   * one). Requests that share a fill share its outcome, a gate's stop included: they are the same
   * request of the same client (key and identity), so they would all have been stopped alike.
   */
  private fetch(
    envelope: RequestEnvelope,
    tryCount: number,
    pacedAt: number | undefined,
    log: LineLogger,
    handed: Granted | undefined,
  ) {
    const attempt = () => this.gateAndCall(envelope, tryCount, pacedAt, log, handed);
    const { cache } = this.modules;
    const { cache: spec, client } = envelope.meta;
    if (cache && spec) {
      // The client's own entry, answering only this very request (docs/architecture.md §10).
      const lookup = {
        key: clientScoped(client, spec.key),
        ttl: spec.ttl,
        request: requestIdentity({ ...envelope.request, credentials: envelope.meta.credentials }),
      };
      return cache.fetchThrough(lookup, attempt);
    }
    return attempt().then((outcome) => ({ cached: false as const, outcome, shared: false }));
  }

  private async gateAndCall(
    envelope: RequestEnvelope,
    tryCount: number,
    pacedAt: number | undefined,
    log: LineLogger,
    handed: Granted | undefined,
  ): Promise<Tried> {
    // Unsigned, the call is made here and now: no promise and await per call for it.
    const call = envelope.meta.signing ? await this.prepare(envelope) : toHttpCall(envelope);
    const origin = originOf(envelope.request.uri);
    const identity = paceIdentity(envelope);
    // The pace first: a worker asleep until its slot holds none of the origin's concurrency.
    // The pacer batches its own round trips (see OriginPacer): a gate of an origin known free is
    // none, and the answers of one origin go in one report.
    const { pacer, adaptiveConcurrency = true } = this.modules;
    if (pacer) {
      const held = await this.paced(pacer, origin, pacedAt, identity);
      if (held) return { kind: 'failure', stop: held };
    }
    const learnt = adaptiveConcurrency ? pacer?.limitOf(origin, identity) : undefined;
    const grant =
      handed ??
      (this.modules.bulkhead &&
        (await this.modules.bulkhead.acquire(
          origin,
          learnt,
          envelope.meta.client,
          true,
          linePartition(envelope.meta),
        )));
    const full = grant ? bulkheadStep(grant) : CALL;
    if (full.kind !== 'call') return { kind: 'failure', stop: full };
    // Whether the limit held calls back tells the pacer if a latency is a queue of ours.
    const slot = grant?.granted ? { inFlight: grant.inFlight, full: grant.full } : undefined;
    // Given back as soon as the answer is in, not after the report and record round trips: held
    // through them, a slot leaves the target idle that long per call, and a limit at its capacity
    // C keeps fewer than C calls there.
    let released = false;
    const release = () => {
      if (released || !grant?.granted) return;
      released = true;
      grant.release();
    };
    try {
      return await this.limitAndCall(envelope, call, { origin, identity }, slot, tryCount, log, release);
    } finally {
      release();
    }
  }

  /**
   * The pace's gate, and the sleep until the slot it gives: undefined when the call may leave, else
   * the step that holds it back. A call woken well past its slot (a stalled process wakes all its
   * sleepers at once, and they would reach the target together, inside one window of a partner
   * that counts by arrival) asks the gate once more for a slot of now, instead of leaving late.
   */
  private async paced(
    pacer: OriginPacer,
    origin: string,
    pacedAt: number | undefined,
    identity: string | undefined,
  ): Promise<Exclude<GateStep, { kind: 'call' }> | undefined> {
    for (let gates = 1; ; gates++) {
      const askedAt = performance.now();
      const paced = await pacer.gate(origin, gates === 1 ? pacedAt : undefined, identity);
      const held = pacedStep(paced);
      if (held.kind !== 'call') return held;
      if (!paced.admitted || paced.waitMs <= 0) return undefined;
      const admittedAt = Date.now();
      await sleep(paced.waitMs);
      // A 429 answered here while it slept holds the origin: its slot went with the hold (the gate
      // asked now would say so), and it would arrive inside it. Back to the gate at the hold's end.
      const heldMs = pacer.heldForMs(origin, admittedAt, Date.now(), identity);
      if (heldMs > 0) return { kind: 'wait', delayMs: heldMs, reason: 'paced' };
      const lateMs = performance.now() - askedAt - paced.waitMs;
      if (gates > 1 || lateMs <= pacer.lateToleranceMs(origin, identity)) return undefined;
      pacer.countLate();
    }
  }

  private async limitAndCall(
    envelope: RequestEnvelope,
    call: HttpCall,
    { origin, identity }: { origin: string; identity: string | undefined },
    slot: PaceSlot | undefined,
    tryCount: number,
    log: LineLogger,
    answered: () => void,
  ): Promise<Tried> {
    const { step: limited, reservation } = await this.limit(envelope);
    if (limited.kind !== 'call') return { kind: 'failure', stop: limited };
    // Checked before the breaker's admission, which nothing may refuse after (its slot is only
    // given back by `record`); the budget leaves room for that round trip and the connection.
    if (reservation && performance.now() - reservation.issuedAt > LATEST_START_MS) {
      // Too late to stay within the dispatch budget: not sent, the slot goes back, a fresh take.
      await this.settle(reservation, undefined, log);
      return { kind: 'failure', stop: { kind: 'wait', delayMs: 1, reason: 'rate_limited' } };
    }
    // The caller is the client: its failures open its own breaker at the origin, and the origin's
    // only once other clients fail too (docs/architecture.md §9, "whose trouble").
    const caller = envelope.meta.client ?? '';
    const admission =
      this.admit && (await this.admit({ origin, caller }).catch(this.giveBack(reservation, log)));
    const opened = admission ? breakerStep(admission, Date.now()) : CALL;
    if (opened.kind !== 'call') {
      await this.settle(reservation, undefined, log);
      return { kind: 'failure', stop: opened };
    }

    // Settled once the request is on the socket, not after the answer: other executors' takes
    // then count it by its send time as soon as possible (a pending slot counts until its budget).
    let settled: Promise<void> | undefined;
    const sent = () => {
      if (reservation && !settled) settled = this.settle(reservation, performance.now(), log);
    };
    const { traceparent } = envelope.meta;
    const outcome = tracingEnabled()
      ? await inSpan(call.method, traceparent, clientSpanOptions(call), (span) =>
          this.modules.http
            .call(withTraceparent(call, spanTraceparent(span, traceparent)), undefined, { sent })
            .then((outcome) => {
              endClientSpan(span, outcome);
              return outcome;
            }),
        )
      : // No span nobody would record: its contexts and closures cost every call.
        await this.modules.http.call(withTraceparent(call, untracedTraceparent(traceparent)), undefined, {
          sent,
        });
    // The probe of a held origin: its failure is no attempt of the request (see heldProbeStep).
    const heldProbe =
      admission?.admitted === true &&
      (admission.probe || admission.callerProbe === true) &&
      admission.held !== undefined;
    answered();
    // Never handed whole to the socket: part of it may have left, so it counts as sent now.
    sent();
    this.journalAttempt(envelope, tryCount, outcome, heldProbe);
    const label = outcomeLabel(outcome);
    const seconds = outcome.durationNs / 1e9;
    const originName = originLabel.of(origin);
    metrics.httpSeconds.observe({ outcome: label }, seconds);
    metrics.originSeconds.observe({ origin: originName }, seconds);
    metrics.originCalls.inc({ origin: originName, outcome: label });
    this.modules.originStats?.observe(
      origin,
      outcome.kind === 'response' && outcome.status < 500 && outcome.status !== 429,
      outcome.durationNs / 1e6,
    );
    if (outcome.kind === 'failure') log.warn({ err: outcome.error, tryCount }, 'call to the target failed');
    else log.debug({ status: outcome.status, tryCount }, 'target answered');
    const failed = breakerFailure(outcome);
    const optOut = this.modules.optOut === true && optsOut(outcome);
    const reported = this.modules.pacer?.report(origin, outcome, outcome.durationNs, slot, identity);
    const [, recorded] = await Promise.all([
      settled,
      this.record && admission?.admitted
        ? this.record({ origin, ...admission, success: !failed, optOut })
        : undefined,
      // Only a slow-down or an overload can be journalled as throttling, and only it is reported
      // at once: any other answer goes with its origin's next batch, not waited for.
      reported && signalKind(outcome, Date.now()) !== 'ok'
        ? reported.then((report) => this.journalThrottled(envelope, report))
        : undefined,
    ]);
    if (recorded?.change) this.journalHold(envelope, origin, recorded.change);
    if (heldProbe && failed && recorded?.held && recorded.retryAtMs !== undefined) {
      log.info({ origin }, 'the probe of a held origin failed: the task waits for the next one');
      return { kind: 'failure', stop: heldProbeStep(recorded.retryAtMs, Date.now()) };
    }
    return outcome;
  }

  /**
   * A slot of the origin of `uri`, waited for without a worker by a task the bulkhead refused (see
   * Bulkhead.waitForSlot); undefined once `signal` aborts, or without a bulkhead.
   */
  waitForSlot(
    uri: string,
    client: string | undefined,
    signal: AbortSignal,
    partition?: string,
  ): Promise<Granted | undefined> {
    const { bulkhead, pacer, adaptiveConcurrency = true } = this.modules;
    if (!bulkhead) return Promise.resolve(undefined);
    const origin = originOf(uri);
    const limit = adaptiveConcurrency && pacer ? () => pacer.limitOf(origin) : undefined;
    return bulkhead.waitForSlot(origin, limit, client, signal, partition);
  }

  /** The request whose answer held its origin back, or whose probe found it back, tells so in its story. */
  private journalHold(envelope: RequestEnvelope, origin: string, change: HoldChange): void {
    const { requestId, client } = envelope.meta;
    const since = Math.round(change.sinceMs);
    if (change.kind === 'ended') {
      this.modules.journal?.emit({
        type: 'origin_recovered',
        requestId,
        client,
        origin,
        since,
        failures: change.failures,
        ...(change.scope === 'caller' ? { scope: 'caller' as const } : {}),
      });
      return;
    }
    this.modules.journal?.emit({
      type: 'origin_failing',
      requestId,
      client,
      origin,
      reason: change.reason,
      since,
      failures: change.failures,
      ...(change.failingSinceMs === undefined ? {} : { failingSince: Math.round(change.failingSinceMs) }),
      ...(change.scope === 'caller' ? { scope: 'caller' as const } : {}),
    });
  }

  /** The request whose answer lowered its origin's pace or limit: the journal says so in its story. */
  private journalThrottled(envelope: RequestEnvelope, report: PaceReport | undefined): void {
    if (!report?.throttled || report.kind === 'ok') return;
    const { requestId, client } = envelope.meta;
    this.modules.journal?.emit({
      type: 'throttled',
      requestId,
      client,
      signal: report.kind,
      limit: Math.max(1, Math.floor(report.limit)),
      ...(report.rate ? { rate: report.rate } : {}),
      holdMs: report.holdMs,
    });
  }

  private journalAttempt(envelope: RequestEnvelope, n: number, outcome: CallOutcome, probe: boolean): void {
    const { requestId, client } = envelope.meta;
    const durationMs = Math.round(outcome.durationNs / 1e4) / 100;
    const answer = outcome.kind === 'response' ? { status: outcome.status } : { error: outcome.error.code };
    const held = probe ? { probe: true as const } : {};
    this.modules.journal?.emit({ type: 'attempt', requestId, client, n, durationMs, ...answer, ...held });
  }

  private journalCache(envelope: RequestEnvelope, outcome: 'hit' | 'coalesced'): void {
    const { requestId, client } = envelope.meta;
    this.modules.journal?.emit({ type: 'cache', requestId, client, outcome });
  }

  /** The outgoing call, signed when the request asks (per attempt: a fresh `webhook-timestamp`). */
  private async prepare(envelope: RequestEnvelope): Promise<HttpCall> {
    const call = toHttpCall(envelope);
    const signing = envelope.meta.signing;
    if (!signing) return call;
    const keys = await this.signing.keys(signing.keyId, call);
    const { requestId, client } = envelope.meta;
    return signRequest(call, { keyId: signing.keyId, requestId, client }, keys);
  }

  /** A wake-up calls nobody, but the signing key it names must exist, as for a call. */
  private async wakeUp(
    envelope: RequestEnvelope,
    answer: { tryCount: number; waitTimeNs: number },
  ): Promise<Ending> {
    const signing = envelope.meta.signing;
    if (signing) await this.signing.keys(signing.keyId);
    return { kind: 'result', result: wakeUpResult(envelope, answer), label: 'wake_up' };
  }

  private async limit(envelope: RequestEnvelope): Promise<Limited> {
    const { limiter: spec, client } = envelope.meta;
    if (!spec) return { step: CALL };
    if (!this.take) throw new RequesterError('invalid_config', 'this executor has no rate limiter');
    limiterWindows(spec); // a bad spec fails this request alone, not the batch it would share a takeMany with
    // A destination's quota is one for every caller of it (its key is one no caller can write).
    const key = isDestinationLimiterKey(spec.key)
      ? spec.key
      : limiterKeyOf(client, spec.key, this.modules.sharedLimiterKeys ?? NONE_SHARED);
    const decision = await this.take({ ...spec, key });
    return { step: limiterStep(decision), reservation: decision.reservation };
  }

  /**
   * Settles a two-phase limiter slot: `sentAt` the `performance.now()` of the send, undefined when
   * the call was not made (the slot goes back). A failure leaves the slot pending, counted until
   * its dispatch budget is over: more waiting for later takes, never a call too many.
   */
  private async settle(reservation: Reservation | undefined, sentAt: number | undefined, log: LineLogger) {
    if (!reservation || !this.modules.limiter) return;
    try {
      const marginMs = this.modules.limiterArrivalMarginMs ?? DEFAULT_ARRIVAL_MARGIN_MS;
      const { late } = await this.modules.limiter.settle(reservation, sentAt, marginMs);
      if (late)
        log.warn({ budgetMs: reservation.budgetMs }, 'the call left after its limiter dispatch budget');
    } catch (err) {
      log.warn({ err }, 'could not settle a limiter slot; it stays counted until its dispatch budget');
    }
  }

  /** On a failure before the call: give the two-phase slot back, then fail as before. */
  private giveBack(reservation: Reservation | undefined, log: LineLogger) {
    return async (err: unknown): Promise<never> => {
      await this.settle(reservation, undefined, log);
      throw err;
    };
  }

  /** A gate stop: a wait adds to the task's waitTime; an oversized take is a permanent error. */
  private stopped(envelope: RequestEnvelope, progress: Progress, stop: Stopped['stop']): Ending {
    if (stop.kind === 'wait') {
      const { requestId, client } = envelope.meta;
      // Past the cap the task comes back earlier and asks the gate again.
      const delayMs = capped(stop.delayMs, waitCap(envelope, this.modules.horizonMs));
      // A bulkhead wait may be parked in the executor: its event says how long once that is known.
      if (stop.reason !== 'bulkhead')
        this.modules.journal?.emit({
          type: 'held',
          requestId,
          client,
          by: HELD_BY[stop.reason],
          until: Date.now() + delayMs,
        });
      const waitedMs = addWait(progress.waitedMs, delayMs);
      // Only a pacing wait reserves a slot (not beyond the pacer's booking horizon: slotMs 0); any
      // other wait leaves the task to take a new one.
      const pacedAt =
        stop.reason === 'paced' && delayMs === stop.delayMs && stop.slotMs ? stop.slotMs : undefined;
      return {
        kind: 'reschedule',
        delayMs,
        reason: stop.reason,
        progress: { ...progress, waitedMs, pacedAt },
      };
    }
    const message = 'the limiter can never admit this request: its cost exceeds a window';
    const result = errorResult(envelope.meta.requestId, 'invalid_request', message, {
      tryCount: progress.tryCount,
      waitTimeNs: msToNs(progress.waitedMs),
      proxyData: envelope.meta.proxyData,
    });
    return { kind: 'result', result, label: 'limiter_oversized', deadLetter: deadLetterOf(stop) };
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The credential identity a call's pace is kept for (docs/architecture.md §9, "whose trouble"): the
 * named credential (`c:<name>`), else a hash of the caller's own `Authorization` (`a:<hash>`;
 * the secret itself never reaches a Redis key, a log or a metric), else none: the origin's pace.
 * Targets count quotas per credential, so one credential's 429 holds its own calls.
 */
export function paceIdentity(envelope: RequestEnvelope): string | undefined {
  const named = envelope.meta.credentials;
  if (named) return `c:${named}`;
  const headers = envelope.request.headers;
  if (!headers) return undefined;
  for (const name in headers)
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      const value = headers[name];
      if (value) return `a:${createHash('sha256').update(value, 'utf8').digest('base64url').slice(0, 22)}`;
    }
  return undefined;
}

function deadLetterOf(step: Step): DeadLetterReason | undefined {
  return step.kind === 'deliver' ? step.deadLetter : undefined;
}

/**
 * The CLIENT span of a call to the target (HTTP semantic conventions). The URL loses its userinfo
 * and its query values: a collector is no place for the credentials they may hold.
 */
function clientSpanOptions(call: HttpCall): SpanOptions {
  const url = new URL(call.uri);
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  url.username = '';
  url.password = '';
  for (const key of new Set(url.searchParams.keys())) url.searchParams.set(key, 'REDACTED');
  return {
    kind: SpanKind.CLIENT,
    attributes: {
      'http.request.method': call.method,
      'url.full': url.toString(),
      'server.address': url.hostname,
      'server.port': port,
    },
  };
}

/** A response of 4xx/5xx, or no response, is an error of the CLIENT span. */
function endClientSpan(span: Span, outcome: CallOutcome): void {
  if (outcome.kind === 'response') {
    span.setAttribute('http.response.status_code', outcome.status);
    if (outcome.status >= 400) {
      span.setAttribute('error.type', String(outcome.status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    return;
  }
  span.setAttribute('error.type', outcome.error.code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error.message });
}

/**
 * The call with the W3C `traceparent` of this attempt, so the target continues the task's trace:
 * its span's context when tracing is on, else the request's `meta.traceparent` (normalised when it
 * parses). A `traceparent` header the caller set is kept.
 */
function withTraceparent(call: HttpCall, traceparent: string | undefined): HttpCall {
  if (!traceparent) return call;
  for (const name in call.headers) if (name.toLowerCase() === 'traceparent') return call;
  return { ...call, headers: { ...call.headers, traceparent } };
}

/** The traceparent of `span`, or `fallback` when it has no trace (a no-op span without a parent). */
function spanTraceparent(span: Span, fallback: string | undefined): string | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return /^0+$/.test(traceId)
    ? fallback
    : `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, '0')}`;
}

import type { Config } from '@requester/shared/config';
import { ConfigError } from '@requester/shared/errors';
import type { Logger } from '@requester/shared/log';
import { counter, gauge, type Sampler, startSampler } from '@requester/shared/metrics';

/**
 * Router backpressure (docs/architecture.md §5): when the Redis queue is deep, or a target origin's circuit
 * breaker stays open long, the router pauses consuming `in` — Kafka keeps the backlog — instead of
 * flooding Redis with tasks the executors cannot run yet. Two rules, each its own pause reason:
 *
 * - `queue_depth`: pending tasks ≥ the high watermark pauses; ≤ the low watermark resumes (the gap
 *   keeps the router from flapping around one threshold).
 * - `breaker_open`: some origin has been open (or half-open) for at least `breakerPauseAfterMs`
 *   pauses; resumes when no origin has. An origin's open run starts at its first open and lasts
 *   through failed probes, so this needs no hysteresis of its own.
 *
 * `in` is paused while any reason holds. Both are sampled on a timer, never per batch: depth is one
 * ZCARD per shard (pipelined), the open origins one small listing.
 */

export type PauseReason = 'queue_depth' | 'breaker_open';

export interface OpenOriginInfo {
  origin: string;
  /** Local epoch ms when its current run of opens began. */
  openSinceMs: number;
}

export interface BackpressureRules {
  /** Pending tasks that pause; 0 = the depth rule is off. */
  highWatermark: number;
  /** Pending tasks at or below which a depth pause ends (< highWatermark). */
  lowWatermark: number;
  /** An origin open this long pauses; 0 = the breaker rule is off. */
  breakerPauseAfterMs: number;
  /** Time between samples. */
  intervalMs: number;
}

export interface BackpressureOptions extends BackpressureRules {
  /** Pending tasks in the queue now (FairQueue.pendingDepth). */
  depth: () => Promise<number>;
  /** Origins whose breaker is open or half-open (CircuitBreaker.openOrigins). */
  openOrigins?: () => Promise<readonly OpenOriginInfo[]>;
  /** Called on every sample while paused (idempotent), and once when the pause ends. */
  pause(): void;
  resume(): void;
  logger: Logger;
}

const REASONS: readonly PauseReason[] = ['queue_depth', 'breaker_open'];
const pausedGauge = gauge('router_paused', 'router not consuming in (1), by backpressure reason', ['reason']);
const pauses = counter('router_pauses_total', 'times a router paused consuming in, by reason', ['reason']);
/** How many long-open origins a pause log names. */
const LOGGED_ORIGINS = 5;

export class Backpressure {
  private readonly options: BackpressureOptions;
  private readonly log: Logger;
  private readonly reasons = new Set<PauseReason>();
  private readonly failing = new Set<string>();
  private sampler: Sampler | undefined;

  constructor(options: BackpressureOptions) {
    if (options.highWatermark > 0 && options.lowWatermark >= options.highWatermark)
      throw new RangeError('lowWatermark must be below highWatermark');
    this.options = options;
    this.log = options.logger.child({ component: 'backpressure' });
    for (const reason of REASONS) pausedGauge.set({ reason }, 0);
  }

  /** Whether any rule is switched on (an all-off Backpressure need not run). */
  get enabled(): boolean {
    const { highWatermark, breakerPauseAfterMs, openOrigins } = this.options;
    return highWatermark > 0 || (breakerPauseAfterMs > 0 && openOrigins !== undefined);
  }

  get paused(): boolean {
    return this.reasons.size > 0;
  }

  get pauseReasons(): PauseReason[] {
    return REASONS.filter((reason) => this.reasons.has(reason));
  }

  /** Samples now, then every intervalMs (a sample never overlaps the previous one). */
  start(): void {
    if (!this.enabled || this.sampler) return;
    this.sampler = startSampler('backpressure', this.options.intervalMs, () => this.sample(), this.log);
  }

  async stop(): Promise<void> {
    await this.sampler?.stop();
  }

  /** One round of both rules (a rule that is off, or whose read failed, keeps its state). Never throws. */
  async sample(): Promise<void> {
    const [depth, longOpen] = await Promise.all([this.sampleDepth(), this.sampleOrigins()]);
    if (depth !== undefined) this.applyDepth(depth);
    if (longOpen !== undefined) this.applyOrigins(longOpen);
    // Re-applied each round: a consumer may forget a pause when it restarts after a crash (kafkajs does).
    if (this.paused) this.call('pause', () => this.options.pause());
  }

  private applyDepth(depth: number): void {
    const { highWatermark, lowWatermark } = this.options;
    if (depth >= highWatermark) this.set('queue_depth', true, { depth, highWatermark });
    else if (depth <= lowWatermark) this.set('queue_depth', false, { depth, lowWatermark });
  }

  private applyOrigins(longOpen: readonly OpenOriginInfo[]): void {
    const now = Date.now();
    const origins = longOpen.slice(0, LOGGED_ORIGINS).map((o) => ({
      origin: o.origin,
      openForMs: now - o.openSinceMs,
    }));
    this.set('breaker_open', longOpen.length > 0, { origins, count: longOpen.length });
  }

  private set(reason: PauseReason, on: boolean, facts: Record<string, unknown>): void {
    if (on === this.reasons.has(reason)) return;
    const wasPaused = this.paused;
    if (on) this.reasons.add(reason);
    else this.reasons.delete(reason);
    pausedGauge.set({ reason }, on ? 1 : 0);
    if (on) {
      pauses.inc({ reason });
      this.log.warn({ reason, ...facts }, 'backpressure: pausing consumption of in');
    } else {
      this.log.info({ reason, ...facts, stillPausedBy: this.pauseReasons }, 'backpressure: reason cleared');
    }
    if (wasPaused && !this.paused) this.call('resume', () => this.options.resume());
  }

  private async sampleDepth(): Promise<number | undefined> {
    if (this.options.highWatermark <= 0) return undefined; // rule off
    return this.guard('depth', () => this.options.depth());
  }

  private async sampleOrigins(): Promise<OpenOriginInfo[] | undefined> {
    const { breakerPauseAfterMs, openOrigins } = this.options;
    if (breakerPauseAfterMs <= 0 || !openOrigins) return undefined; // rule off
    const open = await this.guard('open origins', openOrigins);
    if (open === undefined) return undefined;
    const cutoff = Date.now() - breakerPauseAfterMs;
    return open.filter((o) => o.openSinceMs <= cutoff).sort((a, b) => a.openSinceMs - b.openSinceMs);
  }

  /** A failed sample keeps the rule's current state (logged once until it recovers). */
  private async guard<T>(what: string, read: () => Promise<T>): Promise<T | undefined> {
    try {
      const value = await read();
      if (this.failing.delete(what)) this.log.info({ what }, 'backpressure: sampling works again');
      return value;
    } catch (err) {
      if (!this.failing.has(what)) this.log.warn({ err, what }, 'backpressure: sampling failed; state kept');
      this.failing.add(what);
      return undefined;
    }
  }

  private call(what: string, action: () => void): void {
    try {
      action();
    } catch (err) {
      // e.g. the consumer is between a crash and its restart; the next sample tries again.
      this.log.warn({ err, what }, 'backpressure: could not apply');
    }
  }
}

/** The rules configured by QUEUE_*_WATERMARK and ROUTER_*; a low watermark at or above the high one is refused. */
export function backpressureRules(
  config: Pick<
    Config,
    'queueHighWatermark' | 'queueLowWatermark' | 'routerBreakerPauseAfter' | 'routerBackpressureInterval'
  >,
): BackpressureRules {
  const high = config.queueHighWatermark;
  const low = config.queueLowWatermark ?? Math.floor(high * 0.8);
  if (high > 0 && low >= high) {
    throw new ConfigError(
      `invalid configuration: QUEUE_LOW_WATERMARK=${low} must be below QUEUE_HIGH_WATERMARK=${high}`,
    );
  }
  return {
    highWatermark: high,
    lowWatermark: low,
    breakerPauseAfterMs: config.routerBreakerPauseAfter,
    intervalMs: config.routerBackpressureInterval,
  };
}

/**
 * The bulkhead (docs/architecture.md §5 outbound hygiene): at most `maxPerOrigin` calls in flight to one
 * target origin, so a target that hangs can hold a few workers, never all of them. The circuit
 * breaker does not cover this case: a target that answered before and now hangs produces no
 * failure until its calls time out, so its breaker stays closed while every worker waits on it.
 *
 * A call over the cap waits in the process only briefly (at most IN_PROCESS_WAIT_MS, for a slot
 * its origin frees meanwhile): longer, it would hold its worker, the very thing the bulkhead
 * protects. Past that, the task goes back to the queue for `retryInMs`, like a limiter wait, and
 * is no attempt. The short wait is what keeps a fast origin at its cap cheap: its slots free every
 * few ms, and without it each task over the cap would cost a reject and a lease more. Two scopes:
 * - `LocalBulkhead` (ORIGIN_CONCURRENCY_SCOPE=process): a counter per origin in this process;
 *   free, exact, but N executors may still send N × cap calls to one origin.
 * - `ClusterBulkhead` (=cluster, cluster.ts): the slots are leases in Redis shared by every
 *   executor; one round trip per lease batch.
 */

import { SlotLine, type Waiter } from './line.ts';

export type SlotGrant =
  /**
   * `release` frees the slot; call it exactly once, when the call is over. `inFlight`: the calls
   * to the origin in flight in the bulkhead's scope, this one included; `full`: this call took the
   * last slot under the cap, so the cap binds. Both tell the adaptive limit whether a latency is a
   * queue of our making (OriginPacer.report).
   */
  | { granted: true; release: () => void; inFlight: number; full: boolean }
  /** Come back in `retryInMs` (already jittered). */
  | { granted: false; retryInMs: number };

export interface Bulkhead {
  /**
   * A slot of `origin`, if fewer than the cap are in flight; `limit` lowers the cap for this call
   * (the origin's adaptive concurrency limit, see OriginPacer), never raises it. `client` and
   * `partition`: whose call it is (meta.client, its queue partition), so that a freed slot goes by
   * the queue's order (SlotLine). `wait: false`: no short wait in the process (IN_PROCESS_WAIT_MS)
   * when the origin is full, for a caller that waits parked instead (waitForSlot), its worker free.
   */
  acquire(
    origin: string,
    limit?: number,
    client?: string,
    wait?: boolean,
    partition?: string,
  ): Promise<SlotGrant>;
  /**
   * Waits for a slot of `origin` without a worker (a task parked by the executor after a refusal):
   * the slot, handed over to it when one frees (its `release` is the caller's then, exactly once),
   * or undefined once `signal` aborts (the wait is over or the executor stops). Freed slots go by
   * the queue's order (SlotLine), parked or not. `limit`: the origin's limit (as for acquire) when
   * a slot frees, not when the wait began (an adaptive limit moves meanwhile).
   */
  waitForSlot(
    origin: string,
    limit: (() => number | undefined) | undefined,
    client: string | undefined,
    signal: AbortSignal,
    partition?: string,
  ): Promise<Granted | undefined>;
  /** Lets go of what it holds open (a subscriber); the executor closes its bulkhead at drain. */
  close(): Promise<void>;
}

/** A slot granted. */
export type Granted = Extract<SlotGrant, { granted: true }>;

/** The cap for one call: MAX_WORKERS_PER_ORIGIN, or the origin's learnt limit when lower. */
export function capOf(maxPerOrigin: number, limit: number | undefined): number {
  return limit === undefined ? maxPerOrigin : Math.max(1, Math.min(maxPerOrigin, Math.floor(limit)));
}

/** Bounds of the wait of a task refused by a full origin (see waitForSlotMs). */
export const MIN_WAIT_MS = 20;
export const MAX_WAIT_MS = 2_000;

/**
 * How long a task refused by a full origin waits before it is leased again. It cannot be woken
 * when a slot frees (it waits in the shared queue, maybe for another executor), so it comes back
 * when a slot is likely free: with `inFlight` calls lasting about `typicalCallMs` each, one ends
 * every `typicalCallMs / inFlight` on average. That keeps a fast origin at its cap with waits of
 * a few ms, and spaces out the polls of a hanging one (its calls are only known to last at least
 * as long as the oldest has been running, which grows). MAX_WAIT_MS bounds both the latency a
 * task gains once the origin recovers and the cost of a poll (a lease, a fetch, a reject) for a
 * hanging origin: with 32 tasks waiting, 16 polls a second. The jitter (×0.5–1.5) spreads
 * waiters out, so a freed slot is not raced for by all of them at once.
 */
export function waitForSlotMs(typicalCallMs: number, inFlight: number, random: number): number {
  const expected = typicalCallMs / Math.max(1, inFlight);
  const bounded = Math.min(MAX_WAIT_MS, Math.max(MIN_WAIT_MS, expected));
  return Math.round(bounded * (0.5 + random));
}

/**
 * Longest wait in the process for a slot of a full origin (LocalBulkhead), before the task goes
 * back to the queue. A fast origin frees a slot within it; a hanging one holds each waiting worker
 * this long per lease of the task, against MIN_WAIT_MS–MAX_WAIT_MS spent back in the queue.
 */
export const IN_PROCESS_WAIT_MS = 50;

/** Weight of the newest call in an origin's moving average of call durations. */
const EWMA_WEIGHT = 0.2;

/**
 * How long calls to each origin take, as seen by this process: a moving average of finished
 * calls, and the start times of the calls still running (a hanging origin shows in the latter
 * long before any of its calls finishes). Origins without calls in flight are forgotten when their
 * last call ends, so memory follows the number of origins being called, not the number ever seen.
 */
export class OriginLoad {
  private readonly origins = new Map<string, { running: Map<number, number>; averageMs: number }>();
  private seq = 0;

  /** Marks a call started; the returned function marks it over. */
  start(origin: string, nowMs = Date.now()): () => void {
    const entry = this.origins.get(origin) ?? { running: new Map(), averageMs: 0 };
    this.origins.set(origin, entry);
    const id = ++this.seq;
    entry.running.set(id, nowMs);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const tookMs = Date.now() - nowMs;
      entry.averageMs =
        entry.averageMs === 0 ? tookMs : entry.averageMs + EWMA_WEIGHT * (tookMs - entry.averageMs);
      entry.running.delete(id);
      if (entry.running.size === 0) this.origins.delete(origin);
    };
  }

  inFlight(origin: string): number {
    return this.origins.get(origin)?.running.size ?? 0;
  }

  /** The longer of the average finished call and the age of the oldest running one (0 if unknown). */
  typicalCallMs(origin: string, nowMs = Date.now()): number {
    const entry = this.origins.get(origin);
    if (!entry) return 0;
    let oldest = nowMs;
    for (const startedMs of entry.running.values()) oldest = Math.min(oldest, startedMs);
    return Math.max(entry.averageMs, nowMs - oldest);
  }
}

/** ORIGIN_CONCURRENCY_SCOPE=process: the cap counted in this process alone. */
export class LocalBulkhead implements Bulkhead {
  private readonly maxPerOrigin: number;
  private readonly random: () => number;
  private readonly load: OriginLoad;
  private readonly maxWaitMs: number;
  /** Calls waiting for a slot of a full origin, in a worker or parked (see SlotLine). */
  private readonly line: SlotLine;

  /**
   * `load`: where calls are counted, when shared with a ClusterBulkhead (its fallback).
   * `maxWaitMs`: the longest in-process wait for a slot (IN_PROCESS_WAIT_MS; 0 = none).
   * `weightOf`: a client's weight, for the order of the line (SlotLine; 1 when not given).
   */
  constructor(options: {
    maxPerOrigin: number;
    random?: () => number;
    load?: OriginLoad;
    maxWaitMs?: number;
    weightOf?: (client: string) => number;
  }) {
    if (!Number.isInteger(options.maxPerOrigin) || options.maxPerOrigin < 1)
      throw new RangeError('maxPerOrigin must be a positive integer');
    this.maxPerOrigin = options.maxPerOrigin;
    this.random = options.random ?? Math.random;
    this.load = options.load ?? new OriginLoad();
    this.maxWaitMs = options.maxWaitMs ?? IN_PROCESS_WAIT_MS;
    this.line = new SlotLine(options.weightOf);
  }

  acquire(origin: string, limit?: number, client = '', wait = true, partition = ''): Promise<SlotGrant> {
    const inFlight = this.load.inFlight(origin);
    const cap = capOf(this.maxPerOrigin, limit);
    if (inFlight < cap) return Promise.resolve(this.grant(origin, client, cap));
    const retryInMs = waitForSlotMs(this.load.typicalCallMs(origin), inFlight, this.random());
    const waitMs = wait ? Math.min(this.maxWaitMs, retryInMs) : 0;
    if (waitMs <= 0) return Promise.resolve({ granted: false, retryInMs });
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.line.leave(origin, waiter);
        resolve({ granted: false, retryInMs: Math.max(1, retryInMs - waitMs) });
      }, waitMs);
      const waiter: Waiter = {
        cap,
        client,
        partition,
        wake: () => {
          clearTimeout(timer);
          resolve(this.grant(origin, client, cap));
        },
      };
      this.line.join(origin, waiter);
    });
  }

  /** Holds nothing open. */
  async close(): Promise<void> {}

  waitForSlot(
    origin: string,
    limit: (() => number | undefined) | undefined,
    client = '',
    signal: AbortSignal,
    partition = '',
  ): Promise<Granted | undefined> {
    const capNow = () => capOf(this.maxPerOrigin, limit?.());
    // A slot freed between the refusal and now: nobody woke for it.
    const cap = capNow();
    if (this.load.inFlight(origin) < cap) return Promise.resolve(this.grant(origin, client, cap));
    if (signal.aborted) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const over = () => {
        this.line.leave(origin, waiter);
        resolve(undefined);
      };
      const waiter: Waiter = {
        get cap() {
          return capNow();
        },
        client,
        partition,
        parked: true,
        wake: () => {
          signal.removeEventListener('abort', over);
          resolve(this.grant(origin, client, capNow()));
        },
      };
      signal.addEventListener('abort', over, { once: true });
      this.line.join(origin, waiter);
    });
  }

  /** A slot; its release hands it straight to the next waiter of the origin (see SlotLine), if any. */
  private grant(origin: string, client: string, cap: number): Granted {
    const end = this.load.start(origin);
    const uncount = this.line.took(origin, client);
    const inFlight = this.load.inFlight(origin);
    let released = false;
    return {
      granted: true,
      inFlight,
      full: inFlight >= cap,
      release: () => {
        if (released) return;
        released = true;
        end();
        uncount();
        this.line.wakeNext(origin, this.load.inFlight(origin));
      },
    };
  }

  /** Calls to `origin` in flight now (tests, metrics). */
  inFlight(origin: string): number {
    return this.load.inFlight(origin);
  }
}

/** MAX_WORKERS_PER_ORIGIN when unset: a quarter of the workers, so at least 4 origins can be served at once. */
export function defaultMaxPerOrigin(maxWorkers: number): number {
  return Math.max(1, Math.ceil(maxWorkers / 4));
}

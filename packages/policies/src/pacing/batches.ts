import type { ReportAnswer } from './scripts.ts';
import type { SignalKind } from './signals.ts';
import type { PaceReport } from './types.ts';

/** The answers of one scope waiting to be reported in one script call. */
export interface PendingReport {
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
export const REPORT_BATCH = 64;
/** The default of `reportEveryMs`. */
export const REPORT_EVERY_MS = 20;

/**
 * The answers waiting to be reported, by key, and when they are sent: a batch that is `soon` at
 * the next turn of the event loop, every batch after `reportEveryMs`. `flush` sends one key's.
 */
export class ReportBatches {
  private readonly pending = new Map<string, PendingReport>();
  /**
   * Cancel the flushes scheduled: `turn`, the batches of origins that were not free, at the next
   * turn of the event loop; `window`, every batch, after `reportEveryMs`.
   */
  private readonly scheduled: { turn?: (() => void) | undefined; window?: (() => void) | undefined } = {};
  private readonly reportEveryMs: number;
  private readonly flush: (key: string) => Promise<void>;

  constructor(reportEveryMs: number, flush: (key: string) => Promise<void>) {
    this.reportEveryMs = reportEveryMs;
    this.flush = flush;
  }

  /** The batch of `key`, begun if none waits. */
  of(key: string, origin: string, scope: string): PendingReport {
    let batch = this.pending.get(key);
    if (batch === undefined) {
      batch = { origin, scope, answers: [], kinds: [], resolves: [], news: false, soon: false };
      this.pending.set(key, batch);
    }
    return batch;
  }

  /** The batch of `key`, no longer waiting (undefined: none waits). */
  take(key: string): PendingReport | undefined {
    const batch = this.pending.get(key);
    if (batch !== undefined) this.pending.delete(key);
    return batch;
  }

  schedule(soon: boolean): void {
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

  /** Cancels the flushes scheduled and sends every batch waiting (the pacer is closing). */
  async flushAll(): Promise<void> {
    this.scheduled.turn?.();
    this.scheduled.window?.();
    this.scheduled.turn = this.scheduled.window = undefined;
    await Promise.all([...this.pending.keys()].map((key) => this.flush(key)));
  }
}

import { originOf } from '@requester/policies';
import { type Cancellation, type Cancellations, cancelledResult } from '@requester/shared/cancel';
import type { RequestEnvelope } from '@requester/shared/contract';
import { type Debounces, debouncedResult } from '@requester/shared/debounce';
import type { Journal } from '@requester/shared/journal';
import type { Logger } from '@requester/shared/log';
import type { PauseView } from '@requester/shared/pause';
import { executorMetrics as metrics } from '../metrics.ts';
import { ownedBy } from '../result/index.ts';
import type { Progress } from './policies.ts';
import { deliver, type Job, type Settlement } from './settlement.ts';
import type { Parsed } from './source.ts';
import { withTraceId } from './trace.ts';

/** How long a paused task waits before it is looked at again (a resume is honoured within it). */
export const PAUSE_RECHECK_MS = 1_000;

/** What the pre-checks need of the executor's wiring (see ExecutorOptions). */
export interface PreCheckOptions {
  cancellations?: Pick<Cancellations, 'find' | 'findMany'> &
    Partial<Pick<Cancellations, 'mark' | 'unchangedSince'>>;
  pauses?: Pick<PauseView, 'any' | 'match' | 'refresh'>;
  /** The debounce keys (meta.debounce): without them every debounced task runs. */
  debounces?: Pick<Debounces, 'replacedBy'>;
  journal?: Journal;
}

/**
 * What is asked of a task before its attempt and before its reschedule: was its request cancelled
 * (docs/architecture.md §14), is its origin, client or partition paused (§15). A lease batch's
 * cancels are read in one call; a task's later checks reuse that read while no cancel of it is
 * announced.
 */
export class PreChecks {
  private readonly options: PreCheckOptions;
  private readonly log: Logger;
  /** Tasks whose pause this process journaled already (a paused task comes back every second). */
  private readonly pauseJournaled = new Set<string>();

  constructor(options: PreCheckOptions, log: Logger) {
    this.options = options;
    this.log = log;
  }

  /**
   * The cancels of a lease batch's requests, in one read (an `undefined` for a task whose record
   * did not parse). A Redis that does not answer is no cancel (see cancelled). Each job asked is
   * given the watch's mark of the read (see knownCancel); one not asked, or a read failed, none.
   */
  async cancellationsOf(
    jobs: Job[],
    parsed: Array<Parsed | undefined>,
  ): Promise<Array<Cancellation | undefined>> {
    for (const job of jobs) job.cancelRead = { mark: undefined };
    const { cancellations } = this.options;
    const asked: number[] = [];
    const requests: Array<{ client: string | undefined; requestId: string; createdAtMs?: number }> = [];
    parsed.forEach((p, i) => {
      if (!p?.ok) return;
      asked.push(i);
      const { client, requestId } = p.envelope.meta;
      requests.push({ client, requestId, createdAtMs: jobs[i]?.task.createdAt });
    });
    const found: Array<Cancellation | undefined> = new Array(parsed.length);
    if (!cancellations || requests.length === 0) return found;
    try {
      const mark = cancellations.mark?.();
      const answers = await cancellations.findMany(requests);
      asked.forEach((index, n) => {
        found[index] = answers[n];
        const job = jobs[index];
        if (job) job.cancelRead = { mark };
      });
    } catch (err) {
      this.log.warn({ err, requests: requests.length }, 'cancels not readable: going on');
    }
    return found;
  }

  /**
   * No cancel, when the task's last read of it still stands (else undefined: it is read again).
   * With the cancel watch subscribed, the read stands while no cancel of the request was announced
   * since it was sent (Cancellations.unchangedSince): a task parked for a slot, a retry or a pace,
   * or rescheduled by its attempt, reads its cancel again only when one was announced meanwhile.
   * Without a mark (no watch, its subscriber down when the read was sent, or the read failed):
   * `fresh`, a task handed a bulkhead slot within CANCEL_FRESH_MS of its lease, is not asked again,
   * the lease batch's read being as fresh as for a call that waited in its worker (asking again
   * would cost a read per such call for a cancel a moment newer).
   */
  knownCancel(job: Job, envelope: RequestEnvelope, fresh: boolean): { found: undefined } | undefined {
    const mark = job.cancelRead?.mark;
    if (mark === undefined) return fresh ? { found: undefined } : undefined;
    const { client, requestId } = envelope.meta;
    return this.options.cancellations?.unchangedSince?.(mark, client, requestId)
      ? { found: undefined }
      : undefined;
  }

  /**
   * The `cancelled` result, when the request was cancelled (a cancel applies to copies accepted
   * before it). Its holder of the lease is its one writer: the task is acked with it, never run
   * again. A Redis that does not answer is no cancel: the attempt goes on (a cancel is a wish, a
   * request a promise). `known`: the cancel read with the lease batch, if it was.
   */
  async cancelled(
    job: Job,
    envelope: RequestEnvelope,
    progress: Progress,
    known?: { found: Cancellation | undefined },
  ): Promise<Settlement | undefined> {
    const { cancellations } = this.options;
    if (!cancellations) return undefined;
    const { client, proxyData } = envelope.meta;
    let cancellation = known?.found;
    if (!known) {
      const mark = cancellations.mark?.();
      cancellation = await cancellations.find(client, envelope.meta.requestId, job.task.createdAt).then(
        (found) => {
          // Read and absent: stands for the task's next checks while no cancel of it is announced.
          if (job.cancelRead) job.cancelRead.mark = found ? undefined : mark;
          return found;
        },
        (err: unknown) => {
          this.log.warn({ err, requestId: envelope.meta.requestId }, 'cancels not readable: going on');
          if (job.cancelRead) job.cancelRead.mark = undefined;
          return undefined;
        },
      );
    }
    if (!cancellation) return undefined;
    const result = cancelledResult(envelope.meta.requestId, cancellation, {
      tryCount: progress.tryCount,
      waitTimeNs: progress.waitedMs * 1e6,
      proxyData,
    });
    return deliver(withTraceId(ownedBy(envelope, result), envelope.meta.traceparent), 'cancelled');
  }

  /**
   * A task of a paused origin, client or partition goes back to the queue unattempted (a wait: no
   * attempt, no limiter token, no breaker outcome; an ordered one keeps its partition's head) and
   * is looked at again after PAUSE_RECHECK_MS, or when the pause ends if sooner.
   */
  paused(job: Job, envelope: RequestEnvelope): Settlement | undefined {
    const { pauses } = this.options;
    // Before the task's description is built: an object literal with a getter is a slow one.
    if (!pauses?.any) return undefined;
    const { uri } = envelope.request;
    let origin: [string | undefined] | undefined;
    const pause = pauses.match({
      // Parsed only when a pause is asked about: none recorded (the usual case) is no URL parse per call.
      get origin() {
        origin ??= [safeOrigin(uri)];
        return origin[0];
      },
      client: envelope.meta.client,
      partition: job.lease.partition,
      destination: envelope.meta.destination,
    });
    if (!pause) return undefined;
    const now = Date.now();
    const delayMs = Math.max(
      1,
      Math.ceil(Math.min(PAUSE_RECHECK_MS, (pause.until ?? Number.POSITIVE_INFINITY) - now)),
    );
    const seen = `${job.lease.id}\0${pause.scope} ${pause.value}`;
    const { journal } = this.options;
    if (journal && !this.pauseJournaled.has(seen)) {
      if (this.pauseJournaled.size >= 10_000) this.pauseJournaled.clear();
      this.pauseJournaled.add(seen);
      const until = pause.until === null ? '' : ` until ${new Date(pause.until).toISOString()}`;
      journal.emit({
        type: 'held',
        requestId: envelope.meta.requestId,
        client: envelope.meta.client,
        by: 'pause',
        until: pause.until ?? now + delayMs,
        pausedBy: `${pause.by}: ${pause.scope} ${pause.value}${until}`,
      });
    }
    return { kind: 'reschedule', delayMs, outcome: 'paused' };
  }

  /**
   * The `debounced` result, when a newer request of the task's debounce key replaced it (see
   * Debounces): acked with it, no attempt. Asked before any wait, until an attempt or a wait is
   * recorded in the task (a retry, a rate-limit wait: it passed already); a task given back as it
   * was (a pause, a drain) asks again, and a newer request of its key arrived meanwhile replaces
   * it. A Redis that does not answer is no replacement: the attempt goes on (fail open, as for a
   * cancel).
   */
  async debounced(envelope: RequestEnvelope, progress: Progress): Promise<Settlement | undefined> {
    const { debounces } = this.options;
    const { debounce, client, requestId, proxyData } = envelope.meta;
    if (!debounces || !debounce || progress.tryCount > 0 || progress.waitedMs > 0) return undefined;
    const by = await debounces.replacedBy(client, requestId, debounce.key).catch((err: unknown) => {
      metrics.debounceUnavailable.inc();
      this.log.warn({ err, requestId }, 'debounce state not readable: going on');
      return undefined;
    });
    if (by === undefined) return undefined;
    metrics.debounced.inc();
    this.options.journal?.emit({ type: 'debounced', requestId, client, by, key: debounce.key });
    const result = debouncedResult(requestId, by, debounce.key, {
      tryCount: progress.tryCount,
      waitTimeNs: progress.waitedMs * 1e6,
      proxyData,
    });
    return deliver(withTraceId(ownedBy(envelope, result), envelope.meta.traceparent), 'debounced');
  }
}

/** The origin of a request's URL; none for a wake-up (or a URL the contract would refuse). */
export function safeOrigin(uri: string | undefined): string | undefined {
  if (!uri) return undefined;
  try {
    return originOf(uri);
  } catch {
    return undefined;
  }
}

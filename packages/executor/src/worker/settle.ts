import type { FairQueue, LeasedTask } from '@requester/queue';
import { clientScoped, type ResultEnvelope } from '@requester/shared/contract';
import type { Journal } from '@requester/shared/journal';
import { isMessageTooLargeError, type KafkaProducer, type OutgoingRecord } from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import type { Outbox, OutboxRow } from '@requester/shared/outbox';
import type { RedisClient } from '@requester/shared/redis';
import { replyChannel, resultKey } from '@requester/shared/replies';
import {
  kafkaAttributes,
  type Span,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceparentOf,
  tracingEnabled,
} from '@requester/shared/tracing';
import { executorMetrics as metrics } from '../metrics.ts';
import { resultMessage, tooLargeResultMessage } from '../result/index.ts';
import { KAFKA_RETRY_MS, type Settlement } from './settlement.ts';

export interface ReplyOptions {
  redis: RedisClient;
  /** REDIS_PREFIX, without the colon. */
  prefix: string;
  /** SYNC_CACHE_TTL when sync results are also kept for long-polls (SYNC_FOLLOW_OUT=false). */
  keepMs?: number;
}

/** What the settle path needs of the executor's wiring (see ExecutorOptions). */
export interface SettlerOptions {
  queue: Pick<FairQueue, 'ackMany' | 'rejectMany' | 'deadLetterMany'>;
  producer: KafkaProducer;
  topicOut: string;
  maxResultBytes?: number;
  topicDlq?: string;
  outbox?: Pick<Outbox, 'add'>;
  replies?: ReplyOptions;
  leaseTtlMs: number;
  produceTimeoutMs: number;
  journal?: Journal;
}

interface Pending {
  lease: LeasedTask;
  settlement: Settlement;
  /** Epoch ms the request was accepted (the task's createdAt), for the end-to-end latency. */
  createdAt?: number | undefined;
  done: () => void;
}

/**
 * The fewest settlements written while the previous batch's leases are still being settled. A
 * drain of wake-ups (hundreds a flush) gains from the overlap; calls settle a few dozen at a time,
 * and writing those at once only splits them into more, smaller produces (docs/benchmarks/wake-ups.md,
 * "Wake-ups at an instant": +10–40 % broker CPU per call with every batch overlapped).
 */
export const OVERLAP_MIN_BATCH = 128;

/** What a flush wrote (see Settler.write): the results on `out`, unless that failed, and the outbox rows. */
interface Writing {
  deliveries: Pending[];
  written: Written[] | undefined;
  outboxed: boolean;
}

/** A result as written to `out`, with the gateway waiting for it. */
interface Written {
  value: OutgoingRecord['value'];
  replyTo: string | undefined;
  requestId: string | undefined;
  client: string | undefined;
}

/**
 * The executor's settle path (docs/architecture.md §3, §5): settlements wait here for the next
 * flush, which produces results and dead letters in one batch, writes the outbox rows, hands sync
 * results to their gateways, and only then settles the leases in the queue.
 */
export class Settler {
  private readonly options: SettlerOptions;
  private readonly log: Logger;
  private pending: Pending[] = [];
  private flushing: Promise<void> | undefined;
  /** Wakes a flush loop waiting for its previous batch's leases to be settled: more to write. */
  private arrived: (() => void) | undefined;

  constructor(options: SettlerOptions, log: Logger) {
    this.options = options;
    this.log = log;
  }

  /**
   * Queues the settlement for the next flush; resolves once it is written and the lease settled
   * (acked, rejected or dead-lettered, or left to lapse when Redis stays away): its worker is free.
   */
  settle(lease: LeasedTask, settlement: Settlement, createdAt?: number): Promise<void> {
    return new Promise((done) => {
      this.pending.push({ lease, settlement, createdAt, done });
      this.arrived?.();
      this.flushSoon();
    });
  }

  /** The flush under way, if any. */
  get inProgress(): Promise<void> | undefined {
    return this.flushing;
  }

  /**
   * The flush loop. A batch's results are written, then its leases settled; the next batch is
   * written meanwhile when it has OVERLAP_MIN_BATCH settlements or more (one batch writing and one
   * settling at most): what finished during a write goes out in the next one. Ack after produce holds per task, and so does an ordered
   * partition's order: its next task is only leased after its predecessor's ack.
   */
  private flushSoon(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      // One macrotask of grace so results finishing together share a produce.
      await new Promise((resolve) => setImmediate(resolve));
      let settling: Promise<void> | undefined;
      for (;;) {
        if (this.pending.length === 0) {
          if (!settling) break;
          const previous = settling;
          const more = new Promise<boolean>((resolve) => {
            this.arrived = () => resolve(true);
          });
          const moreFirst = await Promise.race([previous.then(() => false), more]);
          this.arrived = undefined;
          if (!moreFirst) settling = undefined;
          await new Promise((resolve) => setImmediate(resolve));
          continue;
        }
        if (settling && this.pending.length < OVERLAP_MIN_BATCH) {
          // A small batch waits for the previous one's leases instead, and grows meanwhile.
          await settling;
          settling = undefined;
        }
        const batch = this.pending;
        this.pending = [];
        const written = await this.write(batch);
        await settling;
        settling = this.settleBatch(batch, written);
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.pending.length > 0) this.flushSoon();
    });
  }

  /**
   * A flush's first half: produces the results of the batch (and their dead-letter records) in one
   * go and writes the outbox rows; its second half (settleBatch) then settles the leases: delivered and outboxed tasks are acked, rescheduled ones
   * rejected with their delay and new payload, dead ones dead-lettered in the queue. If `out`
   * cannot be written within a lease TTL the tasks are given back to the queue (tried again later)
   * rather than acked without a result; if the outbox cannot be written the wait stays in Redis.
   */
  private async write(batch: Pending[]): Promise<Writing> {
    const deliveries = batch.filter((p) => p.settlement.kind === 'deliver');
    const rows = batch.flatMap((p) => (p.settlement.kind === 'reschedule' && p.settlement.outbox) || []);
    const [written, outboxed] = await Promise.all([this.produceResults(deliveries), this.addToOutbox(rows)]);
    const produced = written !== undefined;
    if (produced) observeProduced(deliveries, Date.now());
    return { deliveries, written, outboxed };
  }

  /** The second half of a flush (see write): the batch's leases settled, as its writes allow. */
  private async settleBatch(batch: Pending[], writing: Writing): Promise<void> {
    const { deliveries, written, outboxed } = writing;
    const produced = written !== undefined;
    const acks: string[] = [];
    const rejects: Array<{ token: string; delayMs: number; payload?: string }> = [];
    const dead: Array<{ token: string; reason: string }> = [];
    for (const { lease, settlement } of batch) {
      const { token } = lease;
      if (settlement.kind === 'deliver') {
        if (produced) acks.push(token);
        else rejects.push({ token, delayMs: KAFKA_RETRY_MS });
      } else if (settlement.kind === 'reschedule') {
        const { delayMs, payload, outbox } = settlement;
        if (outbox && outboxed) acks.push(token);
        else rejects.push({ token, delayMs, ...(payload === undefined ? {} : { payload }) });
      } else dead.push({ token, reason: settlement.reason });
    }
    if (produced) for (const { settlement } of deliveries) this.journalDelivered(settlement);
    else for (const { settlement } of deliveries) this.journalLeased(settlement);
    const { queue } = this.options;
    await Promise.all([
      written && this.publishReplies(written),
      this.settleLeases('ack', acks, () => queue.ackMany(acks)),
      this.settleLeases('reject', rejects, () => queue.rejectMany(rejects)),
      this.settleLeases('dead-letter', dead, () => queue.deadLetterMany(dead)),
    ]);
    // One counter increment per outcome of the batch rather than per task (a drain's flush holds
    // hundreds of wake-ups of one outcome).
    const outcomes = new Map<string, number>();
    for (const { settlement, done } of batch) {
      const outcome = outcomeOf(settlement, produced);
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      done();
    }
    for (const [outcome, n] of outcomes) metrics.tasks.inc({ outcome }, n);
  }

  private journalDelivered(settlement: Settlement): void {
    const { journal } = this.options;
    if (!journal || settlement.kind !== 'deliver') return;
    this.journalLeased(settlement);
    const { response, meta } = settlement.result;
    const requestId = meta.requestId;
    if (!requestId) return;
    const client = meta.client;
    const error = meta.error?.code;
    journal.emit({
      type: 'completed',
      requestId,
      client,
      status: response.status,
      tryCount: meta.tryCount,
      ...(error ? { error } : {}),
    });
    const reason = settlement.deadLetterReason;
    if (reason !== undefined) journal.emit({ type: 'dead_lettered', requestId, client, reason });
  }

  /** A wake-up's `leased`, held back until its result's flush (see TaskRunner.attempt). */
  private journalLeased(settlement: Settlement): void {
    if (settlement.kind === 'deliver' && settlement.leased) this.options.journal?.emit(settlement.leased);
  }

  /**
   * The results as written, once every result is on `out` and every dead letter on the DLQ
   * (`undefined` when that failed); retried for up to a lease TTL.
   */
  private async produceResults(deliveries: Pending[]): Promise<Written[] | undefined> {
    const results: ResultEnvelope[] = [];
    const traceparents: Array<string | undefined> = [];
    const replyTos: Array<string | undefined> = [];
    const deadLetters: OutgoingRecord[] = [];
    for (const { settlement } of deliveries) {
      if (settlement.kind !== 'deliver') continue;
      results.push(settlement.result);
      traceparents.push(settlement.traceparent);
      replyTos.push(settlement.replyTo);
      if (settlement.deadLetter) deadLetters.push(settlement.deadLetter);
    }
    if (results.length === 0) return [];
    const { producer, topicDlq, produceTimeoutMs, leaseTtlMs } = this.options;
    const deadline = Date.now() + leaseTtlMs;
    for (let attempt = 1; ; attempt++) {
      try {
        const [values] = await Promise.all([
          this.writeResults(results, traceparents),
          topicDlq ? producer.send(topicDlq, deadLetters, produceTimeoutMs) : undefined,
        ]);
        return values.map((value, i) => ({
          value,
          replyTo: replyTos[i],
          requestId: results[i]?.meta.requestId,
          client: results[i]?.meta.client,
        }));
      } catch (err) {
        if (Date.now() >= deadline) {
          this.log.error(
            { err, results: results.length },
            'cannot write results to out: giving the tasks back',
          );
          return undefined;
        }
        this.log.warn({ err, attempt }, 'writing results to out failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
      }
    }
  }

  /**
   * Writes results to `out`. If the broker refuses the batch as too large — the topic's limit can
   * be below KAFKA_MAX_MESSAGE_BYTES when it was created elsewhere — each result is written on its
   * own, and the ones still refused are answered as too large: one oversized result must neither
   * hold back the results of its batch nor be retried forever. Returns each record's value as written.
   */
  private async writeResults(
    results: ResultEnvelope[],
    traceparents: Array<string | undefined>,
  ): Promise<Array<OutgoingRecord['value']>> {
    const { producer, topicOut, produceTimeoutMs, maxResultBytes } = this.options;
    const spans = traceparents.map((parent) => sendSpan(topicOut, parent));
    const messages = results.map((result, i) =>
      withTraceHeader(resultMessage(result, maxResultBytes), spans[i]),
    );
    try {
      await producer.send(topicOut, messages, produceTimeoutMs);
      endAll(spans);
      return messages.map((message) => message.value);
    } catch (err) {
      endAll(spans, err);
      if (!isMessageTooLargeError(err)) throw err;
    }
    return await Promise.all(
      results.map(async (result, i) => {
        const message = messages[i] as OutgoingRecord;
        try {
          await producer.send(topicOut, [message], produceTimeoutMs);
          return message.value;
        } catch (err) {
          if (!isMessageTooLargeError(err)) throw err;
          const refused = 'was refused by the out topic as too large (its max.message.bytes)';
          this.log.warn({ requestId: result.meta.requestId }, 'result too large for out: answering 502');
          const tooLarge = tooLargeResultMessage(result, refused);
          await producer.send(topicOut, [tooLarge], produceTimeoutMs);
          return tooLarge.value;
        }
      }),
    );
  }

  /**
   * Hands the sync results just written to `out` to the gateways holding their callers (SPUBLISH on
   * each one's channel) and, when long-polls need them, keeps them in Redis for `keepMs`. The
   * commands of one flush go out together (the client's auto-pipelining, per node on a cluster).
   * Best effort: `out` stays the journal, and a caller whose gateway is gone or that Redis failed
   * gets the usual 202 + Location.
   */
  private async publishReplies(written: Written[]): Promise<void> {
    const { replies } = this.options;
    if (!replies) return;
    const { redis, prefix, keepMs } = replies;
    const sends: Array<Promise<unknown>> = [];
    for (const { value, replyTo, requestId, client } of written) {
      if (!replyTo || value === null) continue;
      sends.push(redis.spublish(replyChannel(prefix, replyTo), value));
      // Kept by result id, as gateways look it up: the requestId in its client's namespace.
      if (keepMs !== undefined && requestId)
        sends.push(redis.set(resultKey(prefix, clientScoped(client, requestId)), value, 'PX', keepMs));
    }
    const failed = (await Promise.allSettled(sends)).find((s) => s.status === 'rejected');
    if (failed) this.log.warn({ err: failed.reason }, 'sync replies not published: their callers get 202');
  }

  /** true once the rows are in the outbox; one try (on failure the waits stay in Redis instead). */
  private async addToOutbox(rows: OutboxRow[]): Promise<boolean> {
    if (rows.length === 0) return true;
    try {
      await this.options.outbox?.add(rows);
      return true;
    } catch (err) {
      this.log.warn({ err, rows: rows.length }, 'outbox unavailable: the waits stay in Redis');
      return false;
    }
  }

  /** A few tries; if Redis stays away the leases lapse and the tasks are reclaimed (at-least-once). */
  private async settleLeases(what: string, items: unknown[], run: () => Promise<unknown>): Promise<void> {
    if (items.length === 0) return;
    for (let attempt = 1; attempt <= 3; attempt++) {
      try {
        await run();
        return;
      } catch (err) {
        this.log.warn({ err, attempt, leases: items.length }, `${what} failed`);
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }
}

/** The PRODUCER span of one result written to `out`; none for a result outside any trace. */
function sendSpan(topic: string, parent: string | undefined): Span | undefined {
  if (!parent || !tracingEnabled()) return undefined;
  return startSpan(`send ${topic}`, parent, {
    kind: SpanKind.PRODUCER,
    attributes: kafkaAttributes('send', topic),
  });
}

/** The record with the `traceparent` header of its PRODUCER span: the sync-gateway continues it. */
function withTraceHeader(record: OutgoingRecord, span: Span | undefined): OutgoingRecord {
  const traceparent = span && traceparentOf(span);
  return traceparent ? { ...record, headers: { ...record.headers, traceparent } } : record;
}

function endAll(spans: Array<Span | undefined>, err?: unknown): void {
  for (const span of spans) {
    if (err) span?.setStatus({ code: SpanStatusCode.ERROR, message: String(err) });
    span?.end();
  }
}

/** End-to-end latency (measured when the result is on `out`, before the ack) and dead letters written. */
function observeProduced(deliveries: Pending[], nowMs: number): void {
  // One label set per outcome of the flush, not one per result (see settleBatch).
  const labels = new Map<string, { outcome: string }>();
  for (const { settlement, createdAt } of deliveries) {
    if (settlement.kind !== 'deliver') continue;
    if (createdAt !== undefined) {
      const { outcome } = settlement;
      let set = labels.get(outcome);
      if (!set) {
        set = { outcome };
        labels.set(outcome, set);
      }
      metrics.endToEndSeconds.observe(set, Math.max(0, nowMs - createdAt) / 1000);
    }
    if (settlement.deadLetterReason) metrics.deadLetters.inc({ reason: settlement.deadLetterReason });
  }
}

function outcomeOf(settlement: Settlement, produced: boolean): string {
  if (settlement.kind === 'dead') return 'dead_letter';
  if (settlement.kind === 'deliver' && !produced) return 'out_unavailable';
  return settlement.outcome;
}

import { createRequestContract, errorResult, unprocessableAnswer } from '@requester/shared/contract';
import type { EntrySigner } from '@requester/shared/entry';
import { asRequesterError, isOutage } from '@requester/shared/errors';
import { type Journal, RELAY_DUE_AT_HEADER, RELAYED_FROM_HEADER } from '@requester/shared/journal';
import { isMessageTooLargeError, type KafkaProducer, type OutgoingRecord } from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import { counter, gauge, startSampler } from '@requester/shared/metrics';
import { type ClaimedRow, DEFAULT_LEASE_MS, Outbox } from '@requester/shared/outbox';
import type { RoleDefinition, RoleHandle } from '@requester/shared/role';
import {
  kafkaAttributes,
  type Span,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceparentOf,
  tracingEnabled,
} from '@requester/shared/tracing';

const moved = counter('relay_moved_total', 'outbox rows produced to Kafka in and deleted');
const failures = counter('relay_failures_total', 'failed outbox deliveries (rows stay for the next claim)');
const refusedRows = counter(
  'relay_refused_total',
  'outbox rows Kafka refused for good (answered with an error result and dead-lettered, then deleted)',
);

const outboxRows = gauge('outbox_rows', 'rows waiting in the PostgreSQL outbox (sampled by the relays)');
const outboxDue = gauge(
  'outbox_due_rows',
  'outbox rows already due, not yet relayed (sampled by the relays)',
);
const outboxOverdue = gauge(
  'outbox_oldest_overdue_seconds',
  'how long ago the earliest due outbox row fell due; 0 when none is due (sampled by the relays)',
);

/** Longest a relay sleeps without news: a safety net for a lost NOTIFY, not the wake-up mechanism. */
const MAX_IDLE_MS = 5_000;
/** Shortest time between two error lines of a lasting outage. */
const ERROR_LOG_INTERVAL_MS = 60_000;

export interface RelayOptions {
  outbox: Outbox;
  producer: KafkaProducer;
  logger: Logger;
  workers: number;
  batch: number;
  produceTimeoutMs: number;
  /**
   * Rows due within this are moved now (RELAY_STAGE_AHEAD; 0 = when due): the router queues each
   * for its own due time, so a crowd of rows due at one instant is in Redis by that instant.
   */
  stageAheadMs?: number;
  /** Where a row Kafka refuses for good is answered; without it such a row stays (and is retried). */
  topicOut?: string;
  /** Its dead letter goes here. */
  topicDlq?: string;
  /** The task journal (`relayed`); absent = none. */
  journal?: Journal;
  /**
   * Signs the records put back on `in` (docs/architecture.md §10): only Requester writes the
   * outbox, so what it holds was admitted once and keeps its `meta.client`.
   */
  signer?: EntrySigner;
}

/**
 * Moves due outbox rows back into Kafka `in`. N workers claim disjoint rows (SKIP LOCKED); a
 * worker that finds nothing due sleeps until the earliest due time, and is woken early by NOTIFY
 * when a row with an earlier due time is added.
 *
 * A row Kafka refuses for good (too large for `in`, see isOutage) does not hold back the rows
 * claimed with it nor come back forever: it is answered — an error result on `out` and a dead letter
 * — and deleted with the others. An outage hands the whole claim back for a later try.
 */
export class Relay {
  private readonly options: RelayOptions;
  private readonly contract = createRequestContract();
  private stopping = false;
  private wakeAt = 0;
  private readonly sleepers = new Set<() => void>();
  private loops: Array<Promise<void>> = [];
  private unlisten: (() => Promise<void>) | undefined;
  /** Failed delivery rounds since the last one that worked, all workers together. */
  private failedInARow = 0;
  private lastErrorLogAt = Number.NEGATIVE_INFINITY;
  /** Resolves when the claim before the current one has been produced (see loop). */
  private turn: Promise<void> = Promise.resolve();

  /**
   * Claimed rows stay hidden from other claimers this long: well beyond one delivery (a produce is
   * bounded by produceTimeoutMs), so only a relay that died or lost PostgreSQL lets them come back.
   */
  private readonly leaseMs: number;

  constructor(options: RelayOptions) {
    this.options = options;
    this.leaseMs = Math.max(DEFAULT_LEASE_MS, 3 * options.produceTimeoutMs);
  }

  async start(): Promise<void> {
    this.unlisten = await this.options.outbox.listen((dueMs) => this.onAdded(dueMs));
    this.loops = Array.from({ length: this.options.workers }, (_, i) => this.loop(i));
  }

  /** Stops claiming; rows in hand are delivered and deleted (or handed back) before this resolves. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeAll();
    await Promise.all(this.loops);
    await this.options.outbox.leaveTurns();
    await this.unlisten?.();
  }

  private get stageAheadMs(): number {
    return this.options.stageAheadMs ?? 0;
  }

  private onAdded(dueMs: number): void {
    if (dueMs - this.stageAheadMs <= this.wakeAt || this.wakeAt === 0) this.wakeAll();
  }

  private async loop(worker: number): Promise<void> {
    const { outbox, logger } = this.options;
    while (!this.stopping) {
      // Claim and produce take turns across the workers (the delete after the ack does not): rows
      // are claimed in due order, and an ordered partition's rows of two claims must reach `in` in
      // that order, which two produces racing each other would not keep. Many rows due at one
      // instant (staged ahead) are exactly the case where one partition spans several claims.
      // A claim whose produce failed passes the turn only once its rows are handed back (deliverDue
      // restores their due times before it throws): before that, they are hidden from the next
      // claim, which would take their partition's later rows and produce them first.
      // The turn is taken across relay processes too (Outbox.takeTurn, an advisory lock), after
      // this process's own: two relays claiming one partition's rows at once would race likewise.
      // Its statements are bounded (RelayTurn), so a lost session holds the workers no longer
      // than that deadline and a reconnect.
      const previous = this.turn;
      let passInProcess = () => {};
      this.turn = new Promise<void>((resolve) => {
        passInProcess = resolve;
      });
      let giveBack: (() => Promise<void>) | undefined;
      const passTurn = async () => {
        const give = giveBack;
        giveBack = undefined;
        await give?.();
        passInProcess();
      };
      try {
        await previous;
        giveBack = await outbox.takeTurn(this.leaseMs);
        const delivered = await outbox.deliverDue(
          this.options.batch,
          async (rows) => {
            await this.deliver(rows);
            await passTurn();
          },
          this.leaseMs,
          this.stageAheadMs,
        );
        await passTurn();
        if (delivered > 0) {
          this.recovered();
          moved.inc(delivered);
          continue;
        }
        const next = await outbox.nextDueAt();
        const wait = next === undefined ? MAX_IDLE_MS : next - this.stageAheadMs - Date.now();
        await this.sleep(Math.min(MAX_IDLE_MS, Math.max(0, wait)));
      } catch (err) {
        await passTurn();
        failures.inc();
        // Every worker retries each second while PostgreSQL or Kafka is down: at most one error
        // line a minute (with the failures since the outage began), and one line once rows move again.
        this.failedInARow++;
        if (Date.now() - this.lastErrorLogAt >= ERROR_LOG_INTERVAL_MS) {
          this.lastErrorLogAt = Date.now();
          logger.error({ err, worker, failures: this.failedInARow }, 'outbox delivery failed; retrying');
        } else logger.debug({ err, worker }, 'outbox delivery failed again');
        await this.sleep(1_000);
      }
    }
  }

  private recovered(): void {
    if (this.failedInARow === 0) return;
    this.options.logger.info({ failures: this.failedInARow }, 'outbox delivery works again');
    this.failedInARow = 0;
    this.lastErrorLogAt = Number.NEGATIVE_INFINITY;
  }

  private async deliver(rows: ClaimedRow[]): Promise<void> {
    const byTopic = new Map<string, ClaimedRow[]>();
    for (const row of rows) byTopic.set(row.topic, [...(byTopic.get(row.topic) ?? []), row]);
    await Promise.all([...byTopic].map(([topic, topicRows]) => this.produceRows(topic, topicRows)));
  }

  private async produceRows(topic: string, rows: ClaimedRow[]): Promise<void> {
    const spans = rows.map((row) => relaySpan(topic, row));
    try {
      await this.produceRecords(topic, rows, spans);
    } catch (err) {
      for (const span of spans) span?.setStatus({ code: SpanStatusCode.ERROR });
      throw err;
    } finally {
      for (const span of spans) span?.end();
    }
  }

  private async produceRecords(
    topic: string,
    rows: ClaimedRow[],
    spans: Array<Span | undefined>,
  ): Promise<void> {
    const records = rows.map((row, i) => inRecord(row, spans[i], this.options.signer));
    // `relayed` is stamped when the write starts: the router may read and route a record before
    // the produce's acknowledgement comes back here, and its `routed` must not come first.
    const at = Date.now();
    try {
      await this.options.producer.send(topic, records, this.options.produceTimeoutMs);
      for (const row of rows) this.journalRelayed(row, at);
    } catch (err) {
      if (isOutage(err) || !this.options.topicOut) throw err;
      this.options.logger.warn(
        { err, topic },
        'Kafka refused a batch of outbox rows: producing them one by one',
      );
      const refused: Array<{ row: ClaimedRow; err: unknown }> = [];
      for (const [i, row] of rows.entries()) {
        try {
          const at = Date.now(); // as above: when the write starts
          await this.options.producer.send(
            topic,
            [records[i] as OutgoingRecord],
            this.options.produceTimeoutMs,
          );
          this.journalRelayed(row, at);
        } catch (rowErr) {
          if (isOutage(rowErr)) throw rowErr;
          refused.push({ row, err: rowErr });
        }
      }
      await this.answerRefused(refused);
    }
  }

  /**
   * The row's step in the journal, naming its request's client: requestIds are per client, so the
   * owner's story (GET /requests/{id}/events) holds only events that name it. The row keeps the
   * client in its envelope alone, so it is read from there (only when the relay has a journal).
   */
  private journalRelayed(row: ClaimedRow, at: number): void {
    const { journal } = this.options;
    if (!journal) return;
    journal.emit({ type: 'relayed', requestId: row.requestId, client: clientOfPayload(row.payload), at });
  }

  /** Error results and dead letters of rows Kafka refused; once written, the rows may be deleted. */
  private async answerRefused(refused: Array<{ row: ClaimedRow; err: unknown }>): Promise<void> {
    const { producer, topicOut, topicDlq, produceTimeoutMs, logger } = this.options;
    if (refused.length === 0 || !topicOut) return;
    const results: OutgoingRecord[] = [];
    const deadLetters: OutgoingRecord[] = [];
    for (const { row, err } of refused) {
      const refusal = asRequesterError(err);
      logger.error(
        { err, requestId: row.requestId, taskId: row.taskId },
        'Kafka refused an outbox row: answered and dead-lettered',
      );
      refusedRows.inc();
      const envelope = this.envelopeOf(row);
      const message = `the task could not be put back on ${row.topic}: ${refusal.message}`;
      const code = isMessageTooLargeError(err) ? 'payload_too_large' : 'internal';
      const result = errorResult(row.requestId, code, message, {
        tryCount: envelope?.tryCount ?? 0,
        proxyData: envelope?.meta.proxyData,
      });
      const record = { key: row.key === null ? null : Buffer.from(row.key), value: row.payload };
      const answer = unprocessableAnswer(record, result, envelope);
      results.push(answer.result);
      deadLetters.push(answer.deadLetter);
    }
    await Promise.all([
      producer.send(topicOut, results, produceTimeoutMs),
      topicDlq ? producer.send(topicDlq, deadLetters, produceTimeoutMs) : undefined,
    ]);
  }

  private envelopeOf(row: ClaimedRow) {
    try {
      const parsed = this.contract.safeParse(JSON.parse(row.payload.toString('utf8')));
      return parsed.ok ? parsed.value : undefined;
    } catch {
      return undefined;
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopping || ms <= 0) return Promise.resolve();
    this.wakeAt = Date.now() + ms;
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }

  private wakeAll(): void {
    for (const wake of [...this.sleepers]) wake();
  }
}

export const relayRole: RoleDefinition = {
  name: 'relay',
  async start({ config, logger, deps }): Promise<RoleHandle> {
    const outbox = new Outbox(await deps.sql());
    const relay = new Relay({
      outbox,
      producer: await deps.producer(),
      logger,
      workers: config.relayWorkers,
      batch: config.relayBatch,
      produceTimeoutMs: config.kafkaProduceTimeout,
      stageAheadMs: config.relayStageAhead,
      topicOut: config.topicOut,
      topicDlq: config.topicDlq,
      journal: deps.journal(),
      signer: await deps.entrySigner(),
    });
    await relay.start();
    const sampler = startSampler(
      'outbox',
      config.metricsSampleInterval,
      async () => {
        const { rows, due, oldestOverdueMs } = await outbox.backlog();
        outboxRows.set(rows);
        outboxDue.set(due);
        outboxOverdue.set(oldestOverdueMs / 1000);
      },
      logger,
    );
    return {
      drain: async () => {
        await sampler.stop();
        await relay.stop();
      },
    };
  },
};

function inRecord(row: ClaimedRow, span: Span | undefined, signer: EntrySigner | undefined): OutgoingRecord {
  const traceparent = span && traceparentOf(span);
  const headers = {
    [RELAYED_FROM_HEADER]: 'outbox',
    [RELAY_DUE_AT_HEADER]: row.dueAt.toISOString(),
    ...(traceparent ? { traceparent } : {}),
  };
  return {
    key: row.key,
    value: row.payload,
    headers: signer ? signer.signed(row.payload, headers) : headers,
  };
}

/** `meta.client` of a row's envelope; undefined when it has none (or is no envelope at all). */
function clientOfPayload(payload: Buffer): string | undefined {
  try {
    const client = (JSON.parse(payload.toString('utf8')) as { meta?: { client?: unknown } }).meta?.client;
    return typeof client === 'string' ? client : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The PRODUCER span of a row going back to `in`, under the span that wrote the row (its envelope's
 * `meta.traceparent`, see the router's outbox row); its context rides in the record's header.
 */
function relaySpan(topic: string, row: ClaimedRow): Span | undefined {
  if (!tracingEnabled()) return undefined;
  let parent: string | undefined;
  try {
    parent = (JSON.parse(row.payload.toString('utf8')) as { meta?: { traceparent?: string } }).meta
      ?.traceparent;
  } catch {
    parent = undefined; // a poison row: answered elsewhere; its span starts a trace of its own
  }
  return startSpan(`send ${topic}`, parent, {
    kind: SpanKind.PRODUCER,
    attributes: { ...kafkaAttributes('send', topic), 'requester.request_id': row.requestId },
  });
}

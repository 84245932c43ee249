import type { Cancellations } from '@requester/shared/cancel';
import { createRequestContract, errorResult, type RequestContract } from '@requester/shared/contract';
import type { Debounces } from '@requester/shared/debounce';
import { asRequesterError } from '@requester/shared/errors';
import {
  JOURNALED_BY_HEADERS,
  type Journal,
  RELAY_DUE_AT_HEADER,
  RELAYED_FROM_HEADER,
} from '@requester/shared/journal';
import {
  type BatchContext,
  headerText,
  type KafkaConsumer,
  type KafkaProducer,
  type KafkaRecord,
  type RecordBatch,
} from '@requester/shared/kafka';
import type { Logger } from '@requester/shared/log';
import { histogram } from '@requester/shared/metrics';
import type { Outbox } from '@requester/shared/outbox';
import { type Span, SpanStatusCode } from '@requester/shared/tracing';
import { Backpressure, type BackpressureRules, type OpenOriginInfo } from './backpressure.ts';
import { BodyCopies } from './bodies.ts';
import { wakeCancelled, wakeCancelledRows } from './cancelled.ts';
import { debounceBatch } from './debouncing.ts';
import { admitClaims, type KafkaEntry } from './entry.ts';
import type { Fences } from './fence.ts';
import { fenceBatch } from './fencing.ts';
import { type Route, routeRecord, type SourceRecord, type TraceRoute } from './route.ts';
import { traceRoute } from './trace.ts';
import { RouteWriter, type TaskSink } from './write.ts';

const batchSeconds = histogram('router_batch_seconds', 'time to route one fetched batch of in');

export interface RouterOptions {
  consumer: KafkaConsumer;
  queue: TaskSink;
  outbox: Outbox;
  producer: KafkaProducer;
  topicIn: string;
  topicOut: string;
  /** Dead letters of unprocessable records go here; none are written without it. */
  topicDlq?: string;
  horizonMs: number;
  /**
   * Epoch ms on Redis's clock (RedisClock.now), by which the router judges what is due within the
   * horizon and a deadline at the door, as the queue's scripts and the executors judge due times
   * and deadlines; Date.now without it.
   */
  redisNow?: () => number;
  /** Records of at most this many bytes ride in their queued task (QUEUE_INLINE_BYTES; 0 = none). */
  inlineMaxBytes?: number;
  produceTimeoutMs: number;
  logger: Logger;
  contract?: RequestContract;
  /** The task journal (accepted over Kafka, routed); absent = none. */
  journal?: Journal;
  /** When to pause consuming `in` (absent = never): see backpressure.ts. */
  backpressure?: RouterBackpressure;
  /**
   * Kafka entry (docs/architecture.md §10): who may claim a `meta.client`. The role always gives
   * it; without it every claim is trusted (tests of routing alone).
   */
  entry?: KafkaEntry;
  /** Cancelled requests are not parked in the outbox but queued due now (see wakeCancelled). */
  cancellations?: Pick<Cancellations, 'find'>;
  /**
   * The fences of ordered partitions (see fenceRoute): the role always gives them; without them
   * (tests of routing alone) a record queued at once may overtake an earlier one of its ordered
   * partition still on its way through the outbox.
   */
  fences?: Fences;
  /**
   * The debounce keys (`meta.debounce`, see debounceBatch): the role always gives them; without
   * them (tests of routing alone) a debounced request is routed as if without it.
   */
  debounces?: Debounces;
  /**
   * The bodies topic: big records an outside producer batched with others are copied there, each
   * in a batch of its own, and their tasks point at the copy (see BodyCopies). Absent = no copies.
   */
  topicBodies?: string;
}

export interface RouterBackpressure extends BackpressureRules {
  /** Pending tasks in the queue (FairQueue.pendingDepth). */
  depth: () => Promise<number>;
  /** Origins whose circuit breaker is open; without it the breaker rule is off. */
  openOrigins?: () => Promise<readonly OpenOriginInfo[]>;
}

/**
 * The router: consumes `in` in batches and sends each record where it belongs (see routeRecord).
 * All writes of a batch go out together (one pipelined queue publish, one outbox insert, one
 * produce of error results); offsets are committed only after every write succeeded, so a crash
 * replays the batch — and replays are harmless because publish and outbox are idempotent by task id.
 *
 * No record stops its partition: one that cannot be read or is not a valid request, or that the
 * queue or outbox refuses (isOutage says it is about the data, not a dependency away), is answered
 * — an error result on `out` and a dead letter (see unprocessableAnswer) — and committed past. An
 * outage fails the batch instead, uncommitted, for the consumer to deliver again.
 */
export class Router {
  private readonly options: RouterOptions;
  private readonly contract: RequestContract;
  private readonly backpressure: Backpressure | undefined;
  private readonly bodies: BodyCopies | undefined;
  private readonly writer: RouteWriter;

  constructor(options: RouterOptions) {
    this.options = options;
    this.writer = new RouteWriter(options);
    this.bodies =
      options.topicBodies === undefined
        ? undefined
        : new BodyCopies({
            producer: options.producer,
            topic: options.topicBodies,
            produceTimeoutMs: options.produceTimeoutMs,
            logger: options.logger,
          });
    this.contract = options.contract ?? createRequestContract();
    const topics = [options.topicIn];
    this.backpressure =
      options.backpressure &&
      new Backpressure({
        ...options.backpressure,
        pause: () => options.consumer.pause(topics),
        resume: () => options.consumer.resume(topics),
        logger: options.logger,
      });
  }

  /** Why consumption of `in` is paused now (empty = consuming). */
  get pausedBy(): string[] {
    return this.backpressure?.pauseReasons ?? [];
  }

  async start(): Promise<void> {
    const { consumer, topicIn } = this.options;
    await consumer.start({
      topics: [topicIn],
      fromBeginning: true,
      // The batch's offsets are committed once onBatch wrote everything (not when it throws).
      commit: 'after-batch',
      partitionsConsumedConcurrently: 4,
      onBatch: (batch, context) => this.onBatch(batch, context),
    });
    // After start(): a topic can be paused only once the consumer runs.
    this.backpressure?.start();
  }

  /** Stops consuming; the batch in hand finishes and is committed first. */
  async stop(): Promise<void> {
    await this.backpressure?.stop();
    await this.options.consumer.stop();
  }

  private async onBatch(batch: RecordBatch, { isRunning }: BatchContext) {
    if (!isRunning() || batch.records.length === 0) return;
    const timer = batchSeconds.startTimer();
    const now = this.options.redisNow?.() ?? Date.now();
    const spans: Span[] = [];
    const routes = batch.records.map((record) => {
      const trace = onceTrace(traceRoute(record, spans));
      return { record, trace, route: this.route(record, now, trace) };
    });
    try {
      const { entry, cancellations, fences: fenceStore, logger } = this.options;
      if (entry) await this.defaultDeadlines(routes, entry, now);
      if (entry) await admitClaims(routes, entry, logger);
      const debounced = this.options.debounces
        ? await debounceBatch(
            routes,
            this.options.debounces,
            now,
            this.options.horizonMs,
            (record) => this.relayed(record),
            logger,
          )
        : undefined;
      const woken = cancellations
        ? await wakeCancelled(routes, now, {
            cancellations,
            contract: this.contract,
            inlineMaxBytes: this.options.inlineMaxBytes,
          })
        : new Set<SourceRecord>();
      const fences = fenceStore
        ? await fenceBatch(routes, woken, fenceStore, (record) => this.relayed(record), logger)
        : undefined;
      // Before the tasks are published: a task names its copy only once the copy is written.
      await this.bodies?.copy(routes);
      // The journal's time of routing is the write's start: once the rows are in, a relay may
      // relay one (and journal it) before this batch's events are emitted.
      const routedAt = Date.now();
      await this.writer.write(routes);
      if (cancellations) await wakeCancelledRows(routes, cancellations, this.options.outbox, logger);
      // After the rows the fences name are in the outbox, before the commit: a crash in between
      // replays the batch, which reads the same fences and decides the same way.
      if (fences && fences.size > 0) await this.options.fences?.write(fences);
      for (const { record, route } of routes)
        this.journalRouted(route, record, debounced?.get(record), routedAt);
    } catch (err) {
      for (const span of spans) span.setStatus({ code: SpanStatusCode.ERROR });
      throw err;
    } finally {
      for (const span of spans) span.end();
    }
    timer();
  }

  /**
   * A record that did not come from the ingress (POST /request marks its records), the relay or a
   * DLQ replay was written to `in` straight by a producer: its journal starts here, `accepted`
   * over Kafka. Then, put off to the end of its debounce burst, `held` by debounce; then where it went.
   */
  private journalRouted(
    route: Route,
    record: KafkaRecord,
    debouncedUntil: number | undefined,
    at: number,
  ): void {
    const { journal } = this.options;
    if (!journal || route.kind === 'invalid') return;
    const { requestId, client } = route.envelope.meta;
    if (!Object.keys(record.headers).some((name) => JOURNALED_BY_HEADERS.has(name)))
      journal.emit({ type: 'accepted', requestId, client, channel: 'kafka', at });
    if (debouncedUntil !== undefined)
      journal.emit({ type: 'held', requestId, client, by: 'debounce', until: debouncedUntil, at });
    const due = route.kind === 'queue' ? route.task.dueAt : route.row.dueAt.getTime();
    journal.emit({
      type: 'routed',
      requestId,
      client,
      to: route.kind === 'queue' ? 'redis' : 'outbox',
      due,
      at,
    });
  }

  /**
   * A record a producer wrote straight to `in` without a deadline of its own is routed again with
   * the operator's defaults, as the HTTP door applies them: its claimed client's key's, its
   * destination's (the earlier binds). A record Requester signed keeps the deadline it came with,
   * so a task coming back from the outbox is not given a new one. Throws when the keys or the
   * destinations cannot be read: the batch is retried.
   */
  private async defaultDeadlines(
    routes: Array<{ record: SourceRecord; trace: TraceRoute; route: Route }>,
    entry: KafkaEntry,
    now: number,
  ): Promise<void> {
    const undated = routes.filter(
      ({ route }) => route.kind !== 'invalid' && route.envelope.meta.deadline === undefined,
    );
    const clients = new Set(
      undated.flatMap(({ route }) => (route.kind === 'invalid' ? [] : (route.envelope.meta.client ?? []))),
    );
    const byClient =
      clients.size > 0 && entry.clients.deadlines
        ? await entry.clients.deadlines(clients)
        : new Map<string, string>();
    for (const routed of undated) {
      const { route, record } = routed;
      if (route.kind === 'invalid') continue;
      const { client, destination } = route.envelope.meta;
      const fromDestination =
        destination === undefined
          ? undefined
          : (await entry.destinations?.current(destination))?.spec.deadline;
      const defaults = [client === undefined ? undefined : byClient.get(client), fromDestination];
      if (defaults.every((d) => d === undefined) || this.signed(record)) continue;
      routed.route = this.route(record, now, routed.trace, defaults);
    }
  }

  /** routeRecord, with a bug on strange input confined to its record (answered `internal`). */
  private route(
    record: SourceRecord,
    now: number,
    trace: TraceRoute,
    defaultDeadlines?: ReadonlyArray<string | undefined>,
  ): Route {
    try {
      const { horizonMs, inlineMaxBytes } = this.options;
      const stagedDueAt = this.stagedDueAt(record);
      const signed = () => this.signed(record);
      return routeRecord(record, this.contract, {
        now,
        horizonMs,
        trace,
        inlineMaxBytes,
        stagedDueAt,
        signed,
        ...(defaultDeadlines ? { defaultDeadlines } : {}),
      });
    } catch (err) {
      this.options.logger.error(
        { err, partition: record.partition, offset: record.offset },
        'routing a record failed',
      );
      const message = `the record could not be routed: ${asRequesterError(err).message}`;
      return { kind: 'invalid', result: errorResult(undefined, 'internal', message) };
    }
  }

  /**
   * The due time the relay stamped on an outbox row it put back on `in` (it may stage rows ahead of
   * it: RELAY_STAGE_AHEAD). Believed only on a record Requester signed: a producer writing `in`
   * straight cannot park a task in Redis beyond REDIS_HORIZON by setting a header. Without Kafka
   * entry (tests of routing alone) every record is trusted, as its client claim is.
   */
  private stagedDueAt(record: SourceRecord): number | undefined {
    const text = headerText(record.headers, RELAY_DUE_AT_HEADER);
    if (text === undefined || !this.relayed(record)) return undefined;
    const ms = Date.parse(text);
    return Number.isFinite(ms) ? ms : undefined;
  }

  /** Whether one of Requester's own writers signed the record (no Kafka entry, in tests of routing alone: none). */
  private signed(record: SourceRecord): boolean {
    return this.options.entry?.signer.verify(record.value, record.headers) === true;
  }

  /**
   * Whether the record is a relay's copy of an outbox row (its header), believed only when
   * Requester signed it, as its staged due time is. A relayed copy is never fenced again (it is the
   * earlier record a fence waits for; fencing it would send it round the outbox forever), and only
   * a relayed copy lifts a fence.
   */
  private relayed(record: SourceRecord): boolean {
    if (headerText(record.headers, RELAYED_FROM_HEADER) !== 'outbox') return false;
    const { entry } = this.options;
    return !entry || entry.signer.verify(record.value, record.headers);
  }
}

/** A record's trace span, started once however often the record is routed (a default deadline routes it again). */
function onceTrace(trace: TraceRoute): TraceRoute {
  let started: { traceparent: string | undefined } | undefined;
  return (envelope) => {
    started ??= { traceparent: trace(envelope) };
    return started.traceparent;
  };
}

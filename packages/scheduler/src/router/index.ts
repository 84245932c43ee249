import { breakerFromConfig } from '@requester/policies';
import { queueFromConfig } from '@requester/queue';
import { Cancellations } from '@requester/shared/cancel';
import { bodiesTopicOf, routerGroupOf } from '@requester/shared/config';
import {
  createRequestContract,
  errorResult,
  isOrderedPartition,
  type RequestContract,
  type RequestEnvelope,
  type UnprocessableAnswer,
  unprocessableAnswer,
} from '@requester/shared/contract';
import { DestinationCatalog, DestinationStore } from '@requester/shared/destinations';
import type { EntrySigner, KafkaEntryClients } from '@requester/shared/entry';
import { asRequesterError, isOutage } from '@requester/shared/errors';
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
import { counter, histogram } from '@requester/shared/metrics';
import { Outbox, type OutboxRow } from '@requester/shared/outbox';
import type { RoleDefinition, RoleHandle } from '@requester/shared/role';
import { queuePartition } from '@requester/shared/task';
import {
  firstTraceparent,
  kafkaAttributes,
  type Span,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceparentHeader,
  traceparentOf,
  tracingEnabled,
} from '@requester/shared/tracing';
import {
  Backpressure,
  type BackpressureRules,
  backpressureRules,
  type OpenOriginInfo,
} from './backpressure.ts';
import { BodyCopies } from './bodies.ts';
import { Fences } from './fence.ts';
import {
  type Fence,
  fenceRoute,
  type QueueTask,
  type Route,
  routeRecord,
  type SourceRecord,
  type TraceRoute,
} from './route.ts';
import { startRouterSamplers } from './samplers.ts';

const routed = counter('router_records_total', 'records of in routed, by destination', ['destination']);
const refused = counter(
  'router_refused_total',
  'records of in the queue or outbox refused (answered with an error result and dead-lettered)',
  ['destination'],
);
const fenced = counter(
  'router_fenced_total',
  'records of ordered partitions the queue would have taken, sent to the outbox behind their partition fence',
);
const batchSeconds = histogram('router_batch_seconds', 'time to route one fetched batch of in');

/** Where routed tasks go: the Redis queue (FairQueue.publish satisfies this). */
export interface TaskSink {
  publish(tasks: QueueTask[]): Promise<unknown>;
}

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
   * The bodies topic: big records an outside producer batched with others are copied there, each
   * in a batch of its own, and their tasks point at the copy (see BodyCopies). Absent = no copies.
   */
  topicBodies?: string;
}

export interface KafkaEntry {
  /** Verifies the signature Requester's own writers of `in` put on their records. */
  signer: Pick<EntrySigner, 'verify'>;
  /**
   * The clients an unsigned record may claim (keys marked for Kafka entry), with their credentials
   * scopes and default deadlines.
   */
  clients: Pick<KafkaEntryClients, 'scopes'> & Partial<Pick<KafkaEntryClients, 'deadlines'>>;
  /** KAFKA_ENTRY=report: a claim that would be refused is only logged and counted (upgrades). */
  reportOnly?: boolean;
  /**
   * KAFKA_ANONYMOUS_CREDENTIALS: credentials any record written straight to `in` may name, with or
   * without a client. Others only a claimed client whose key's credentials scope lists them.
   */
  anonymousCredentials?: ReadonlySet<string>;
  /**
   * The destinations a record may name: a destination's credential is a credential the record
   * names (the same rule), since its calls carry it.
   */
  destinations?: Pick<DestinationCatalog, 'current'>;
}

const refusedClaims = counter(
  'router_refused_claims_total',
  'records written straight to in that claimed a meta.client not allowed for Kafka entry: refused (answered forbidden and dead-lettered), or reported (KAFKA_ENTRY=report: let through)',
  ['action'],
);

const refusedCredentials = counter(
  'router_refused_credentials_total',
  'records written straight to in that named a credential (meta.credentials, meta.signing.keyId) their claimed client may not use, or that no client was claimed for and KAFKA_ANONYMOUS_CREDENTIALS does not list: refused (answered forbidden and dead-lettered), or reported (KAFKA_ENTRY=report: let through)',
  ['action'],
);

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

  constructor(options: RouterOptions) {
    this.options = options;
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
    const now = Date.now();
    const spans: Span[] = [];
    const routes = batch.records.map((record) => {
      const trace = onceTrace(this.traceRoute(record, spans));
      return { record, trace, route: this.route(record, now, trace) };
    });
    try {
      await this.defaultDeadlines(routes, now);
      await this.admitClaims(routes);
      const woken = await this.wakeCancelled(routes, now);
      const fences = await this.fence(routes, woken);
      // Before the tasks are published: a task names its copy only once the copy is written.
      await this.bodies?.copy(routes);
      await this.write(routes);
      // After the rows the fences name are in the outbox, before the commit: a crash in between
      // replays the batch, which reads the same fences and decides the same way.
      if (fences && fences.size > 0) await this.options.fences?.write(fences);
      for (const { record, route } of routes) this.journalRouted(route, record);
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
   * over Kafka. Then where it went.
   */
  private journalRouted(route: Route, record: KafkaRecord): void {
    const { journal } = this.options;
    if (!journal || route.kind === 'invalid') return;
    const { requestId, client } = route.envelope.meta;
    if (!Object.keys(record.headers).some((name) => JOURNALED_BY_HEADERS.has(name)))
      journal.emit({ type: 'accepted', requestId, client, channel: 'kafka' });
    const due = route.kind === 'queue' ? route.task.dueAt : route.row.dueAt.getTime();
    journal.emit({ type: 'routed', requestId, client, to: route.kind === 'queue' ? 'redis' : 'outbox', due });
  }

  /**
   * A CONSUMER span per record routed (not one per batch with links): each record is its own
   * trace, and the queue wait and attempt hang under this span, so the trace stays one tree. Its
   * parent is the record's `traceparent` header (a direct producer's, or the relay's), else
   * `meta.traceparent` (the ingress's).
   */
  private traceRoute(record: RecordBatch['records'][number], spans: Span[]): TraceRoute {
    return (envelope) => {
      if (!tracingEnabled()) return undefined;
      const parent = firstTraceparent(traceparentHeader(record.headers), envelope.meta.traceparent);
      const span = startSpan(`process ${record.topic}`, parent, {
        kind: SpanKind.CONSUMER,
        attributes: {
          ...kafkaAttributes('process', record.topic),
          'messaging.destination.partition.id': String(record.partition),
          'messaging.kafka.offset': Number(record.offset),
          'requester.request_id': envelope.meta.requestId,
        },
      });
      spans.push(span);
      return traceparentOf(span);
    };
  }

  /**
   * Kafka entry: a record with a `meta.client` that Requester's own writers did not sign came
   * straight from a producer, and may claim only a client allowed for Kafka entry. Another claim
   * is answered `forbidden` (without the client: the result is nobody's to read over HTTP) and
   * dead-lettered with the raw record, not an envelope, so a DLQ replay (which signs) can never
   * turn it into a trusted one. A PostgreSQL outage fails the batch (retried, uncommitted).
   *
   * Such a record's credentials (`meta.credentials`, `meta.signing.keyId`) follow the HTTP door's
   * rule: its claimed client's key must list them, unless the operator lets every producer of
   * `in` use them (KAFKA_ANONYMOUS_CREDENTIALS). The broker's ACL on `in` is no gate where the
   * broker has none; a record refused this way is answered and dead-lettered alike.
   */
  private async admitClaims(routes: Array<{ record: KafkaRecord; route: Route }>): Promise<void> {
    const { entry } = this.options;
    if (!entry) return;
    const viaDestination = await this.destinationCredentials(routes, entry);
    const claims = routes.flatMap((routed) => {
      const { record, route } = routed;
      if (route.kind === 'invalid') return [];
      const { client, credentials, signing } = route.envelope.meta;
      const named = [credentials, signing?.keyId, viaDestination.get(route)].filter(
        (name): name is string => name !== undefined && !entry.anonymousCredentials?.has(name),
      );
      if (client === undefined && named.length === 0) return [];
      if (entry.signer.verify(record.value, record.headers)) return [];
      return [{ routed, envelope: route.envelope, client, named }];
    });
    if (claims.length === 0) return;
    const clients = new Set(claims.flatMap((claim) => (claim.client === undefined ? [] : [claim.client])));
    const allowed =
      clients.size > 0 ? await entry.clients.scopes(clients) : new Map<string, readonly string[]>();
    for (const { routed, envelope, client, named } of claims) {
      if (client === undefined || allowed.has(client)) {
        const scope = client === undefined ? [] : (allowed.get(client) ?? []);
        const outside = named.filter((name) => !scope.includes(name));
        if (outside.length > 0) this.refuseCredentials(routed, envelope, client, outside);
        continue;
      }
      const { requestId, proxyData } = envelope.meta;
      const { partition, offset } = routed.record;
      if (entry.reportOnly) {
        refusedClaims.inc({ action: 'reported' });
        this.options.logger.warn(
          { requestId, claimedClient: client, partition, offset },
          'a record written straight to in claimed a client not allowed for Kafka entry: let through (KAFKA_ENTRY=report)',
        );
        continue;
      }
      refusedClaims.inc({ action: 'refused' });
      this.options.logger.warn(
        { requestId, claimedClient: client, partition, offset },
        'a record written straight to in claimed a client not allowed for Kafka entry: refused',
      );
      const message =
        `meta.client ${JSON.stringify(client)} may not be claimed by a record written straight to ` +
        'in: only the ingress (from the API key), the relay and DLQ replays set a client, or a key an ' +
        'operator allowed for Kafka entry (requester keys update <key> --kafka-entry); leave meta.client out';
      const result = errorResult(requestId, 'forbidden', message, {
        tryCount: envelope.tryCount ?? 0,
        proxyData,
      });
      routed.route = { kind: 'invalid', result };
    }
  }

  /**
   * The credential each routed record's destination sends (a destination that does not exist is
   * answered by the executor). Throws when the destinations cannot be read: the batch is retried.
   */
  private async destinationCredentials(
    routes: Array<{ record: KafkaRecord; route: Route }>,
    entry: KafkaEntry,
  ): Promise<Map<Route, string>> {
    const found = new Map<Route, string>();
    if (!entry.destinations) return found;
    for (const { route } of routes) {
      const name = route.kind === 'invalid' ? undefined : route.envelope.meta.destination;
      if (name === undefined) continue;
      const credential = (await entry.destinations.current(name))?.spec.credentials;
      if (credential !== undefined) found.set(route, credential);
    }
    return found;
  }

  /** A record written straight to `in` naming credentials it may not use: see admitClaims. */
  private refuseCredentials(
    routed: { record: KafkaRecord; route: Route },
    envelope: RequestEnvelope,
    client: string | undefined,
    outside: readonly string[],
  ): void {
    const { entry } = this.options;
    const { requestId, proxyData } = envelope.meta;
    const { partition, offset } = routed.record;
    const facts = { requestId, claimedClient: client, credentials: outside, partition, offset };
    if (entry?.reportOnly) {
      refusedCredentials.inc({ action: 'reported' });
      this.options.logger.warn(
        facts,
        'a record written straight to in named a credential its client may not use: let through (KAFKA_ENTRY=report)',
      );
      return;
    }
    refusedCredentials.inc({ action: 'refused' });
    this.options.logger.warn(
      facts,
      'a record written straight to in named a credential its client may not use: refused',
    );
    const names = outside.map((name) => JSON.stringify(name)).join(', ');
    const message =
      client === undefined
        ? `credential ${names} may not be used by a record written straight to in without a client: ` +
          'claim a key allowed for Kafka entry whose credentials scope lists it (requester keys update <key> ' +
          '--kafka-entry; keys create --credentials), or an operator lists it in KAFKA_ANONYMOUS_CREDENTIALS'
        : `credential ${names} is not in the credentials scope of ${JSON.stringify(client)} ` +
          '(requester keys create --credentials), nor in KAFKA_ANONYMOUS_CREDENTIALS';
    const result = errorResult(requestId, 'forbidden', message, {
      tryCount: envelope.tryCount ?? 0,
      proxyData,
    });
    routed.route = { kind: 'invalid', result };
  }

  /**
   * A cancelled request (../../shared cancel) bound for the outbox is queued due now instead: the
   * executor that leases it answers it `cancelled` (the one writer of that result), now rather
   * than when it was due. This is also where a cancel's woken outbox rows end, come back through
   * the relay: such a row is due now, but a relayed record is queued for the later of its row's due
   * time and its `meta.scheduled` (see stagedDueAt), so one still due ahead is looked up too. A
   * Redis that does not answer is no cancel: the row is parked, and the executor asks again when it
   * is due.
   */
  private async wakeCancelled(
    routes: Array<{ record: SourceRecord; route: Route }>,
    now: number,
  ): Promise<ReadonlySet<SourceRecord>> {
    const woken = new Set<SourceRecord>();
    const { cancellations, horizonMs: _h, ...options } = this.options;
    if (!cancellations) return woken;
    await Promise.all(
      routes.map(async (routed) => {
        const { route } = routed;
        const relayedAhead =
          route.kind === 'queue' &&
          route.task.dueAt > now &&
          headerText(routed.record.headers, RELAYED_FROM_HEADER) === 'outbox';
        if (route.kind !== 'outbox' && !relayedAhead) return;
        const { client, requestId } = route.envelope.meta;
        const createdAt = route.envelope.createdAt ? Date.parse(route.envelope.createdAt) : undefined;
        const cancelled = await cancellations.find(client, requestId, createdAt).catch(() => undefined);
        if (!cancelled) return;
        if (route.kind === 'queue') {
          routed.route = { ...route, task: { ...route.task, dueAt: now } };
          return;
        }
        const queued = routeRecord(routed.record, this.contract, {
          now,
          horizonMs: Number.POSITIVE_INFINITY,
          ...(options.inlineMaxBytes === undefined ? {} : { inlineMaxBytes: options.inlineMaxBytes }),
        });
        if (queued.kind !== 'queue') return;
        routed.route = { ...queued, task: { ...queued.task, dueAt: now } };
        woken.add(routed.record);
      }),
    );
    return woken;
  }

  /**
   * Folds the batch's records of ordered partitions through their partitions' fences (see
   * fenceRoute), in offset order, so that a record sees the fences set by the ones before it in the
   * batch; returns the fences that changed, for the caller to write once the rows are in the
   * outbox. One read for the batch, none for a batch without ordered partitions. A cancelled
   * request woken out of the outbox path (wakeCancelled) stays in the queue, answered `cancelled`
   * at once, and touches no fence.
   */
  private async fence(
    routes: Array<{ record: SourceRecord; route: Route }>,
    woken: ReadonlySet<SourceRecord>,
  ): Promise<Map<string, Fence | undefined> | undefined> {
    const { fences } = this.options;
    if (!fences) return undefined;
    const ordered = routes.filter(
      ({ record, route }) =>
        route.kind !== 'invalid' && isOrderedPartition(route.envelope.meta.partition) && !woken.has(record),
    );
    if (ordered.length === 0) return undefined;
    // The queue's partition id (client scope included), whether the record goes to the queue or not.
    const partitionOf = (route: Route) => {
      if (route.kind === 'invalid') return '';
      const { client, partition, requestId } = route.envelope.meta;
      return queuePartition(client, partition, requestId);
    };
    const read = await fences.read([...new Set(ordered.map(({ route }) => partitionOf(route)))]);
    const view = new Map<string, Fence | undefined>(read);
    for (const routed of ordered) {
      const partition = partitionOf(routed.route);
      try {
        const next = fenceRoute(
          routed.record,
          routed.route,
          view.get(partition),
          this.relayed(routed.record),
        );
        if (routed.route.kind === 'queue' && next.route.kind === 'outbox') fenced.inc();
        routed.route = next.route;
        view.set(partition, next.fence);
      } catch (err) {
        // A bug on strange input must not fail the batch for ever: the record goes as routed.
        const { partition: kafkaPartition, offset } = routed.record;
        this.options.logger.error({ err, partition: kafkaPartition, offset }, 'fencing a record failed');
      }
    }
    const changed = new Map<string, Fence | undefined>();
    for (const [partition, fence] of view) {
      const before = read.get(partition);
      if (fence?.dueAt !== before?.dueAt || fence?.last !== before?.last) changed.set(partition, fence);
    }
    return changed;
  }

  /**
   * A record a producer wrote straight to `in` without a deadline of its own is routed again with
   * the operator's defaults, as the HTTP door applies them: its claimed client's key's, its
   * destination's (the earlier binds). A record Requester signed keeps the deadline it came with,
   * so a task coming back from the outbox is not given a new one. Throws when the keys or the
   * destinations cannot be read: the batch is retried.
   */
  private async defaultDeadlines(
    routes: Array<{ record: KafkaRecord; trace: TraceRoute; route: Route }>,
    now: number,
  ): Promise<void> {
    const { entry } = this.options;
    if (!entry) return;
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

  private async write(routes: Array<{ record: SourceRecord; route: Route }>): Promise<void> {
    const tasks: QueueTask[] = [];
    const rows: OutboxRow[] = [];
    const answers = new Map<SourceRecord, UnprocessableAnswer>();
    for (const { record, route } of routes) {
      if (route.kind === 'queue') tasks.push(route.task);
      else if (route.kind === 'outbox') rows.push(route.row);
      else answers.set(record, this.answerInvalid(record, route));
    }
    try {
      await Promise.all([
        tasks.length > 0 ? this.options.queue.publish(tasks) : undefined,
        rows.length > 0 ? this.options.outbox.add(rows) : undefined,
      ]);
    } catch (err) {
      if (isOutage(err)) throw err;
      this.options.logger.warn(
        { err },
        'the queue or outbox refused a batch of in: writing it record by record',
      );
      await this.writeOneByOne(routes, answers);
      return;
    }
    await this.answer([...answers.values()]);
    routed.inc({ destination: 'queue' }, tasks.length);
    routed.inc({ destination: 'outbox' }, rows.length);
    routed.inc({ destination: 'invalid' }, answers.size);
  }

  /**
   * After a batch was refused: each record on its own, in offset order, so the ones refused are
   * answered and the others written. An outage on the way fails the batch (writes are idempotent).
   */
  private async writeOneByOne(
    routes: Array<{ record: SourceRecord; route: Route }>,
    invalid: Map<SourceRecord, UnprocessableAnswer>,
  ): Promise<void> {
    const answers: UnprocessableAnswer[] = [];
    for (const { record, route } of routes) {
      const answered = invalid.get(record);
      if (answered) answers.push(answered);
      if (route.kind === 'invalid') continue;
      try {
        if (route.kind === 'queue') await this.options.queue.publish([route.task]);
        else await this.options.outbox.add([route.row]);
        routed.inc({ destination: route.kind });
      } catch (err) {
        if (isOutage(err)) throw err;
        refused.inc({ destination: route.kind });
        answers.push(this.answerRefused(record, route, err));
      }
    }
    await this.answer(answers);
    routed.inc({ destination: 'invalid' }, invalid.size);
  }

  /** Error results to `out`, dead letters to the DLQ. */
  private async answer(answers: UnprocessableAnswer[]): Promise<void> {
    const { producer, topicOut, topicDlq, produceTimeoutMs } = this.options;
    await Promise.all([
      producer.send(
        topicOut,
        answers.map((a) => a.result),
        produceTimeoutMs,
      ),
      topicDlq
        ? producer.send(
            topicDlq,
            answers.map((a) => a.deadLetter),
            produceTimeoutMs,
          )
        : undefined,
    ]);
  }

  /** An invalid record is answered on `out` (keyed by its requestId when readable), never dropped. */
  private answerInvalid(
    record: SourceRecord,
    { result }: Extract<Route, { kind: 'invalid' }>,
  ): UnprocessableAnswer {
    this.options.logger.warn(
      {
        requestId: result.meta.requestId,
        partition: record.partition,
        offset: record.offset,
        problem: result.meta.error?.message,
      },
      'invalid record on in: answered with an error result',
    );
    return unprocessableAnswer(record, result);
  }

  /** A valid request the queue or outbox refused: answered with the refusal, as an error result. */
  private answerRefused(
    record: SourceRecord,
    route: Extract<Route, { kind: 'queue' | 'outbox' }>,
    err: unknown,
  ): UnprocessableAnswer {
    const { envelope } = route;
    const { requestId, proxyData } = envelope.meta;
    const refusal = asRequesterError(err);
    const where = route.kind === 'queue' ? 'the queue' : 'the outbox';
    this.options.logger.error(
      { err, requestId, partition: record.partition, offset: record.offset },
      `${where} refused a request of in: answered with an error result and dead-lettered`,
    );
    const code = refusal.code === 'payload_too_large' ? 'payload_too_large' : 'invalid_request';
    const message = `${where} refused the request: ${refusal.message}`;
    const result = errorResult(requestId, code, message, { tryCount: envelope.tryCount ?? 0, proxyData });
    return unprocessableAnswer(record, result, envelope);
  }
}

/**
 * The router role. With ROUTER_BREAKER_PAUSE_AFTER set, its backpressure also reads the circuit
 * breaker's open origins (the breaker the executors keep, in @requester/policies).
 */
export const routerRole: RoleDefinition = {
  name: 'router',
  async start(ctx): Promise<RoleHandle> {
    const { config, logger, deps } = ctx;
    const producer = await deps.producer();
    const queue = queueFromConfig(config, deps.redis(), { logger });
    const rules = backpressureRules(config);
    // The listing feeds the pause rule (when ROUTER_BREAKER_PAUSE_AFTER is set) and, every
    // METRICS_SAMPLE_INTERVAL, the `breaker_open*` gauges.
    const breaker = breakerFromConfig(config, deps.redis());
    const openOrigins = () => breaker.openOrigins();
    const groupId = routerGroupOf(config);
    const consumer = deps.kafka().consumer({ groupId, sessionTimeoutMs: config.kafkaSessionTimeout });
    deps.consumers.watch(consumer, groupId);
    const destinations = new DestinationStore(await deps.sql());
    const router = new Router({
      consumer,
      queue,
      outbox: new Outbox(await deps.sql()),
      producer,
      topicIn: config.topicIn,
      topicOut: config.topicOut,
      topicDlq: config.topicDlq,
      horizonMs: config.redisHorizon,
      inlineMaxBytes: config.queueInlineBytes,
      produceTimeoutMs: config.kafkaProduceTimeout,
      logger,
      journal: deps.journal(),
      cancellations: new Cancellations(deps.redis(), config.redisPrefix, config.cancelRetention),
      fences: new Fences(deps.redis(), config.redisPrefix),
      ...(config.routerBodyCopies ? { topicBodies: bodiesTopicOf(config) } : {}),
      entry: {
        signer: await deps.entrySigner(),
        clients: await deps.kafkaEntryClients(),
        reportOnly: config.kafkaEntry === 'report',
        anonymousCredentials: config.kafkaAnonymousCredentials,
        destinations: new DestinationCatalog((name) => destinations.get(name), config.credentialsCacheTtl),
      },
      backpressure: {
        ...rules,
        depth: () => queue.pendingDepth(),
        ...(rules.breakerPauseAfterMs > 0 ? { openOrigins } : {}),
      },
    });
    await router.start();
    const samplers = startRouterSamplers({
      queue,
      admin: deps.kafka().admin(),
      groupId,
      topicIn: config.topicIn,
      intervalMs: config.metricsSampleInterval,
      logger,
      openOrigins,
    });
    return {
      drain: async () => {
        await samplers.stop();
        await router.stop();
      },
    };
  },
};

/** A record's trace span, started once however often the record is routed (a default deadline routes it again). */
function onceTrace(trace: TraceRoute): TraceRoute {
  let started: { traceparent: string | undefined } | undefined;
  return (envelope) => {
    started ??= { traceparent: trace(envelope) };
    return started.traceparent;
  };
}

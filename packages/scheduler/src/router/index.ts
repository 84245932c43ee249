import {
  type Consumer,
  counter,
  createConsumer,
  createRequestContract,
  type EachBatchPayload,
  histogram,
  type Logger,
  type Message,
  Outbox,
  type OutboxRow,
  type Producer,
  produce,
  type RequestContract,
  type RoleContext,
  type RoleDefinition,
  type RoleHandle,
} from '@requester/shared';
import { queueFromConfig } from '../queue-config.ts';
import {
  Backpressure,
  type BackpressureRules,
  backpressureRules,
  type OpenOriginInfo,
  pendingDepth,
} from './backpressure.ts';
import { type QueueTask, type Route, routeRecord, type SourceRecord } from './route.ts';

const routed = counter('router_records_total', 'records of in routed, by destination', ['destination']);
const batchSeconds = histogram('router_batch_seconds', 'time to route one fetched batch of in');

/** Where routed tasks go: the Redis queue (FairQueue.publish satisfies this). */
export interface TaskSink {
  publish(tasks: QueueTask[]): Promise<unknown>;
}

export interface RouterOptions {
  consumer: Consumer;
  queue: TaskSink;
  outbox: Outbox;
  producer: Producer;
  topicIn: string;
  topicOut: string;
  horizonMs: number;
  produceTimeoutMs: number;
  logger: Logger;
  contract?: RequestContract;
  /** When to pause consuming `in` (absent = never): see backpressure.ts. */
  backpressure?: RouterBackpressure;
}

export interface RouterBackpressure extends BackpressureRules {
  /** Pending tasks in the queue (pendingDepth of the FairQueue). */
  depth: () => Promise<number>;
  /** Origins whose circuit breaker is open; without it the breaker rule is off. */
  openOrigins?: () => Promise<readonly OpenOriginInfo[]>;
}

/**
 * The router: consumes `in` in batches and sends each record where it belongs (see routeRecord).
 * All writes of a batch go out together (one pipelined queue publish, one outbox insert, one
 * produce of error results); offsets are committed only after every write succeeded, so a crash
 * replays the batch — and replays are harmless because publish and outbox are idempotent by task id.
 */
export class Router {
  private readonly options: RouterOptions;
  private readonly contract: RequestContract;
  private readonly backpressure: Backpressure | undefined;

  constructor(options: RouterOptions) {
    this.options = options;
    this.contract = options.contract ?? createRequestContract();
    const topics = [{ topic: options.topicIn }];
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
    await consumer.connect();
    await consumer.subscribe({ topic: topicIn, fromBeginning: true });
    await consumer.run({
      // Offsets are resolved by hand after the writes; kafkajs then commits what was resolved
      // (autoCommit must stay on for commitOffsetsIfNecessary to commit anything).
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 4,
      eachBatch: (payload) => this.onBatch(payload),
    });
    // After run(): kafkajs can pause a topic only once its consumer group exists.
    this.backpressure?.start();
  }

  /** Stops consuming; the batch in hand finishes and is committed first. */
  async stop(): Promise<void> {
    await this.backpressure?.stop();
    await this.options.consumer.disconnect();
  }

  private async onBatch({
    batch,
    resolveOffset,
    commitOffsetsIfNecessary,
    heartbeat,
    isRunning,
  }: EachBatchPayload) {
    if (!isRunning() || batch.messages.length === 0) return;
    const timer = batchSeconds.startTimer();
    const now = Date.now();
    const routes = batch.messages.map((message) => {
      const record: SourceRecord = {
        topic: batch.topic,
        partition: batch.partition,
        offset: message.offset,
        key: message.key,
        value: message.value,
      };
      return { record, route: routeRecord(record, this.contract, now, this.options.horizonMs) };
    });
    await this.write(routes);
    resolveOffset(batch.lastOffset());
    await commitOffsetsIfNecessary();
    await heartbeat();
    timer();
  }

  private async write(routes: Array<{ record: SourceRecord; route: Route }>): Promise<void> {
    const tasks: QueueTask[] = [];
    const rows: OutboxRow[] = [];
    const errors: Message[] = [];
    for (const { record, route } of routes) {
      if (route.kind === 'queue') tasks.push(route.task);
      else if (route.kind === 'outbox') rows.push(route.row);
      else errors.push(this.invalidResult(record, route));
    }
    const { queue, outbox, producer, topicOut, produceTimeoutMs } = this.options;
    await Promise.all([
      tasks.length > 0 ? queue.publish(tasks) : undefined,
      rows.length > 0 ? outbox.add(rows) : undefined,
      produce(producer, topicOut, errors, produceTimeoutMs),
    ]);
    routed.inc({ destination: 'queue' }, tasks.length);
    routed.inc({ destination: 'outbox' }, rows.length);
    routed.inc({ destination: 'invalid' }, errors.length);
  }

  /** An invalid record is answered on `out` (keyed by its requestId when readable), never dropped. */
  private invalidResult(record: SourceRecord, { result }: Extract<Route, { kind: 'invalid' }>): Message {
    const requestId = result.meta.requestId;
    this.options.logger.warn(
      { requestId, partition: record.partition, offset: record.offset, problem: result.meta.error?.message },
      'invalid record on in: answered with an error result',
    );
    return { key: requestId ?? null, value: JSON.stringify(result) };
  }
}

/**
 * What the router role needs from outside its package. The breaker lives in the executor package,
 * which depends on this one; so the process wiring (`@requester/requester`) hands its open-origins
 * listing in, instead of this package importing the executor (a cycle).
 */
export interface RouterRoleExtras {
  /** Builds the open-origins listing; called only when ROUTER_BREAKER_PAUSE_AFTER is set. */
  openOrigins?: (ctx: RoleContext) => () => Promise<readonly OpenOriginInfo[]>;
}

export function createRouterRole(extras: RouterRoleExtras = {}): RoleDefinition {
  return {
    name: 'router',
    async start(ctx): Promise<RoleHandle> {
      const { config, logger, deps } = ctx;
      const producer = await deps.producer();
      const queue = queueFromConfig(config, deps.redis(), { logger });
      const rules = backpressureRules(config);
      const openOrigins = rules.breakerPauseAfterMs > 0 ? extras.openOrigins?.(ctx) : undefined;
      if (rules.breakerPauseAfterMs > 0 && !openOrigins)
        logger.warn('ROUTER_BREAKER_PAUSE_AFTER is set but no breaker listing was wired: rule off');
      const router = new Router({
        consumer: createConsumer(deps.kafka(), {
          groupId: `${config.kafkaClientId}-router`,
          sessionTimeout: config.kafkaSessionTimeout,
        }),
        queue,
        outbox: new Outbox(await deps.sql()),
        producer,
        topicIn: config.topicIn,
        topicOut: config.topicOut,
        horizonMs: config.redisHorizon,
        produceTimeoutMs: config.kafkaProduceTimeout,
        logger,
        backpressure: { ...rules, depth: () => pendingDepth(queue), ...(openOrigins ? { openOrigins } : {}) },
      });
      await router.start();
      return { drain: () => router.stop() };
    },
  };
}

/** The router without the breaker rule (for processes that wire nothing else). */
export const routerRole: RoleDefinition = createRouterRole();

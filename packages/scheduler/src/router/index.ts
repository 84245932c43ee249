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
  type RoleDefinition,
  type RoleHandle,
} from '@requester/shared';
import { queueFromConfig } from '../queue-config.ts';
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

  constructor(options: RouterOptions) {
    this.options = options;
    this.contract = options.contract ?? createRequestContract();
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
  }

  /** Stops consuming; the batch in hand finishes and is committed first. */
  async stop(): Promise<void> {
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

export const routerRole: RoleDefinition = {
  name: 'router',
  async start({ config, logger, deps }): Promise<RoleHandle> {
    const producer = await deps.producer();
    const router = new Router({
      consumer: createConsumer(deps.kafka(), { groupId: `${config.kafkaClientId}-router` }),
      queue: queueFromConfig(config, deps.redis(), { logger }),
      outbox: new Outbox(await deps.sql()),
      producer,
      topicIn: config.topicIn,
      topicOut: config.topicOut,
      horizonMs: config.redisHorizon,
      produceTimeoutMs: config.kafkaProduceTimeout,
      logger,
    });
    await router.start();
    return { drain: () => router.stop() };
  },
};

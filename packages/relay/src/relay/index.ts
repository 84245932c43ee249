import {
  type ClaimedRow,
  counter,
  DEFAULT_LEASE_MS,
  type Logger,
  Outbox,
  type Producer,
  produce,
  type RoleDefinition,
  type RoleHandle,
} from '@requester/shared';

const moved = counter('relay_moved_total', 'outbox rows produced to Kafka in and deleted');
const failures = counter('relay_failures_total', 'failed outbox deliveries (rows stay for the next claim)');

/** Longest a relay sleeps without news: a safety net for a lost NOTIFY, not the wake-up mechanism. */
const MAX_IDLE_MS = 5_000;
/** Shortest time between two error lines of a lasting outage. */
const ERROR_LOG_INTERVAL_MS = 60_000;

export interface RelayOptions {
  outbox: Outbox;
  producer: Producer;
  logger: Logger;
  workers: number;
  batch: number;
  produceTimeoutMs: number;
}

/**
 * Moves due outbox rows back into Kafka `in`. N workers claim disjoint rows (SKIP LOCKED); a
 * worker that finds nothing due sleeps until the earliest due time, and is woken early by NOTIFY
 * when a row with an earlier due time is added.
 */
export class Relay {
  private readonly options: RelayOptions;
  private stopping = false;
  private wakeAt = 0;
  private readonly sleepers = new Set<() => void>();
  private loops: Array<Promise<void>> = [];
  private unlisten: (() => Promise<void>) | undefined;
  /** Failed delivery rounds since the last one that worked, all workers together. */
  private failedInARow = 0;
  private lastErrorLogAt = Number.NEGATIVE_INFINITY;

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
    await this.unlisten?.();
  }

  private onAdded(dueMs: number): void {
    if (dueMs <= this.wakeAt || this.wakeAt === 0) this.wakeAll();
  }

  private async loop(worker: number): Promise<void> {
    const { outbox, logger } = this.options;
    while (!this.stopping) {
      try {
        const delivered = await outbox.deliverDue(
          this.options.batch,
          (rows) => this.deliver(rows),
          this.leaseMs,
        );
        if (delivered > 0) {
          this.recovered();
          moved.inc(delivered);
          continue;
        }
        const next = await outbox.nextDueAt();
        await this.sleep(
          next === undefined ? MAX_IDLE_MS : Math.min(MAX_IDLE_MS, Math.max(0, next - Date.now())),
        );
      } catch (err) {
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
    await Promise.all(
      [...byTopic].map(([topic, topicRows]) =>
        produce(
          this.options.producer,
          topic,
          topicRows.map((row) => ({
            key: row.key,
            value: row.payload,
            headers: { 'requester-relayed-from': 'outbox', 'requester-due-at': row.dueAt.toISOString() },
          })),
          this.options.produceTimeoutMs,
        ),
      ),
    );
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
    const relay = new Relay({
      outbox: new Outbox(await deps.sql()),
      producer: await deps.producer(),
      logger,
      workers: config.relayWorkers,
      batch: config.relayBatch,
      produceTimeoutMs: config.kafkaProduceTimeout,
    });
    await relay.start();
    return { drain: () => relay.stop() };
  },
};

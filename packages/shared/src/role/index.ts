import { bodiesTopicOf, type Config } from '../config/index.ts';
import { type EntrySigner, KafkaEntryClients, loadEntrySigner } from '../entry/index.ts';
import { RequesterError } from '../errors/index.ts';
import { createJournal, type Journal } from '../journal/index.ts';
import {
  ConsumerHealth,
  createKafka,
  explainKafkaError,
  type KafkaAdmin,
  type KafkaClient,
  type KafkaProducer,
  kafkaSecurityFrom,
} from '../kafka/index.ts';
import type { Logger } from '../log/index.ts';
import { createPg, ensureDatabase, explainPgError, migrate, type Sql } from '../pg/index.ts';
import { checkRedisPersistence, createRedis, explainRedisError, type RedisClient } from '../redis/index.ts';
import { settledWithin } from '../time/index.ts';
import type { RoleName } from './names.ts';

/** Longest shutdown waits for the task journal's last events. */
const JOURNAL_CLOSE_MS = 2_000;

export * from './names.ts';

/** How long a process waits at start for Redis to answer before it gives up and exits. */
const REDIS_START_WAIT_MS = 300_000;

/**
 * A running role. Shutdown happens in phases across all roles of the process (docs/architecture.md §5):
 * first every role stops accepting (HTTP closes), then every role drains what it holds, then the
 * shared clients close.
 */
export interface RoleHandle {
  /** Phase 1: stop taking new work from outside (e.g. close the HTTP listener). */
  stopAccepting?(): Promise<void>;
  /** Phase 2: stop consuming/leasing and finish the work in hand. */
  drain(): Promise<void>;
}

export interface RoleContext {
  config: Config;
  logger: Logger;
  deps: Dependencies;
}

/** A role; `Handle`: what its start returns, when the process may ask more of it than shutdown. */
export interface RoleDefinition<Handle extends RoleHandle = RoleHandle> {
  name: RoleName;
  start(ctx: RoleContext): Promise<Handle>;
}

/**
 * The external clients of one process, each created on first use, shared by every role in the
 * process, checked by /readyz and closed once at the end of shutdown.
 */
export class Dependencies {
  private readonly config: Config;
  private readonly logger: Logger;
  private kafkaClient: KafkaClient | undefined;
  private producerPromise: Promise<KafkaProducer> | undefined;
  private redisClient: RedisClient | undefined;
  private sqlPromise: Promise<Sql> | undefined;
  private entrySignerPromise: Promise<EntrySigner> | undefined;
  private entryClients: Promise<KafkaEntryClients> | undefined;
  private topicsPromise: Promise<void> | undefined;
  private journalWriter: Journal | undefined;
  private journalProducerPromise: Promise<KafkaProducer> | undefined;
  private probeAdmin: { admin: KafkaAdmin; connected: Promise<void>; up: boolean } | undefined;
  /** The crash record of the process's consumers: roles `watch` theirs, /readyz reports it. */
  readonly consumers: ConsumerHealth;

  constructor(config: Config, logger: Logger) {
    this.config = config;
    this.logger = logger;
    this.consumers = new ConsumerHealth({ logger });
  }

  kafka(): KafkaClient {
    this.kafkaClient ??= createKafka({
      brokers: this.config.kafkaBrokers,
      clientId: this.config.kafkaClientId,
      logger: this.logger,
      produceTimeoutMs: this.config.kafkaProduceTimeout,
      security: kafkaSecurityFrom(this.config),
    });
    return this.kafkaClient;
  }

  /** Creates the in/out/dlq/events/bodies topics when missing (once per process; KAFKA_CREATE_TOPICS=false skips). */
  topics(): Promise<void> {
    this.topicsPromise ??= retryable(
      async () => {
        if (!this.config.createTopics) return;
        const admin = this.kafka().admin();
        await admin.connect();
        try {
          const { topicPartitions: numPartitions, topicReplication: replicationFactor } = this.config;
          const created = await admin.ensureTopics(
            [
              this.config.topicIn,
              this.config.topicOut,
              this.config.topicDlq,
              this.config.topicEvents,
              bodiesTopicOf(this.config),
            ].map((topic) => ({
              topic,
              numPartitions,
              replicationFactor,
              configEntries: [{ name: 'max.message.bytes', value: String(this.config.kafkaMaxMessageBytes) }],
            })),
          );
          if (created.length > 0) this.logger.info({ topics: created }, 'created Kafka topics');
        } finally {
          await admin.disconnect();
        }
      },
      () => {
        this.topicsPromise = undefined;
      },
    );
    return this.topicsPromise;
  }

  /**
   * The process's task journal writer (EVENTS), one for all its roles; flushed at close. It has a
   * producer of its own: on the shared one, its batches would queue the results and `in` records
   * behind them on the same broker connection.
   */
  journal(): Journal {
    this.journalWriter ??= createJournal({
      producer: () => this.journalProducer(),
      topic: this.config.topicEvents,
      mode: this.config.events,
      logger: this.logger.child({ component: 'journal' }),
      produceTimeoutMs: this.config.kafkaProduceTimeout,
    });
    return this.journalWriter;
  }

  private journalProducer(): Promise<KafkaProducer> {
    this.journalProducerPromise ??= retryable(
      () => this.connectedProducer(),
      () => {
        this.journalProducerPromise = undefined;
      },
    );
    return this.journalProducerPromise;
  }

  producer(): Promise<KafkaProducer> {
    this.producerPromise ??= retryable(
      () => this.connectedProducer(),
      () => {
        this.producerPromise = undefined;
      },
    );
    return this.producerPromise;
  }

  /** A producer of its own, once the topics exist. */
  private async connectedProducer(): Promise<KafkaProducer> {
    await this.topics();
    const producer = this.kafka().producer();
    await producer.connect();
    return producer;
  }

  redis(): RedisClient {
    if (this.redisClient) return this.redisClient;
    this.redisClient = createRedis({
      url: this.config.redisUrl,
      cluster: this.config.redisCluster,
      failoverRetryMs: this.config.redisFailoverRetry,
      commandTimeoutMs: this.config.redisCommandTimeout,
      connectionName: 'requester',
      logger: this.logger,
    });
    // Once connected: a cluster client knows its masters only then.
    const client = this.redisClient;
    client.once('ready', () => void checkRedisPersistence(client, this.logger));
    return this.redisClient;
  }

  /** The PostgreSQL pool; the database is created and migrated on first use. */
  sql(): Promise<Sql> {
    this.sqlPromise ??= retryable(
      async () => {
        if (await ensureDatabase(this.config.databaseUrl))
          this.logger.info('created the PostgreSQL database');
        const sql = createPg({
          url: this.config.databaseUrl,
          max: this.config.pgPoolMax,
          statementTimeoutMs: this.config.pgStatementTimeout,
        });
        await migrate(sql, this.logger);
        return sql;
      },
      () => {
        this.sqlPromise = undefined;
      },
    );
    return this.sqlPromise;
  }

  /**
   * The signer of the `in` records this process writes or routes (docs/architecture.md §10): its
   * secret is read from PostgreSQL once, and created there by the first process that asks.
   */
  entrySigner(): Promise<EntrySigner> {
    this.entrySignerPromise ??= retryable(
      async () => loadEntrySigner(await this.sql()),
      () => {
        this.entrySignerPromise = undefined;
      },
    );
    return this.entrySignerPromise;
  }

  /** The client names a record written straight to `in` may claim (keys marked for Kafka entry). */
  kafkaEntryClients(): Promise<KafkaEntryClients> {
    this.entryClients ??= retryable(
      async () => new KafkaEntryClients(await this.sql(), { ttlMs: this.config.authCacheTtl }),
      () => {
        this.entryClients = undefined;
      },
    );
    return this.entryClients;
  }

  /**
   * Fails when Redis refuses this process's credentials. Kafka and PostgreSQL already fail the
   * roles' start on a refused login; a Redis client only meets it at its first command, and a
   * process that waits for a password to become right would wait forever. Other errors (Redis
   * down) pass: the roles wait for Redis to come back, as they always did.
   */
  async checkCredentials(): Promise<void> {
    if (!this.redisClient) return;
    try {
      await this.redisClient.ping();
    } catch (err) {
      const why = explainRedisError(err);
      if (why) throw new RequesterError('dependency_unavailable', why, { cause: err });
    }
  }

  /**
   * Resolves once Redis answers (a Redis Cluster: once the client knows which node serves each
   * slot). Roles load scripts and subscribe as they start: on a Redis still starting (a fresh
   * cluster still agreeing on its slots, a node restarting under load) that first command fails,
   * and the process would exit for what a moment's wait fixes. Refused credentials fail at once;
   * anything else is retried with backoff, logged every 10 s, for up to `maxWaitMs`.
   */
  async redisAnswers(maxWaitMs = REDIS_START_WAIT_MS): Promise<void> {
    const client = this.redis();
    const started = Date.now();
    let loggedAt = started;
    for (let attempt = 0; ; attempt++) {
      try {
        await client.ping();
        if (attempt > 0)
          this.logger.info({ waitedMs: Date.now() - started }, 'Redis answers: starting the roles');
        return;
      } catch (err) {
        const why = explainRedisError(err);
        if (why) throw new RequesterError('dependency_unavailable', why, { cause: err });
        const waited = Date.now() - started;
        if (waited >= maxWaitMs)
          throw new RequesterError(
            'dependency_unavailable',
            `Redis did not answer within ${Math.round(waited / 1000)} s of the start (REDIS_URL): ${(err as Error).message}`,
            { cause: err },
          );
        if (Date.now() - loggedAt >= 10_000 || attempt === 0) {
          loggedAt = Date.now();
          this.logger.warn({ err, waitedMs: waited }, 'waiting for Redis before starting the roles');
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
      }
    }
  }

  /**
   * Each dependency this process has opened, and whether it answers now; `consumers`: whether the
   * watched Kafka consumers run (none crash-loops, see ConsumerHealth).
   */
  async readiness(): Promise<Record<string, boolean>> {
    const checks: Array<[string, Promise<unknown>]> = [];
    if (this.redisClient) checks.push(['redis', this.redisClient.ping()]);
    if (this.sqlPromise) checks.push(['postgres', this.sqlPromise.then((sql) => sql`select 1`)]);
    if (this.kafkaClient) checks.push(['kafka', this.kafkaBrokersAnswer()]);
    const results = await Promise.all(
      checks.map(
        async ([name, check]) => [name, (await settledWithin(check, 2_000)) === 'fulfilled'] as const,
      ),
    );
    if (this.consumers.watching) results.push(['consumers', this.consumers.ready]);
    return Object.fromEntries(results);
  }

  /**
   * One admin connection kept for /readyz: a probe every few seconds must not open and close a
   * connection (and fetch metadata) each time. A failed probe drops it; the next one reconnects.
   */
  private async kafkaBrokersAnswer(): Promise<void> {
    if (!this.probeAdmin) {
      const admin = this.kafka().admin();
      const probe = { admin, connected: admin.connect(), up: false };
      void probe.connected.then(() => (probe.up = true)).catch(() => {});
      this.probeAdmin = probe;
    }
    const probe = this.probeAdmin;
    try {
      await probe.connected;
      await probe.admin.ping(this.config.topicIn);
    } catch (err) {
      if (this.probeAdmin === probe) this.probeAdmin = undefined;
      void probe.admin.disconnect().catch(() => {});
      throw err;
    }
  }

  /** Phase 3 of shutdown: close every client that was opened. */
  async close(): Promise<void> {
    // The journal's last events, but not at any price: with Kafka away, shutdown must not wait a
    // produce timeout for them (they are counted as dropped by then anyway).
    if (this.journalWriter) await settledWithin(this.journalWriter.close(), JOURNAL_CLOSE_MS);
    const closing: Array<Promise<unknown>> = [];
    if (this.producerPromise) closing.push(this.producerPromise.then((p) => p.disconnect()));
    if (this.journalProducerPromise) closing.push(this.journalProducerPromise.then((p) => p.disconnect()));
    // A probe connection still trying to reach a dead broker would hold shutdown for the client's
    // whole retry schedule: let it go instead of waiting for it.
    if (this.probeAdmin?.up) closing.push(this.probeAdmin.admin.disconnect());
    else void this.probeAdmin?.admin.disconnect().catch(() => {});
    if (this.redisClient) closing.push(this.redisClient.quit());
    if (this.sqlPromise) closing.push(this.sqlPromise.then((sql) => sql.end({ timeout: 5 })));
    const results = await Promise.allSettled(closing);
    for (const r of results)
      if (r.status === 'rejected') this.logger.warn({ err: r.reason }, 'error while closing a client');
  }
}

/**
 * A dependency error in the operator's terms, naming the system and the variables to check, when
 * it is one of the known refusals (credentials, TLS); looks through wrapped causes.
 */
export function explainDependencyError(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const why = explainKafkaError(e) ?? explainRedisError(e) ?? explainPgError(e);
    if (why) return why;
  }
  return undefined;
}

/** Runs `create` once; when it fails, `forget` clears the memo so the next caller tries again. */
function retryable<T>(create: () => Promise<T>, forget: () => void): Promise<T> {
  return create().catch((err: unknown) => {
    forget();
    throw err;
  });
}

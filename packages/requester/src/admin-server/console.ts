import { KeyAccess, KeyStore } from '@requester/ingress';
import { breakerFromConfig, type CircuitBreaker } from '@requester/policies';
import { type FairQueue, QueueAdmin, queueFromConfig } from '@requester/queue';
import {
  type Config,
  CredentialStore,
  type Dependencies,
  DestinationStore,
  type Fetcher,
  type Logger,
  masterKeysFromConfig,
  Outbox,
} from '@requester/shared';
import { type AdminActionEvent, recordAdminAction } from '../ops/audit.ts';
import { cancelById } from '../ops/cancel/index.ts';
import { credentialOriginsOf } from '../ops/destinations/index.ts';
import { HandledDeadLetters } from '../ops/dlq/index.ts';
import type { DlqSource } from '../ops/dlq/topic.ts';
import type { KeysParts } from '../ops/keys/index.ts';
import type { OriginParts } from '../ops/origins/index.ts';
import { type OutboxView, outboxInfo } from '../ops/outbox/index.ts';
import { LiveMetrics } from '../ops/overview/live.ts';
import { listPauses, type PauseParts, type PauseTarget, pauseWork, resumeWork } from '../ops/pause/index.ts';
import {
  type CancellableState,
  cancelMatching,
  type TaskFilter,
  type TaskState,
  tasksPage,
} from '../ops/tasks/index.ts';
import type { Operator } from './operator.ts';
import { AdminSessions } from './sessions.ts';

export { mayReveal, type Operator } from './operator.ts';

/** One event of a request's journal (the task journal's reader, `readJournal`). */
export type JournalEvent = Record<string, unknown>;

export interface AdminConsoleOptions {
  config: Config;
  deps: Dependencies;
  logger: Logger;
  /**
   * The result (raw JSON from `out`) this process's sync-gateway holds for a client's requestId
   * (requestIds are per client; `client` undefined: a request without `meta.client`).
   */
  peekResult?(requestId: string, client: string | undefined): string | undefined;
  /**
   * The task journal's reader by requestId (or a destination's subject), from `sinceMs` (default: the
   * last hour); without it the request page says "journal not enabled".
   */
  events?(requestId: string, sinceMs?: number): Promise<JournalEvent[]>;
  /** The journal hook of operator actions (see recordAdminAction). */
  journalAdminAction?(event: AdminActionEvent): Promise<void>;
}

/** How long outbox counts are reused (counting reads the whole table). */
const OUTBOX_STATS_TTL_MS = 10_000;

/**
 * What the admin API and the operator UI work with, in the process they run in: its clients
 * (Redis, PostgreSQL, Kafka), opened on first use and kept, who the operator is, and the record
 * of their actions. The features' `api.ts` and `ui.ts` (ops/<feature>/) run their operations on
 * these.
 */
export class AdminConsole {
  readonly live = new LiveMetrics();
  readonly #options: AdminConsoleOptions;
  #queue: FairQueue | undefined;
  /** Reads head requests from `in` for the partitions page (polled every 5 s): one, kept open. */
  #inReader: Fetcher | undefined;
  #breaker: CircuitBreaker | undefined;
  #access: KeyAccess | undefined;
  #outboxCache: { at: number; view: Promise<OutboxView> } | undefined;
  #sessions: AdminSessions | undefined;

  constructor(options: AdminConsoleOptions) {
    this.#options = options;
    // From the start, so the overview's chart has history when someone opens it.
    this.live.start();
  }

  get config(): Config {
    return this.#options.config;
  }

  get deps(): Dependencies {
    return this.#options.deps;
  }

  /** The operator an API key token names, or undefined (unknown, revoked, no admin scope). */
  async identify(token: string | undefined): Promise<Operator | undefined> {
    if (!token) return undefined;
    const { config, deps } = this.#options;
    this.#access ??= new KeyAccess({
      find: async (id) => new KeyStore(await deps.sql()).find(id),
      cacheTtlMs: config.authCacheTtl,
      horizonMs: config.redisHorizon,
      limiter: () => {
        throw new Error('the admin API has no per-key rate');
      },
    });
    const caller = await this.#access.identify(`Bearer ${token}`);
    if (!caller || 'status' in caller || !caller.scopes.admin) return undefined;
    return { name: caller.name, admin: caller.scopes.admin };
  }

  /** The operator UI's login sessions (ADMIN_SESSION_TTL). */
  get sessions(): AdminSessions {
    this.#sessions ??= new AdminSessions(() => this.#options.deps.sql(), this.config.adminSessionTtl);
    return this.#sessions;
  }

  queueAdmin(): QueueAdmin {
    return new QueueAdmin(this.queue());
  }

  queue(): FairQueue {
    this.#queue ??= queueFromConfig(this.config, this.#options.deps.redis(), { notify: false });
    return this.#queue;
  }

  breaker(): CircuitBreaker {
    this.#breaker ??= breakerFromConfig(this.config, this.#options.deps.redis(), { stateCacheMs: 0 });
    return this.#breaker;
  }

  /** The key store and the record of key actions (ops/keys); a weight and a cap also go to the queue. */
  async keysParts(): Promise<KeysParts> {
    const { deps, logger, journalAdminAction } = this.#options;
    return {
      store: new KeyStore(await deps.sql()),
      logger,
      setQueueShare: async (client, share) => {
        if (share.weight !== undefined) await this.queue().setClientWeight(client, share.weight);
        if (share.maxInFlight !== undefined)
          await this.queue().setClientMaxInFlight(client, share.maxInFlight);
      },
      ...(journalAdminAction ? { journalAdminAction } : {}),
    };
  }

  /** What the origins views read (ops/origins): Redis, the settings of the per-origin cap, the breaker. */
  originParts(): OriginParts {
    return { redis: this.#options.deps.redis(), config: this.config, breaker: this.breaker() };
  }

  inReader(): Fetcher {
    this.#inReader ??= this.#options.deps.kafka().fetcher({ connections: 1, cacheBytes: 0 });
    return this.#inReader;
  }

  dlqSource(): DlqSource {
    return { kafka: this.#options.deps.kafka(), topic: this.config.topicDlq };
  }

  async handled(): Promise<HandledDeadLetters> {
    return new HandledDeadLetters(await this.#options.deps.sql());
  }

  /** The outbox's counts, reused for OUTBOX_STATS_TTL_MS. */
  outbox(): Promise<OutboxView> {
    const now = Date.now();
    if (!this.#outboxCache || now - this.#outboxCache.at > OUTBOX_STATS_TTL_MS) {
      const view = this.#options.deps.sql().then((sql) => outboxInfo(new Outbox(sql)));
      this.#outboxCache = { at: now, view };
      view.catch(() => {
        this.#outboxCache = undefined;
      });
    }
    return this.#outboxCache.view;
  }

  /** The result this process's sync-gateway holds (see AdminConsoleOptions.peekResult); null: none runs here. */
  get peekResult(): AdminConsoleOptions['peekResult'] {
    return this.#options.peekResult;
  }

  get events(): AdminConsoleOptions['events'] {
    return this.#options.events;
  }

  /** The process's PostgreSQL pool (the task lists of ops/tasks read the outbox). */
  sql() {
    return this.#options.deps.sql();
  }

  /**
   * Cancels a client's request (ops/cancel). The operations of ops/cancel, ops/pause and ops/tasks
   * record their action themselves (with what they did: first cancel, resumed, requestIds), so
   * these methods hand them the journal hook rather than calling `record`.
   */
  cancel(operator: Operator, client: string | undefined, requestId: string) {
    const { deps, config, logger, journalAdminAction } = this.#options;
    return cancelById(
      {
        redis: deps.redis(),
        sql: () => deps.sql(),
        config,
        logger,
        journal: deps.journal(),
        ...(journalAdminAction ? { journalAdminAction } : {}),
      },
      operator.name,
      client,
      requestId,
    );
  }

  /** One page of a task list (ops/tasks). */
  tasks(state: TaskState, filter: TaskFilter, limit: number, cursor?: string) {
    return tasksPage(this.taskParts(), state, filter, limit, cursor);
  }

  /** Cancels the tasks a selection matches (ops/tasks), or counts them (the preview). */
  cancelTasks(operator: Operator, state: CancellableState, filter: TaskFilter, confirm: boolean) {
    const { deps, config, logger, journalAdminAction } = this.#options;
    return cancelMatching(
      {
        ...this.taskParts(),
        redis: deps.redis(),
        config,
        logger,
        journal: deps.journal(),
        ...(journalAdminAction ? { journalAdminAction } : {}),
      },
      operator.name,
      state,
      filter,
      confirm,
    );
  }

  private taskParts() {
    return { queueAdmin: () => this.queueAdmin(), sql: () => this.sql(), inRecords: this.inReader() };
  }

  /** Pauses in force, pause and resume (ops/pause), recorded as this operator's actions. */
  pauses() {
    return listPauses(this.pauseParts());
  }

  pause(operator: Operator, target: PauseTarget, until: number | null) {
    return pauseWork(this.pauseParts(), operator.name, target, until);
  }

  resume(operator: Operator, target: PauseTarget) {
    return resumeWork(this.pauseParts(), operator.name, target);
  }

  private pauseParts(): PauseParts {
    const { deps, config, logger, journalAdminAction } = this.#options;
    return {
      redis: deps.redis(),
      prefix: config.redisPrefix,
      logger,
      ...(journalAdminAction ? { journalAdminAction } : {}),
    };
  }

  /** A view shown with its secrets: an operator action of its own, on each request it showed. */
  reveal(operator: Operator, view: string, requestIds: Array<string | null>): Promise<void> {
    const shown = [...new Set(requestIds.filter((id): id is string => id !== null && id !== ''))];
    return this.record(operator, 'secrets.reveal', { view, requestIds: shown });
  }

  /** The credential store, with this process's master keys (ops/credentials/api.ts). */
  async credentialStore(): Promise<CredentialStore> {
    return new CredentialStore(await this.#options.deps.sql(), masterKeysFromConfig(this.config));
  }

  async destinationStore(): Promise<DestinationStore> {
    const sql = await this.#options.deps.sql();
    return new DestinationStore(sql, credentialOriginsOf(sql), masterKeysFromConfig(this.config));
  }

  record(
    operator: Operator,
    action: string,
    target: Record<string, unknown>,
    outcome: 'done' | 'failed' = 'done',
  ): Promise<void> {
    return recordAdminAction(
      this.#options.logger,
      { action, actor: operator.name, target, outcome },
      this.#options.journalAdminAction,
    );
  }

  async close(): Promise<void> {
    this.live.stop();
    await Promise.all([this.#queue?.close(), this.#inReader?.close()]);
  }
}

import { KeyAccess, KeyStore } from '@requester/ingress';
import { breakerFromConfig, type CircuitBreaker } from '@requester/policies';
import { type FairQueue, QueueAdmin, queueFromConfig } from '@requester/queue';
import { type Config, type Dependencies, type Fetcher, type Logger, Outbox } from '@requester/shared';
import type { DlqSource } from '../dlq/index.ts';
import { cancelById } from '../ops/cancel/index.ts';
import {
  type AdminActionEvent,
  type DeadLetterView,
  type DlqSelection,
  dlqFilterFrom,
  HandledDeadLetters,
  listBreakers,
  listDeadLetterViews,
  type OutboxView,
  outboxInfo,
  partitionsOverview,
  rateArg,
  recordAdminAction,
  redactResult,
  replayFromDlq,
  resetBreaker,
  showBreaker,
  showLimiter,
} from '../ops/index.ts';
import { listPauses, type PauseParts, type PauseTarget, pauseWork, resumeWork } from '../ops/pause/index.ts';
import { cancelScheduled, type ScheduledFilter } from '../ops/tasks/index.ts';
import { LiveMetrics } from '../ui/live.ts';
import { AdminSessions } from './sessions.ts';

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
  /** The task journal's reader by requestId; without it the request page says "journal not enabled". */
  events?(requestId: string): Promise<JournalEvent[]>;
  /** The journal hook of operator actions (see recordAdminAction). */
  journalAdminAction?(event: AdminActionEvent): Promise<void>;
}

/** An operator, from an API key with an admin scope. */
export interface Operator {
  name: string;
  admin: 'read' | 'write';
}

/** How long outbox counts are reused (counting reads the whole table). */
const OUTBOX_STATS_TTL_MS = 10_000;

/**
 * What the admin API and the operator UI read and do, on the clients of the process they run in
 * (its Redis, PostgreSQL and Kafka): every call goes through the shared operations of ops/.
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

  private admin(): QueueAdmin {
    this.#queue ??= queueFromConfig(this.config, this.#options.deps.redis(), { notify: false });
    return new QueueAdmin(this.#queue);
  }

  private breaker(): CircuitBreaker {
    this.#breaker ??= breakerFromConfig(this.config, this.#options.deps.redis(), { stateCacheMs: 0 });
    return this.#breaker;
  }

  private dlqSource(): DlqSource {
    return { kafka: this.#options.deps.kafka(), topic: this.config.topicDlq };
  }

  async overview() {
    this.live.start();
    const [queue, outbox, breakers] = await Promise.all([
      this.admin().info(),
      this.outbox().catch((err: unknown) => ({ error: String(err) })),
      // Counts only: the index says open or half-open, no per-origin snapshot needed (polled every 3 s).
      this.breaker().openOrigins(1_000),
    ]);
    const latest = this.live.latest();
    return {
      queue,
      outbox,
      breakersOpen: breakers.filter((b) => b.state === 'open').length,
      breakersHalfOpen: breakers.filter((b) => b.state === 'half_open').length,
      live: latest ?? null,
    };
  }

  private outbox(): Promise<OutboxView> {
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

  /** `revealTo`: the operator who asked to see the requests' secrets (see reveal). */
  async partitions(limit: number, revealTo?: Operator) {
    this.#inReader ??= this.#options.deps.kafka().fetcher({ connections: 1, cacheBytes: 0 });
    const reveal = mayReveal(revealTo);
    const view = await partitionsOverview(this.admin(), limit, {
      breaker: this.breaker(),
      inRecords: this.#inReader,
      reveal,
    });
    if (revealTo)
      await this.reveal(
        revealTo,
        'partitions',
        [...view.heaviest, ...view.held].map((row) => row.requestId),
      );
    return view;
  }

  breakers(limit = 1_000) {
    return listBreakers(this.breaker(), limit);
  }

  breaker1(origin: string) {
    return showBreaker(this.breaker(), origin);
  }

  async resetBreaker(operator: Operator, origin: string) {
    const result = await resetBreaker(this.breaker(), origin);
    await this.record(operator, 'breaker.reset', { origin });
    return result;
  }

  /** `client`: whose limiter key (a request's `meta.limiter.key` is its client's unless shared). */
  limiter(key: string, rates: string[], apiKey: boolean, client?: string) {
    return showLimiter(this.#options.deps.redis(), this.config, key, rates.map(rateArg), apiKey, client);
  }

  async deadLetters(selection: DlqSelection, limit: number, revealTo?: Operator) {
    const view = await this.deadLetterViews(selection, limit, mayReveal(revealTo));
    if (revealTo)
      await this.reveal(
        revealTo,
        'dlq',
        view.entries.map((e) => e.requestId),
      );
    return view;
  }

  private async deadLetterViews(selection: DlqSelection, limit: number, reveal: boolean) {
    const filter = dlqFilterFrom(selection);
    filter.exclude = await this.handled().then((h) => h.refs(this.config.topicDlq));
    return listDeadLetterViews(this.dlqSource(), filter, limit, reveal);
  }

  async replay(operator: Operator, selection: DlqSelection & { force?: boolean }) {
    const filter = dlqFilterFrom(selection);
    if (!filter.requestIds && Object.keys(filter).length === 0)
      throw new SelectionError(
        'replay needs a selection: requestIds, since/until, origin, errorCode or client',
      );
    const summary = await replayFromDlq(
      this.dlqSource(),
      {
        producer: await this.#options.deps.producer(),
        redis: this.#options.deps.redis(),
        config: this.config,
        signer: () => this.#options.deps.entrySigner(),
      },
      { filter, dryRun: false, force: selection.force ?? false },
    );
    await this.record(operator, 'dlq.replay', { requestIds: summary.replayed.map((r) => r.requestId) });
    return summary;
  }

  /** Marks the dead letters at these DLQ positions as handled (see HandledDeadLetters). */
  async deleteDeadLetters(operator: Operator, refs: string[]) {
    const wanted = new Set(refs);
    const entries: DeadLetterView[] = [];
    for (const entry of (await this.deadLetters({}, Number.MAX_SAFE_INTEGER)).entries)
      if (wanted.has(entry.ref)) entries.push(entry);
    const marked = await (await this.handled()).mark(entries, operator.name);
    await this.record(operator, 'dlq.delete', {
      refs: entries.map((e) => e.ref),
      requestIds: entries.flatMap((e) => (e.requestId ? [e.requestId] : [])),
    });
    return { marked, refs: entries.map((e) => e.ref) };
  }

  /**
   * What is known of one request: its result here, its dead letters, its journal. A requestId is
   * its client's: the result is the one of `client`'s request (none: a request without a client);
   * dead letters are those of every client unless `client` is given. Secrets hidden unless
   * `revealTo` (a write operator) asks, which is recorded.
   */
  async request(requestId: string, client?: string, revealTo?: Operator) {
    const reveal = mayReveal(revealTo);
    const result = this.#options.peekResult?.(requestId, client);
    const dead = await this.deadLetterViews(
      { requestIds: [requestId], ...(client ? { client } : {}) },
      20,
      reveal,
    );
    const parsed = result === undefined ? null : (JSON.parse(result) as unknown);
    if (revealTo) await this.reveal(revealTo, 'request', [requestId]);
    return {
      requestId,
      client: client ?? null,
      result: reveal ? parsed : redactResult(parsed),
      resultSource: this.#options.peekResult ? 'sync-gateway' : null,
      deadLetters: dead.entries,
    };
  }

  /** The process's PostgreSQL pool (the task lists of ops/tasks read the outbox). */
  sql() {
    return this.#options.deps.sql();
  }

  /** Cancels the scheduled requests a selection matches (ops/tasks), or counts them (the preview). */
  async cancelScheduled(operator: Operator, filter: ScheduledFilter, confirm: boolean) {
    const { deps, config, logger, journalAdminAction } = this.#options;
    return cancelScheduled(
      {
        sql: await deps.sql(),
        redis: deps.redis(),
        config,
        logger,
        journal: deps.journal(),
        ...(journalAdminAction ? { journalAdminAction } : {}),
      },
      operator.name,
      filter,
      confirm,
    );
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

  /** Cancels a client's request (ops/cancel), recorded as this operator's action. */
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

  async events(requestId: string): Promise<{ enabled: boolean; events: JournalEvent[] }> {
    if (!this.#options.events) return { enabled: false, events: [] };
    return { enabled: true, events: await this.#options.events(requestId) };
  }

  private async handled(): Promise<HandledDeadLetters> {
    return new HandledDeadLetters(await this.#options.deps.sql());
  }

  /** A view shown with its secrets: an operator action of its own, on each request it showed. */
  private reveal(operator: Operator, view: string, requestIds: Array<string | null>): Promise<void> {
    const shown = [...new Set(requestIds.filter((id): id is string => id !== null && id !== ''))];
    return this.record(operator, 'secrets.reveal', { view, requestIds: shown });
  }

  private record(operator: Operator, action: string, target: Record<string, unknown>): Promise<void> {
    return recordAdminAction(
      this.#options.logger,
      { action, actor: operator.name, target, outcome: 'done' },
      this.#options.journalAdminAction,
    );
  }

  async close(): Promise<void> {
    this.live.stop();
    await Promise.all([this.#queue?.close(), this.#inReader?.close()]);
  }
}

/** A request to act without saying on what (answered 400). */
export class SelectionError extends Error {}

/** An action the operator's admin scope does not allow (answered 403). */
export class ScopeError extends Error {}

/**
 * Whether a view shows the requests' secrets: only when an operator asked, and only a write key
 * may (seeing a tenant's credentials is an act, journaled like a replay).
 */
function mayReveal(revealTo: Operator | undefined): boolean {
  if (!revealTo) return false;
  if (revealTo.admin !== 'write') throw new ScopeError('revealing secrets needs an admin write key');
  return true;
}

import { readFileSync } from 'node:fs';
import { breakerFromConfig, OriginPacer, OriginStatsRecorder, RateLimiter } from '@requester/policies';
import { ClientWeights, queueFromConfig } from '@requester/queue';
import { Cancellations } from '@requester/shared/cancel';
import { CredentialStore, masterKeysFromConfig } from '@requester/shared/credentials';
import { Debounces } from '@requester/shared/debounce';
import { DestinationCatalog, DestinationStore } from '@requester/shared/destinations';
import { Outbox } from '@requester/shared/outbox';
import { Pauses, PauseView } from '@requester/shared/pause';
import { Announcements, RedisClock } from '@requester/shared/redis';
import type { RoleDefinition, RoleHandle } from '@requester/shared/role';
import type { CallOrRefusal } from './attempt/index.ts';
import { bulkheadFromConfig, defaultMaxPerOrigin } from './bulkhead/index.ts';
import { ResponseCache } from './cache/index.ts';
import { keyConcurrencyFromConfig } from './concurrency/index.ts';
import { CredentialResolver, withCredentials } from './credentials/index.ts';
import { createHttpClient, reservedPortsOf } from './http/index.ts';
import { SigningKeyring, signingKeysFromConfig } from './signing/index.ts';
import { startDestinationGauges } from './worker/destination-gauges.ts';
import { Executor } from './worker/index.ts';

export { slotsKey } from './bulkhead/cluster.ts';
export { capOf, defaultMaxPerOrigin } from './bulkhead/index.ts';
export {
  type CallOutcome,
  createHttpClient,
  type HttpCall,
  type HttpClient,
  TargetGuard,
} from './http/index.ts';
export { idempotencyKey, toHttpCall } from './http/request.ts';
export { callResult, unreadableResult } from './result/index.ts';
export { HELD_PER_WORKER } from './worker/budget.ts';
export { Executor, type ExecutorOptions, type TaskQueue } from './worker/index.ts';

/**
 * The executor role (docs/architecture.md §3, §5): leases tasks from the Redis fair queue, reads their `in`
 * records by offset, runs each attempt through its chain of gates (attempt/chain.ts: cache, sign,
 * pace, bulkhead, limit, breaker, then the call) and the retry decision, writes every outcome to
 * `out` (and failures to the DLQ), then acks.
 * Long waits of unordered tasks go to the PostgreSQL outbox.
 */
export const executorRole: RoleDefinition = {
  name: 'executor',
  async start({ config, logger, deps }): Promise<RoleHandle> {
    const producer = await deps.producer();
    const fetcher = deps.kafka().fetcher({ cacheBytes: config.executorRecordCacheBytes });
    const redis = deps.redis();
    const sql = await deps.sql();
    const masterKeys = masterKeysFromConfig(config);
    const direct = createHttpClient({
      connectTimeoutMs: config.targetConnectTimeout,
      responseTimeoutMs: config.targetResponseTimeout,
      maxResponseBytes: config.targetMaxResponseBytes,
      followRedirects: config.targetFollowRedirects,
      allowPrivateTargets: config.allowPrivateTargets,
      reservedPorts: await reservedPortsOf(config),
      egressProxy: config.egressProxy,
      egressNoProxy: config.egressNoProxy,
      egressProxyCa: config.egressProxyCaFile ? readFileSync(config.egressProxyCaFile, 'utf8') : undefined,
    });
    const store = masterKeys && new CredentialStore(sql, masterKeys);
    const destinationStore = new DestinationStore(sql, undefined, masterKeys);
    // One read of the store per credential and CREDENTIALS_CACHE_TTL, for calls and the signer alike.
    const resolver = new CredentialResolver(store, config.credentialsCacheTtl);
    const legacyKeys = signingKeysFromConfig(config);
    if (legacyKeys)
      logger.warn(
        { keyIds: legacyKeys.ids },
        'SIGNING_KEYS is deprecated: move the keys to the credential store (requester credentials import-signing), then unset it',
      );
    const http = withCredentials(direct, {
      store,
      cacheTtlMs: config.credentialsCacheTtl,
      resolver,
      redis,
      prefix: config.redisPrefix,
      timeoutMs: config.oauth2TokenTimeout,
    });
    const queue = queueFromConfig(config, redis, { logger });
    // The waits at a saturated origin are served by the weights the lease uses (SlotLine).
    const weights = new ClientWeights(queue);
    const cache = new ResponseCache<CallOrRefusal>({
      redis,
      prefix: `${config.redisPrefix}:`,
      waitBudgetMs: config.cacheWaitBudget,
      maxEntryBytes: config.cacheMaxEntryBytes,
      logger,
    });
    const originStats = new OriginStatsRecorder({ redis, prefix: `${config.redisPrefix}:`, logger });
    originStats.start();
    const pausesInRedis = new Pauses(redis, config.redisPrefix);
    // Watched, on one subscriber connection: a task's cancel is read again before an attempt only
    // when one was announced since its read; the pauses when one was announced, or a second after.
    const cancellations = new Cancellations(redis, config.redisPrefix, config.cancelRetention);
    const announcements = new Announcements(redis, [cancellations.channel, pausesInRedis.channel], {
      what: 'cancel and pause',
      logger,
    });
    cancellations.watch(announcements);
    const pauses = new PauseView(pausesInRedis, announcements);
    const pacer = new OriginPacer({
      redis,
      prefix: `${config.redisPrefix}:pace:`,
      maxLimit: config.maxWorkersPerOrigin ?? defaultMaxPerOrigin(config.maxWorkers),
      retryAfterMaxMs: config.retryAfterMax,
      freeForMs: config.pacingFreeFor,
      weightOf: (client) => weights.weightOf(client),
      logger,
    });
    const breaker = breakerFromConfig(config, redis, { logger });
    // Start-by deadlines are judged by Redis's clock, as due times are: read before the first lease.
    const clock = new RedisClock(redis);
    await clock.sync();
    const executor = new Executor({
      queue,
      fetcher,
      http,
      limiter: new RateLimiter({ redis, prefix: `${config.redisPrefix}:` }),
      limiterDispatchBudgetMs: config.limiterDispatchBudget,
      limiterArrivalMarginMs: config.limiterArrivalMargin,
      sharedLimiterKeys: config.sharedLimiterKeys,
      breaker,
      optOut: config.originOptOut,
      bulkhead: bulkheadFromConfig(config, redis, logger, (client) => weights.weightOf(client)),
      concurrency: keyConcurrencyFromConfig(config, redis, logger, (client) => weights.weightOf(client)),
      pacer,
      adaptiveConcurrency: config.adaptiveConcurrency,
      originStats,
      cache,
      signing: new SigningKeyring({ resolver, legacy: legacyKeys }),
      outbox: new Outbox(sql),
      horizonMs: config.redisHorizon,
      redisNow: () => clock.now(),
      retryAfterMaxMs: config.retryAfterMax,
      producer,
      topicOut: config.topicOut,
      maxResultBytes: config.kafkaMaxMessageBytes,
      topicDlq: config.topicDlq,
      maxWorkers: config.maxWorkers,
      leaseTtlMs: config.executorLeaseTtl,
      parking: { tasks: config.executorParkedTasks, bytes: config.executorParkedBytes },
      produceTimeoutMs: config.kafkaProduceTimeout,
      logger,
      journal: deps.journal(),
      cancellations,
      debounces: new Debounces(redis, config.redisPrefix),
      pauses,
      // Read like the credentials: a change of a destination is in force within CREDENTIALS_CACHE_TTL.
      destinations: new DestinationCatalog((name) => destinationStore.open(name), config.credentialsCacheTtl),
      replies: {
        redis,
        prefix: config.redisPrefix,
        ...(config.syncFollowOut ? {} : { keepMs: config.syncCacheTtl }),
      },
    });
    executor.start();
    // Every executor samples the same shared state: aggregate with max() (docs/metrics.md).
    const destinationGauges = startDestinationGauges(
      { list: () => destinationStore.list(), breaker, pacer, pauses: pausesInRedis },
      config.metricsSampleInterval,
      logger,
    );
    logger.info({ maxWorkers: config.maxWorkers }, 'executor started');
    return {
      async drain() {
        await destinationGauges.stop();
        await executor.drain();
        await originStats.stop();
        weights.close();
        http.close();
        await Promise.all([
          fetcher.close(),
          queue.close(),
          cache.close(),
          pacer.close(),
          announcements.close(),
        ]);
      },
    };
  },
};

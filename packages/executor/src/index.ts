import { breakerFromConfig, OriginPacer, RateLimiter } from '@requester/policies';
import { queueFromConfig } from '@requester/queue';
import { Cancellations } from '@requester/shared/cancel';
import { CredentialStore, masterKeysFromConfig } from '@requester/shared/credentials';
import { Outbox } from '@requester/shared/outbox';
import { Pauses, PauseView } from '@requester/shared/pause';
import type { RoleDefinition, RoleHandle } from '@requester/shared/role';
import { bulkheadFromConfig, defaultMaxPerOrigin } from './bulkhead/index.ts';
import { ResponseCache } from './cache/index.ts';
import { withCredentials } from './credentials/index.ts';
import { createHttpClient, reservedPortsOf } from './http/index.ts';
import { signingKeysFromConfig } from './signing/index.ts';
import { Executor } from './worker/index.ts';
import type { Tried } from './worker/policies.ts';

export {
  type CallOutcome,
  createHttpClient,
  type HttpCall,
  type HttpClient,
  TargetGuard,
} from './http/index.ts';
export { idempotencyKey, toHttpCall } from './http/request.ts';
export { callResult, unreadableResult } from './result/index.ts';
export { Executor, type ExecutorOptions, type TaskQueue } from './worker/index.ts';

/**
 * The executor role (docs/architecture.md §3, §5): leases tasks from the Redis fair queue, reads their `in`
 * records by offset, applies the delivery policies (cache, rate limiter, circuit breaker, signing,
 * retries) around each call, writes every outcome to `out` (and failures to the DLQ), then acks.
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
    });
    const http = withCredentials(direct, {
      store: masterKeys && new CredentialStore(sql, masterKeys),
      cacheTtlMs: config.credentialsCacheTtl,
      redis,
      prefix: config.redisPrefix,
      timeoutMs: config.oauth2TokenTimeout,
    });
    const queue = queueFromConfig(config, redis, { logger });
    const cache = new ResponseCache<Tried>({
      redis,
      prefix: `${config.redisPrefix}:`,
      waitBudgetMs: config.cacheWaitBudget,
      maxEntryBytes: config.cacheMaxEntryBytes,
      logger,
    });
    const pauses = new PauseView(new Pauses(redis, config.redisPrefix));
    const executor = new Executor({
      queue,
      fetcher,
      http,
      limiter: new RateLimiter({ redis, prefix: `${config.redisPrefix}:` }),
      limiterDispatchBudgetMs: config.limiterDispatchBudget,
      sharedLimiterKeys: config.sharedLimiterKeys,
      breaker: breakerFromConfig(config, redis, { logger }),
      bulkhead: bulkheadFromConfig(config, redis, logger),
      pacer: new OriginPacer({
        redis,
        prefix: `${config.redisPrefix}:pace:`,
        maxLimit: config.maxWorkersPerOrigin ?? defaultMaxPerOrigin(config.maxWorkers),
        retryAfterMaxMs: config.retryAfterMax,
        logger,
      }),
      adaptiveConcurrency: config.adaptiveConcurrency,
      cache,
      signingKeys: signingKeysFromConfig(config),
      outbox: new Outbox(sql),
      horizonMs: config.redisHorizon,
      retryAfterMaxMs: config.retryAfterMax,
      producer,
      topicOut: config.topicOut,
      maxResultBytes: config.kafkaMaxMessageBytes,
      topicDlq: config.topicDlq,
      maxWorkers: config.maxWorkers,
      leaseTtlMs: config.executorLeaseTtl,
      produceTimeoutMs: config.kafkaProduceTimeout,
      logger,
      journal: deps.journal(),
      cancellations: new Cancellations(redis, config.redisPrefix, config.cancelRetention),
      pauses,
      replies: {
        redis,
        prefix: config.redisPrefix,
        ...(config.syncFollowOut ? {} : { keepMs: config.syncCacheTtl }),
      },
    });
    executor.start();
    logger.info({ maxWorkers: config.maxWorkers }, 'executor started');
    return {
      async drain() {
        await executor.drain();
        http.close();
        await Promise.all([fetcher.close(), queue.close(), cache.close()]);
      },
    };
  },
};

import { queueFromConfig } from '@requester/scheduler';
import { createFetcher, type RoleDefinition, type RoleHandle } from '@requester/shared';
import { createHttpClient } from './http/index.ts';
import { Executor } from './worker/index.ts';

export {
  type CallOutcome,
  createHttpClient,
  type HttpCall,
  type HttpClient,
  TargetGuard,
} from './http/index.ts';
export { idempotencyKey, toHttpCall } from './http/request.ts';
export { callResult, unreadableResult } from './result/index.ts';
export { type AttemptFacts, type Classifier, type Decision, deliverEveryOutcome } from './worker/classify.ts';
export { Executor, type ExecutorOptions, type TaskQueue } from './worker/index.ts';

/**
 * The executor role (DESIGN.md §3): leases tasks from the Redis fair queue, reads their `in`
 * records by offset, calls the targets, writes every outcome to `out`, then acks.
 */
export const executorRole: RoleDefinition = {
  name: 'executor',
  async start({ config, logger, deps }): Promise<RoleHandle> {
    const log = logger;
    const producer = await deps.producer();
    const fetcher = createFetcher({
      brokers: config.kafkaBrokers,
      clientId: config.kafkaClientId,
      logger: log,
    });
    const http = createHttpClient({
      connectTimeoutMs: config.targetConnectTimeout,
      responseTimeoutMs: config.targetResponseTimeout,
      maxResponseBytes: config.targetMaxResponseBytes,
      followRedirects: config.targetFollowRedirects,
      allowPrivateTargets: config.allowPrivateTargets,
    });
    const queue = queueFromConfig(config, deps.redis(), { logger: log });
    const executor = new Executor({
      queue,
      fetcher,
      http,
      producer,
      topicOut: config.topicOut,
      maxWorkers: config.maxWorkers,
      leaseTtlMs: config.executorLeaseTtl,
      produceTimeoutMs: config.kafkaProduceTimeout,
      logger: log,
    });
    executor.start();
    log.info({ maxWorkers: config.maxWorkers }, 'executor started');
    return {
      async drain() {
        await executor.drain();
        http.close();
        await Promise.all([fetcher.close(), queue.close()]);
      },
    };
  },
};

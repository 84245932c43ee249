import { breakerFromConfig } from '@requester/policies';
import { queueFromConfig } from '@requester/queue';
import { Cancellations } from '@requester/shared/cancel';
import { bodiesTopicOf, routerGroupOf } from '@requester/shared/config';
import { Debounces } from '@requester/shared/debounce';
import { DestinationCatalog, DestinationStore } from '@requester/shared/destinations';
import { Outbox } from '@requester/shared/outbox';
import { RedisClock } from '@requester/shared/redis';
import type { RoleDefinition, RoleHandle } from '@requester/shared/role';
import { backpressureRules } from './backpressure.ts';
import { Fences } from './fence.ts';
import { Router } from './router.ts';
import { startRouterSamplers } from './samplers.ts';

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
    // Due times and deadlines are judged by Redis's clock, as in the queue and the executors.
    const clock = new RedisClock(deps.redis());
    await clock.sync();
    const router = new Router({
      consumer,
      queue,
      outbox: new Outbox(await deps.sql()),
      producer,
      topicIn: config.topicIn,
      topicOut: config.topicOut,
      topicDlq: config.topicDlq,
      horizonMs: config.redisHorizon,
      redisNow: () => clock.now(),
      inlineMaxBytes: config.queueInlineBytes,
      produceTimeoutMs: config.kafkaProduceTimeout,
      logger,
      journal: deps.journal(),
      cancellations: new Cancellations(deps.redis(), config.redisPrefix, config.cancelRetention),
      fences: new Fences(deps.redis(), config.redisPrefix),
      debounces: new Debounces(deps.redis(), config.redisPrefix),
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

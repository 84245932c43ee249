import {
  createFetcher,
  type JournalLookup,
  kafkaSecurityFrom,
  type RoleContext,
  type RoleDefinition,
  type RoleHandle,
  readJournal,
} from '@requester/shared';
import { redisRequestIds } from '../claims/index.ts';
import { Hub } from '../hub/index.ts';
import { followResults } from '../results/index.ts';
import { attach } from '../server/index.ts';
import { kafkaSubmit } from '../submit/index.ts';

/** A running HTTP role; `url` is where its (shared) server listens, handy when HTTP_PORT is 0. */
export interface HttpRoleHandle extends RoleHandle {
  url: string;
}

/**
 * `ingress`: `POST /request` → `in`. Kafka and Redis (the requestId check) must answer at start
 * (the producer connects here, and the process fails fast instead of serving 503s forever); later
 * outages are answered 503.
 * Without a sync-gateway in the process, sync calls are answered 202 + Location at once.
 */
export const ingressRole = {
  name: 'ingress',
  async start(ctx: RoleContext): Promise<HttpRoleHandle> {
    const { deps, config } = ctx;
    await deps.producer();
    const redis = deps.redis();
    await redis.ping();
    const submit = kafkaSubmit(() => deps.producer(), config.topicIn, config.kafkaProduceTimeout);
    const claim = redisRequestIds(redis, `${config.redisPrefix}:`, config.queueDedupWindow);
    const server = await attach(ctx, { submit, claim, ingressLog: ctx.logger, journal: deps.journal() });
    return { url: server.url, stopAccepting: () => server.close(), drain: async () => {} };
  },
} satisfies RoleDefinition;

/**
 * `sync-gateway`: follows `out` into a Hub that answers sync calls (when ingress runs in the same
 * process) and `GET /requests/:id` long-polls. Started only once the consumer is positioned, so a
 * result produced after the role reports started is never missed.
 */
export const syncGatewayRole = {
  name: 'sync-gateway',
  async start(ctx: RoleContext): Promise<HttpRoleHandle> {
    const { deps, config, logger } = ctx;
    await deps.topics();
    const hub = new Hub<string>({
      maxBytes: config.syncCacheMaxBytes,
      ttlMs: config.syncCacheTtl,
      maxWaiters: config.syncMaxWaiters,
    });
    const following = await followResults({
      kafka: deps.kafka(),
      topic: config.topicOut,
      logger,
      sessionTimeoutMs: config.kafkaSessionTimeout,
      health: deps.consumers,
      onResult: (id, json) => hub.publish(id, json),
    });
    try {
      const journalFetcher = createFetcher({
        brokers: config.kafkaBrokers,
        clientId: `${config.kafkaClientId}-journal`,
        logger,
        security: kafkaSecurityFrom(config),
        connections: 1,
        cacheBytes: 0,
      });
      const readEvents = (lookup: JournalLookup) => readJournal(journalFetcher, config.topicEvents, lookup);
      const server = await attach(ctx, { hub, gatewayLog: logger, readJournal: readEvents });
      const drain = () => Promise.all([following.stop(), journalFetcher.close()]).then(() => {});
      return { url: server.url, stopAccepting: () => server.close(), drain };
    } catch (err) {
      await following.stop().catch(() => {});
      throw err;
    }
  },
} satisfies RoleDefinition;

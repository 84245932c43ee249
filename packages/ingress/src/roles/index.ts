import { Cancellations, cancelRequest } from '@requester/shared/cancel';
import { clientScoped, unscoped } from '@requester/shared/contract';
import { type JournalLookup, readJournal } from '@requester/shared/journal';
import { Outbox } from '@requester/shared/outbox';
import { type RedisClient, redisSubscriber } from '@requester/shared/redis';
import { newGatewayId, replyChannel, resultKey } from '@requester/shared/replies';
import type { RoleContext, RoleDefinition, RoleHandle } from '@requester/shared/role';
import { kafkaAttributes, SpanKind, startSpan, tracingEnabled } from '@requester/shared/tracing';
import { claimedRequestIds, redisRequestIds } from '../claims/index.ts';
import { Hub } from '../hub/index.ts';
import { type Following, followReplies, followResults } from '../results/index.ts';
import { attach } from '../server/index.ts';
import { kafkaSubmit } from '../submit/index.ts';

/** A running HTTP role; `url` is where its (shared) server listens, handy when HTTP_PORT is 0. */
export interface HttpRoleHandle extends RoleHandle {
  url: string;
}

/** A running sync-gateway: an HTTP role that also answers for the results it holds. */
export interface SyncGatewayHandle extends HttpRoleHandle {
  /**
   * The result (raw JSON from `out`) this process holds for a client's requestId, if any
   * (`client` undefined: a request without `meta.client`).
   */
  peekResult(requestId: string, client: string | undefined): string | undefined;
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
    // With AUTH=off no record carries a client (nor a scope mark): nothing to vouch for.
    const signer = config.auth === 'on' ? await entrySigner(ctx) : undefined;
    const submit = kafkaSubmit(
      () => deps.producer(),
      config.topicIn,
      config.kafkaProduceTimeout,
      { lingerMs: config.ingressLinger, maxBatchBytes: config.ingressBatchBytes },
      signer,
    );
    const claim = redisRequestIds(redis, `${config.redisPrefix}:`, config.queueDedupWindow);
    const journal = deps.journal();
    const cancellations = new Cancellations(redis, config.redisPrefix, config.cancelRetention);
    const cancel = (client: string | undefined, requestId: string, by: string) =>
      cancelRequest(
        { cancellations, outbox: async () => new Outbox(await deps.sql()), journal },
        client,
        requestId,
        by,
      );
    // DELETE of an unknown id answers 404: known = claimed lately (HTTP), cancelled already, or
    // waiting in the outbox. Without claims (QUEUE_DEDUP_WINDOW 0) nothing tells: every id is.
    const claimed = claimedRequestIds(redis, `${config.redisPrefix}:`, config.queueDedupWindow);
    const known = claimed
      ? async (client: string | undefined, requestId: string) =>
          (await claimed(client, requestId)) ||
          (await cancellations.find(client, requestId)) !== undefined ||
          (await new Outbox(await deps.sql()).holds(client, requestId))
      : undefined;
    const server = await attach(ctx, {
      submit,
      claim,
      cancel,
      ...(known ? { known } : {}),
      ingressLog: ctx.logger,
      journal,
    });
    return { url: server.url, stopAccepting: () => server.close(), drain: async () => {} };
  },
} satisfies RoleDefinition;

/** The entry signer; AUTH=on needs PostgreSQL at start anyway (the keys), so say so when it fails. */
async function entrySigner({ deps }: RoleContext) {
  try {
    return await deps.entrySigner();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(
      `the ingress signs its records with a secret kept in PostgreSQL (DATABASE_URL): ${reason}`,
      {
        cause: err,
      },
    );
  }
}

/**
 * `sync-gateway`: a Hub that answers sync calls (when ingress runs in the same process) and
 * `GET /requests/:id` long-polls. It is fed by its own reply channel (the results of the sync
 * requests stamped with its id) and, with SYNC_FOLLOW_OUT=true, by all of `out`; with false,
 * long-polls also read the results the executors keep in Redis. Started only once it is
 * subscribed and positioned, so a result produced after the role reports started is never missed.
 */
export const syncGatewayRole = {
  name: 'sync-gateway',
  async start(ctx: RoleContext): Promise<SyncGatewayHandle> {
    const { deps, config, logger } = ctx;
    await deps.topics();
    const hub = new Hub<string>({
      maxBytes: config.syncCacheMaxBytes,
      ttlMs: config.syncCacheTtl,
      maxWaiters: config.syncMaxWaiters,
      keyOf: unscoped,
    });
    const redis = deps.redis();
    const gatewayId = newGatewayId();
    const sources: Array<Pick<Following, 'stop'>> = [];
    const stopAll = () => Promise.all(sources.map((s) => s.stop())).then(() => {});
    try {
      const journalFetcher = deps.kafka().fetcher({ connections: 1, cacheBytes: 0 });
      sources.push({ stop: () => journalFetcher.close() });
      const readEvents = (lookup: JournalLookup) => readJournal(journalFetcher, config.topicEvents, lookup);
      sources.push(
        await followReplies({
          subscriber: redisSubscriber(redis, logger),
          channel: replyChannel(config.redisPrefix, gatewayId),
          logger,
          onResult: (id, json) => hub.publish(id, json),
        }),
      );
      if (config.syncFollowOut) sources.push(await followOut(ctx, hub));
      const lookup = config.syncFollowOut ? undefined : keptResults(redis, config.redisPrefix, logger);
      const server = await attach(ctx, {
        hub,
        replyTo: gatewayId,
        ...(lookup && { lookup }),
        gatewayLog: logger,
        readJournal: readEvents,
      });
      logger.info({ gatewayId, followOut: config.syncFollowOut }, 'sync-gateway started');
      return {
        url: server.url,
        stopAccepting: () => server.close(),
        drain: stopAll,
        peekResult: (requestId, client) => hub.peek(clientScoped(client, requestId)),
      };
    } catch (err) {
      await stopAll().catch(() => {});
      throw err;
    }
  },
} satisfies RoleDefinition;

/** SYNC_FOLLOW_OUT=true: every result of `out` passes through this gateway's Hub. */
function followOut(ctx: RoleContext, hub: Hub<string>): Promise<Following> {
  const { deps, config, logger } = ctx;
  return followResults({
    kafka: deps.kafka(),
    topic: config.topicOut,
    logger,
    sessionTimeoutMs: config.kafkaSessionTimeout,
    health: deps.consumers,
    onResult: (id, json, traceparent) => traceReply(config.topicOut, traceparent, hub.publish(id, json)),
    // Most results of `out` are for nobody here: read (parsed) only when someone waits or asks.
    onUnread: (key, json, idOf, traceparent) =>
      traceReply(config.topicOut, traceparent, hub.offer(key, json, idOf)),
  });
}

/**
 * The sync results the executors keep in Redis, by result id (a client's requestId); a Redis
 * failure reads as "not there yet".
 */
function keptResults(redis: RedisClient, prefix: string, logger: RoleContext['logger']) {
  return async (resultId: string): Promise<string | undefined> => {
    try {
      return (await redis.get(resultKey(prefix, resultId))) ?? undefined;
    } catch (err) {
      logger.warn({ err }, 'kept sync results unreadable in Redis: answering from this gateway alone');
      return undefined;
    }
  };
}

/**
 * The sync reply's hop: a CONSUMER span under the result's PRODUCER span, recorded only by the
 * gateway that had callers waiting (every gateway reads every result).
 */
function traceReply(topic: string, traceparent: string | undefined, woken: number): void {
  if (woken === 0 || !traceparent || !tracingEnabled()) return;
  startSpan(`receive ${topic}`, traceparent, {
    kind: SpanKind.CONSUMER,
    attributes: { ...kafkaAttributes('receive', topic), 'requester.callers_woken': woken },
  }).end();
}

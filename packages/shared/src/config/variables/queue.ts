/** The fair queue in Redis: shards, dedup, watermarks, cancels, the horizon to the outbox. */

import { goDuration, nonNegativeInt, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const queueVariables = {
  queueShards: variable('QUEUE_SHARDS', '128', positiveInt, 'number of Redis queue shards (hash-tagged)'),
  queueInlineBytes: variable(
    'QUEUE_INLINE_BYTES',
    '1024',
    nonNegativeInt,
    'an `in` record of at most this many bytes rides in its Redis task, so the executor skips reading it back from Kafka (Redis memory per queued task grows by up to this much; 0 = always read from Kafka)',
  ),
  queueDedupWindow: variable(
    'QUEUE_DEDUP_WINDOW',
    '1h',
    goDuration,
    'how long an acked task id stays refused (replays of in; ~112 B of Redis per id), and how long the ingress remembers which request a requestId names (a different one is a 409; ~170 B of Redis per id)',
  ),
  queuePublishReplicas: variable(
    'QUEUE_PUBLISH_REPLICAS',
    '0',
    nonNegativeInt,
    'a publish into the Redis queue is confirmed (and its `in` offset committed) only once this many replicas of its master have it (`WAIT`), so that a Redis failover cannot lose it; when fewer answer within QUEUE_PUBLISH_REPLICA_TIMEOUT the batch fails and is published again. 0 = no wait (replication is asynchronous: a failover can lose the last publishes, docs/reliability.md "Redis failover")',
  ),
  queuePublishReplicaTimeout: variable(
    'QUEUE_PUBLISH_REPLICA_TIMEOUT',
    '500ms',
    goDuration,
    'how long a publish waits for QUEUE_PUBLISH_REPLICAS replicas',
  ),
  queueHighWatermark: variable(
    'QUEUE_HIGH_WATERMARK',
    '1000000',
    nonNegativeInt,
    'pending tasks in the Redis queue at which routers pause consuming in (Kafka keeps the backlog; ~400 B of Redis per task); 0 = never',
  ),
  queueLowWatermark: variable(
    'QUEUE_LOW_WATERMARK',
    undefined,
    nonNegativeInt.optional(),
    'pending tasks at or below which paused routers resume; default 80% of QUEUE_HIGH_WATERMARK',
  ),
  cancelRetention: variable(
    'CANCEL_RETENTION',
    '168h',
    goDuration,
    'how long a cancel (DELETE /requests/{id}, `requester cancel`) is remembered: a copy of the request met later than this (an ordered task still blocked, a retry due later) runs (~150 B of Redis per cancel)',
  ),
  redisHorizon: variable(
    'REDIS_HORIZON',
    '1s',
    goDuration,
    'tasks due within this go to Redis; later ones to the outbox',
  ),
};

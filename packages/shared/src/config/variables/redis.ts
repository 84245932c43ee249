/** The Redis connection. */

import { z } from 'zod';
import { bool, goDuration } from '../values.ts';
import { variable } from '../variable.ts';

export const redisVariables = {
  redisUrl: variable(
    'REDIS_URL',
    'redis://127.0.0.1:6379',
    z.string().min(1),
    'Redis URL; several comma-separated seeds = Redis Cluster',
  ),
  redisCluster: variable('REDIS_CLUSTER', 'false', bool, 'treat REDIS_URL as Redis Cluster seeds'),
  redisPrefix: variable('REDIS_PREFIX', 'rq', z.string().min(1).max(32), 'prefix of every Redis key'),
  redisCommandTimeout: variable('REDIS_COMMAND_TIMEOUT', '5s', goDuration, 'bound on one Redis command'),
  redisFailoverRetry: variable(
    'REDIS_FAILOVER_RETRY',
    '6s',
    goDuration,
    'Redis Cluster: how long a command is retried while its slot has no master (a failover: cluster-node-timeout plus the election)',
  ),
};

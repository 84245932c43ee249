import type { Cluster, Redis } from 'ioredis';

/** Either a single Redis node or a Redis Cluster: every module takes this, never a concrete class. */
export type RedisClient = Redis | Cluster;

// Moved to `@requester/shared/testing` (queue, breaker and limiter tests all use it); kept here so
// that imports of the old path keep working.
export {
  REDIS_SERVER,
  redisServerAvailable,
  startRedisCluster,
  type TestCluster,
} from '@requester/shared/testing';

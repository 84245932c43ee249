import { RateLimiter } from '@requester/policies';
import type { RoleContext } from '@requester/shared/role';
import { KeyStore } from '../keys/index.ts';
import type { Access } from './access.ts';
import { KeyAccess } from './key-access.ts';
import { openAccess } from './open.ts';

/**
 * The access control of one HTTP server, from the configuration. AUTH=on needs PostgreSQL at
 * start (fail fast: without the keys nobody could be let in); Redis only once a key with a rate
 * calls. AUTH=off is said loudly: the API is then an open proxy for whoever reaches the port.
 */
export async function accessFromConfig(ctx: RoleContext): Promise<Access> {
  const { config, deps, logger } = ctx;
  if (config.auth === 'off') {
    logger.warn(
      'AUTH=off: the HTTP API lets every caller in without an API key, and any caller reads any result',
    );
    return openAccess(config.kafkaAnonymousCredentials);
  }
  let sql: Awaited<ReturnType<typeof deps.sql>>;
  try {
    sql = await deps.sql();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(
      `API keys (AUTH=on) are kept in PostgreSQL, which does not answer at DATABASE_URL: ${reason}`,
      {
        cause: err,
      },
    );
  }
  const store = new KeyStore(sql);
  let limiter: RateLimiter | undefined;
  return new KeyAccess({
    find: (id) => store.find(id),
    cacheTtlMs: config.authCacheTtl,
    horizonMs: config.redisHorizon,
    // Its own prefix: a caller's meta.limiter.key can never name (and spend) a key's quota.
    limiter: () => {
      limiter ??= new RateLimiter({ redis: deps.redis(), prefix: apiKeyLimiterPrefix(config.redisPrefix) });
      return limiter;
    },
  });
}

/** The Redis prefix of the API keys' rate limiter (`requester limiter show --api-key` reads it). */
export function apiKeyLimiterPrefix(redisPrefix: string): string {
  return `${redisPrefix}:auth:`;
}

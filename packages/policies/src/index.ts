/**
 * @requester/policies: the delivery policies that several roles share, their state in Redis — the
 * circuit breaker per target origin (executor; its open-origins listing feeds router backpressure),
 * the rate limiter (executor per request; ingress per API key), and the pace of each target origin
 * (executor: what 429/503 + Retry-After and the RateLimit headers ask for; the adaptive concurrency),
 * and the calls per origin across the deployment (attempts, successes, latency; the admin faces).
 */
export * from './breaker/index.ts';
export * from './limiter/index.ts';
export * from './pacing/index.ts';
export * from './stats/index.ts';

/**
 * @requester/policies: the delivery policies that several roles share, their state in Redis — the
 * circuit breaker per target origin (executor; its open-origins listing feeds router backpressure)
 * and the rate limiter (executor per request; ingress per API key).
 */
export * from './breaker/index.ts';
export * from './limiter/index.ts';

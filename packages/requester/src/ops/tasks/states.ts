// The task states, apart from ./index.ts (the queue and the policies): `requester tasks` offers
// them in its --help, which loads no client.

/**
 * The states of the task lists (issue 22). pending: due now, waiting in Redis for its turn (or an
 * in-flight limit); scheduled: due later, first those in Redis (a timer inside REDIS_HORIZON, a
 * retry backoff, a wait for a limiter or breaker), then the outbox's rows; in-flight: leased by
 * an executor, until its lease expires; dead: the queue's dead tasks (dead-lettered requests are
 * the DLQ topic's: `requester dlq list`).
 */
export const TASK_STATES = ['pending', 'scheduled', 'in-flight', 'dead'] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** The states a bulk cancel takes (a dead task is over: nothing to cancel). */
export const CANCELLABLE_STATES = ['pending', 'scheduled', 'in-flight'] as const;
export type CancellableState = (typeof CANCELLABLE_STATES)[number];

import type { Logger } from '@requester/shared/log';
import { breakerMetrics } from './metrics.ts';
import { toLocal } from './replies.ts';
import type { ScopeReply } from './scripts.ts';
import type { BreakerScope, BreakerState, HoldChange, HoldReason } from './types.ts';

/**
 * What the breaker tells of a state change: the transition's metric and log line, and the hold
 * that began or ended (logged here; the caller journals it).
 */

export function logTransition(
  logger: Logger | undefined,
  origin: string,
  from: BreakerState,
  to: BreakerState,
  scope: BreakerScope,
  caller?: string,
  retryAtMs?: number,
): void {
  breakerMetrics.transitions.inc({ from, to, scope });
  const who = scope === 'caller' ? { origin, scope, client: caller } : { origin };
  if (to === 'open')
    logger?.warn(
      { ...who, from, retryAt: new Date(retryAtMs ?? 0) },
      scope === 'caller' ? "circuit opened for one caller's calls" : 'circuit opened',
    );
  else logger?.info({ ...who, from, to }, 'circuit breaker state changed');
}

/** The hold that began or ended with a recorded outcome, logged. */
export function holdChangeOf(
  logger: Logger | undefined,
  origin: string,
  reply: ScopeReply,
  held: HoldReason | undefined,
  caller: string | undefined,
): HoldChange | undefined {
  if (reply.holdChange === 0) return undefined;
  const kind = reply.holdChange === 1 ? 'began' : 'ended';
  const change: HoldChange = {
    kind,
    reason: held ?? 'failing',
    sinceMs: toLocal(reply.heldSinceMs, reply.nowMs),
    failures: reply.runFailures,
    failingSinceMs: reply.runSinceMs > 0 ? toLocal(reply.runSinceMs, reply.nowMs) : undefined,
    scope: caller === undefined ? 'origin' : 'caller',
  };
  const fields = {
    origin,
    ...(caller === undefined ? {} : { scope: 'caller', client: caller }),
    reason: change.reason,
    since: new Date(change.sinceMs),
    failures: change.failures,
  };
  if (kind === 'began') logger?.warn(fields, 'origin held back: its tasks wait for a probe to find it back');
  else logger?.info(fields, 'held origin recovered: its tasks resume');
  return change;
}

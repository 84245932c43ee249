import type { HoldChange, PaceReport } from '@requester/policies';
import type { RequestEnvelope } from '@requester/shared/contract';
import type { Journal } from '@requester/shared/journal';
import type { CallOutcome } from '../http/index.ts';

/** The attempt's part of its request's story in the task journal (absent journal: none). */

/** The request whose answer held its origin back, or whose probe found it back, tells so in its story. */
export function journalHold(
  journal: Journal | undefined,
  envelope: RequestEnvelope,
  origin: string,
  change: HoldChange,
): void {
  const { requestId, client } = envelope.meta;
  const since = Math.round(change.sinceMs);
  const scope = change.scope === 'caller' ? { scope: 'caller' as const } : {};
  if (change.kind === 'ended') {
    journal?.emit({
      type: 'origin_recovered',
      requestId,
      client,
      origin,
      since,
      failures: change.failures,
      ...scope,
    });
    return;
  }
  journal?.emit({
    type: 'origin_failing',
    requestId,
    client,
    origin,
    reason: change.reason,
    since,
    failures: change.failures,
    ...(change.failingSinceMs === undefined ? {} : { failingSince: Math.round(change.failingSinceMs) }),
    ...scope,
  });
}

/** The request whose answer lowered its origin's pace or limit: the journal says so in its story. */
export function journalThrottled(
  journal: Journal | undefined,
  envelope: RequestEnvelope,
  report: PaceReport | undefined,
): void {
  if (!report?.throttled || report.kind === 'ok') return;
  const { requestId, client } = envelope.meta;
  journal?.emit({
    type: 'throttled',
    requestId,
    client,
    signal: report.kind,
    limit: Math.max(1, Math.floor(report.limit)),
    ...(report.rate ? { rate: report.rate } : {}),
    holdMs: report.holdMs,
  });
}

export function journalAttempt(
  journal: Journal | undefined,
  envelope: RequestEnvelope,
  n: number,
  outcome: CallOutcome,
  probe: boolean,
): void {
  const { requestId, client } = envelope.meta;
  const durationMs = Math.round(outcome.durationNs / 1e4) / 100;
  const answer = outcome.kind === 'response' ? { status: outcome.status } : { error: outcome.error.code };
  const held = probe ? { probe: true as const } : {};
  journal?.emit({ type: 'attempt', requestId, client, n, durationMs, ...answer, ...held });
}

export function journalCache(
  journal: Journal | undefined,
  envelope: RequestEnvelope,
  outcome: 'hit' | 'coalesced',
): void {
  const { requestId, client } = envelope.meta;
  journal?.emit({ type: 'cache', requestId, client, outcome });
}

import {
  type Logger,
  PAUSE_SCOPES,
  type Pause,
  type PauseScope,
  Pauses,
  pausedPartition,
  type RedisClient,
  tryParseDuration,
  tryParseRfc3339,
  UsageError,
} from '@requester/shared';
import { type AdminActionEvent, recordAdminAction } from '../audit.ts';
import { originArg } from '../breakers/index.ts';
import { isoTime } from '../format.ts';

/**
 * Pause and resume (issue 22): the operation behind `requester pause|resume|pauses`, the admin
 * API's `/admin/api/pauses…` and the Pauses page. Holds the work of one origin, client or
 * partition (@requester/shared pause: every executor honours it from its next lease; paused work
 * stays queued in order and is not attempted), recorded as an operator action
 * (`pause` / `resume`) with its actor.
 */
export interface PauseParts {
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  journalAdminAction?: (event: AdminActionEvent) => Promise<void>;
}

/** What an operator names: a scope, its value, the client of a partition, an end. */
export interface PauseTarget {
  scope: string;
  value: string;
  /** For a partition: whose (partitions are per client); none = a partition without a client. */
  client?: string | undefined;
}

export interface PauseRow {
  scope: PauseScope;
  value: string;
  by: string;
  since: string | null;
  until: string | null;
}

export function pauseRow(p: Pause): PauseRow {
  return { scope: p.scope, value: p.value, by: p.by, since: isoTime(p.at), until: isoTime(p.until) };
}

/** The scope and the stored value of a target: an origin normalized, a partition in its client's namespace. */
export function pauseKey(target: PauseTarget): { scope: PauseScope; value: string } {
  const scope = target.scope as PauseScope;
  if (!PAUSE_SCOPES.includes(scope))
    throw new UsageError(
      `scope must be one of ${PAUSE_SCOPES.join(', ')}, got ${JSON.stringify(target.scope)}`,
    );
  const raw = target.value?.trim() ?? '';
  if (!raw) throw new UsageError(`pause ${scope} needs a value (${examples[scope]})`);
  if (scope === 'origin') return { scope, value: originArg(raw, 'pause') };
  // A partition may be named already in its client's namespace (`!order-42 @billing`, as listed).
  const name = scope === 'partition' && !target.client ? /^[\x21-\x7e]+( @[\x21-\x7e]+)?$/ : /^[\x21-\x7e]+$/;
  if (raw.length > 300 || !name.test(raw))
    throw new UsageError(`not a ${scope} name: ${JSON.stringify(raw)}`);
  return { scope, value: scope === 'partition' ? pausedPartition(target.client || undefined, raw) : raw };
}

const examples: Record<PauseScope, string> = {
  origin: 'https://api.partner.example',
  client: 'an API key name',
  partition: '!order-42, with --client',
  destination: 'a destination name (requester destinations list)',
};

/** `until`: RFC 3339, or a Go duration from now (`2h`); blank = until resumed. */
export function untilArg(text: string | undefined, now = Date.now()): number | null {
  const value = text?.trim();
  if (!value) return null;
  const duration = tryParseDuration(value);
  if (duration.ok) return now + Math.max(1, Number(duration.ns / 1_000_000n));
  const instant = tryParseRfc3339(value);
  if (!instant.ok)
    throw new UsageError(`until: ${JSON.stringify(value)} is neither an RFC 3339 time nor a duration (2h)`);
  if (instant.epochMs <= now) throw new UsageError(`until: ${value} is in the past`);
  return instant.epochMs;
}

export async function pauseWork(
  parts: PauseParts,
  actor: string,
  target: PauseTarget,
  until: number | null,
): Promise<PauseRow> {
  const { scope, value } = pauseKey(target);
  const pause = await new Pauses(parts.redis, parts.prefix).pause(scope, value, actor, until);
  await recordAdminAction(
    parts.logger,
    { action: 'pause', actor, target: { scope, value, until: isoTime(until) }, outcome: 'done' },
    parts.journalAdminAction,
  );
  return pauseRow(pause);
}

export async function resumeWork(
  parts: PauseParts,
  actor: string,
  target: PauseTarget,
): Promise<{ scope: PauseScope; value: string; resumed: boolean }> {
  const { scope, value } = pauseKey(target);
  const resumed = await new Pauses(parts.redis, parts.prefix).resume(scope, value);
  await recordAdminAction(
    parts.logger,
    { action: 'resume', actor, target: { scope, value, resumed }, outcome: 'done' },
    parts.journalAdminAction,
  );
  return { scope, value, resumed };
}

export async function listPauses(parts: Pick<PauseParts, 'redis' | 'prefix'>): Promise<PauseRow[]> {
  return (await new Pauses(parts.redis, parts.prefix).list()).map(pauseRow);
}

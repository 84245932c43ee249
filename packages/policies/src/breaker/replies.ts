import type { BreakerState, HoldReason } from './types.ts';

/**
 * How the scripts' replies and the indexes' members are read: the codes of includes/state.lua,
 * the members naming a caller's own breaker, and Redis time on the local clock.
 */

export const STATES: readonly BreakerState[] = ['closed', 'open', 'half_open'];
/** Indexed by the scripts' `held` code (includes/state.lua). */
export const HOLDS: ReadonlyArray<HoldReason | undefined> = [undefined, 'failing', 'opt_out'];
export const HOLD_CODES: Readonly<Record<string, HoldReason>> = { '1': 'failing', '2': 'opt_out' };
export const TRANSITIONS = [
  undefined,
  { from: 'closed', to: 'open' },
  { from: 'half_open', to: 'open' },
  { from: 'half_open', to: 'closed' },
] as const;

/** The held index's member of a hold: the origin, or the origin and the client whose breaker it is. */
export function heldMember(origin: string, client: string | undefined): string {
  return client === undefined ? origin : `${origin}\n${client}`;
}

export function ofHeldMember(member: string): { origin: string; client?: string } {
  const end = member.indexOf('\n');
  return end < 0 ? { origin: member } : { origin: member.slice(0, end), client: member.slice(end + 1) };
}

/** A Redis-time instant on the local clock (the script replied `now` alongside it). */
export function toLocal(redisMs: number, redisNowMs: number): number {
  return Date.now() + (redisMs - redisNowMs);
}

import { inspectLimiter, type LimiterWindowState, limiterWindows } from '@requester/policies';
import { Pauses } from '@requester/shared';
import {
  destinationBreakerKey,
  destinationLimiterKey,
  destinationOrigin,
} from '@requester/shared/destinations';
import { type BreakerView, showBreaker } from '../breakers/index.ts';
import { isoTime } from '../format.ts';
import { type OriginParts, type OriginView, showOrigin } from '../origins/index.ts';
import { type PauseRow, pauseRow } from '../pause/index.ts';
import type { DestinationView } from './index.ts';

const pauseRowOf = (pause: Parameters<typeof pauseRow>[0] | undefined) => (pause ? pauseRow(pause) : null);

/**
 * How a destination is doing, as an operator checks it before and after a change: the state every
 * executor shares about its origin (breaker, calls in flight against the cap, pace, pause, the
 * calls of the last minutes) and its quota's windows now, with its own breaker when it has one.
 * The calls are the origin's: two destinations on one origin show the same figures.
 */
export interface DestinationStatus {
  destination: string;
  version: number;
  /** Its own pause (`requester pause destination`); its origin's is `origin.pause`. */
  pause: PauseRow | null;
  origin: OriginView;
  /** Its own breaker (`spec.breaker`); null: its calls go through its origin's (`origin.breaker`). */
  breaker: BreakerView | null;
  /** Whether its calls follow its origin's pace (`origin.pace`). */
  pacing: boolean;
  /** Its limiter's windows (used, limit, when each resets); empty without a limiter. */
  quota: Array<Omit<LimiterWindowState, 'resetAtMs'> & { resetAt: string | null }>;
}

export async function destinationStatus(
  parts: OriginParts,
  view: DestinationView,
  now = Date.now(),
): Promise<DestinationStatus> {
  const limiter = view.limiter as Parameters<typeof limiterWindows>[0] | undefined;
  const [origin, breaker, pauses, windows] = await Promise.all([
    showOrigin(parts, destinationOrigin(view), now),
    view.breaker ? showBreaker(parts.breaker, destinationBreakerKey(view.name)) : null,
    new Pauses(parts.redis, parts.config.redisPrefix).list(now),
    limiter
      ? inspectLimiter(
          parts.redis,
          `${parts.config.redisPrefix}:`,
          destinationLimiterKey(view.name),
          limiterWindows(limiter),
        )
      : [],
  ]);
  return {
    destination: view.name,
    version: view.version,
    pause: pauseRowOf(pauses.find((p) => p.scope === 'destination' && p.value === view.name)),
    origin,
    breaker,
    pacing: view.pacing !== false,
    quota: windows.map(({ resetAtMs, ...w }) => ({ ...w, resetAt: isoTime(resetAtMs) })),
  };
}

/** The sync-gateway: sync calls, long-polls, the result cache, journal lookups. */

import { bool, goDuration, positiveInt } from '../values.ts';
import { variable } from '../variable.ts';

export const syncVariables = {
  syncTimeout: variable(
    'SYNC_TIMEOUT',
    '25s',
    goDuration,
    'how long a sync call waits before 202 + Location',
  ),
  // 32 MiB, not 64: all roles in one process at ~2,000 results/s, 64 MiB took ~100,000 results
  // (minutes of a steady load) to fill, and RSS climbed burst after burst until then, which an
  // operator reads as a leak; 32 MiB is full within ~20 s there, and holds every result of the
  // last SYNC_CACHE_TTL up to ~120 results/s.
  syncCacheMaxBytes: variable(
    'SYNC_CACHE_MAX_BYTES',
    '33554432',
    positiveInt,
    'bytes of results the sync-gateway keeps for callers that ask after the fact (LRU; result JSON + ~256 B per entry); a bigger result still answers the callers waiting for it, but is not kept',
  ),
  syncMaxWaiters: variable(
    'SYNC_MAX_WAITERS',
    '10000',
    positiveInt,
    'callers one sync-gateway holds waiting at once (sync calls and long-polls); beyond it a sync call gets 202 + Location at once and a long-poll 503 + Retry-After',
  ),
  syncMaxWaitersPerKey: variable(
    'SYNC_MAX_WAITERS_PER_KEY',
    undefined,
    positiveInt.optional(),
    "callers of one API key one sync-gateway holds waiting at once (inside SYNC_MAX_WAITERS): beyond it that key's sync call gets 202 + Location at once and its long-poll 429 + Retry-After; default SYNC_MAX_WAITERS / 10 rounded up (1000 with 10000)",
  ),
  eventsMaxLookupsPerKey: variable(
    'EVENTS_MAX_LOOKUPS_PER_KEY',
    '4',
    positiveInt,
    'GET /requests/{id}/events lookups of one API key one sync-gateway runs at once (each reads a partition of the journal topic); beyond it that key gets 429 + Retry-After',
  ),
  syncCacheTtl: variable(
    'SYNC_CACHE_TTL',
    '5m',
    goDuration,
    'how long the sync-gateway keeps a result for callers that ask after the fact',
  ),
  syncFollowOut: variable(
    'SYNC_FOLLOW_OUT',
    'true',
    bool,
    'how sync results reach the gateways (set it alike on gateways and executors). Sync calls are answered through Redis sharded pub/sub to the gateway that took them either way. true: each sync-gateway also reads all of `out`, so a long-poll on any gateway sees every result, async ones included, but with N gateways every result is read N times (N² reads when gateways grow with callers). false: a gateway reads only its own channel, and executors also keep each sync result in Redis for SYNC_CACHE_TTL, where a long-poll on any gateway finds it (re-read every second while it waits); long-polls of async requests get 404 pending',
  ),
  longPollMax: variable(
    'LONG_POLL_MAX',
    '60s',
    goDuration,
    'cap on the `wait` of GET /requests/{id} (longer asks are shortened to this)',
  ),
};

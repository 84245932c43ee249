--[[
  State of one origin's circuit breaker (textually included by every breaker script).

  Every script receives the two keys of one origin, both tagged {b:<sha256(origin)>} (see keys.ts),
  so a script is a single-slot operation on Redis Cluster:
    KEYS[1]  state   HASH
               f  consecutive failures while closed; 0 = the last outcome was a success ("proven").
                  Absent on a closed breaker = never seen (or forgotten): not proven yet.
               u  open-until (ms, Redis time). Present iff the breaker is open (now < u) or
                  half-open (now >= u); absent = closed.
               n  opens in a row (the open duration doubles with each, up to a cap)
               s  when the current run of opens began (ms): "open for how long", for backpressure
               o  the origin, for listings
               fs when the origin's current run of failures began (ms): its first failure since its
                  last success. Absent = the last outcome was a success (or never seen).
               fc failures in that run (every recorded failure, probes included)
               h  held since (ms): the origin is held back ("failing-held"), present iff held
               hw why it is held: HOLD_FAILING (the run of failures reached its bound: one probe
                  per hold period finds it back) or HOLD_OPT_OUT (the receiver asked to stop: no
                  probe, only an operator's reset ends it)
    KEYS[2]  trials  ZSET ticket -> lease deadline (ms). Calls admitted while the outcome of the
                     origin is in doubt: the half-open probe (at most 1), or the calls of a closed
                     origin that is not proven (at most threshold - f). A dead caller's slot comes
                     back when its lease ends.

  The same two keys exist per caller of the origin (a client: docs/architecture.md §9, "whose
  trouble"), tagged like the origin's so that one script call sees both scopes:
    KEYS[3]  the caller's state   HASH, the fields above; absent = nothing failed for this caller
    KEYS[4]  the caller's trials  ZSET, as KEYS[2]
    KEYS[5]  callers              SET of the callers of the origin that have a state (for reset)
  The origin's state then also keeps the callers of its run of failures:
               fcl the caller whose failure began the run
               mx  1 once another caller failed in the same run: the origin fails, not a caller.

  States: CLOSED 0, OPEN 1, HALF_OPEN 2. A held origin (or caller) is open or half-open.
]]
local K_STATE = KEYS[1]
local K_TRIALS = KEYS[2]

-- The scripts run the same rules on the origin's keys, then on the caller's: the functions below
-- read the scope's keys from these two upvalues.
local function useScope(stateKey, trialsKey)
  K_STATE = stateKey
  K_TRIALS = trialsKey
end

local CLOSED = 0
local OPEN = 1
local HALF_OPEN = 2

local NOT_HELD = 0
local HOLD_FAILING = 1
local HOLD_OPT_OUT = 2

-- Redis time, never the caller's clock: every executor agrees on when an origin half-opens.
--- @include "shared/now"

-- Returns state, failures (nil = not seen), open-until (nil when closed), held (NOT_HELD, HOLD_*).
local function readState(now)
  local fields = redis.call('HMGET', K_STATE, 'f', 'u', 'hw')
  local failures = tonumber(fields[1])
  local untilMs = tonumber(fields[2])
  local held = tonumber(fields[3]) or NOT_HELD
  if untilMs == nil then
    return CLOSED, failures, nil, NOT_HELD
  end
  if now < untilMs then
    return OPEN, failures, untilMs, held
  end
  return HALF_OPEN, failures, untilMs, held
end

-- The next probe instant of a held origin: the first after now on its grid of hold periods from
-- `untilMs`. Refused callers are sent there, so each comes back once per period, when a probe
-- may go, instead of polling while the probe is out.
local function nextProbeAt(untilMs, now, periodMs)
  if now < untilMs then
    return untilMs
  end
  return untilMs + periodMs * (math.floor((now - untilMs) / periodMs) + 1)
end

-- Trials still holding a slot; lapsed leases are dropped first.
local function liveTrials(now)
  redis.call('ZREMRANGEBYSCORE', K_TRIALS, '-inf', now)
  return redis.call('ZCARD', K_TRIALS)
end

-- When a refused caller should come back: after busyMs, or sooner when a slot's lease ends.
local function busyRetryAt(now, busyMs)
  local at = now + busyMs
  local first = redis.call('ZRANGE', K_TRIALS, 0, 0, 'WITHSCORES')
  if first[2] then
    at = math.min(at, tonumber(first[2]))
  end
  return at
end

--[[
  May a call to this origin, by this caller, go ahead? The origin's breaker first, then the
  caller's (a caller with no state has nothing failing: it adds no condition):
    closed and proven      -> yes, without a slot (callers may cache this and skip Redis)
    closed, not proven     -> yes while failures + live trials < threshold, taking a trial slot
    open (now < u)         -> no, come back at u
    half-open (now >= u)   -> the first caller takes the single slot and is the probe; others no
  A held origin (see includes/state.lua): failing-held, it is probed as above, but a caller refused
  while the probe is out comes back at the next probe instant (one lease per hold period, not a
  poll every busy retry); held at the receiver's request (opt-out), nobody goes, and the refusal
  moves its open-until one hold period on. A caller's breaker follows the same rules for its calls
  alone. A call the caller's breaker refuses gives back the slot the origin's gave it.

  KEYS[1..5] origin state, origin trials, caller state, caller trials, callers (includes/state.lua)
  ARGV[1]  failure threshold
  ARGV[2]  trial lease (ms): how long a slot is held when its caller never reports
  ARGV[3]  ticket: a unique id for the slot
  ARGV[4]  busy retry (ms): when refused callers of a busy origin should come back
  ARGV[5]  hold period (ms): the probe period of a held origin
  ARGV[6]  the caller ('' = none: the origin's breaker alone)

  Returns {admitted, probe, retryAtMs, nowMs, state, proven, held, scope, callerProbe}
    admitted 1/0; probe 1 for the origin's half-open probe; retryAtMs (Redis time) when refused,
    else 0; state as in includes/state.lua; proven 1 when closed and the last outcome was a
    success (in both scopes); held NOT_HELD, HOLD_FAILING or HOLD_OPT_OUT; scope 1 when the
    refusal or the hold is the caller's breaker's, 0 the origin's; callerProbe 1 for the caller's
    half-open probe.
]]
--- @include "includes/state"

local threshold = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local ticket = ARGV[3]
local busyMs = tonumber(ARGV[4])
local periodMs = tonumber(ARGV[5])
local caller = ARGV[6]
local now = nowMs()

-- The rules on the scope in use; the last value: whether a trial slot was taken.
local function admit()
  local state, failures, untilMs, held = readState(now)
  if held == HOLD_OPT_OUT then
    if state == HALF_OPEN then
      untilMs = nextProbeAt(untilMs, now, periodMs)
      redis.call('HSET', K_STATE, 'u', untilMs)
    end
    return { 0, 0, untilMs, now, OPEN, 0, held }, false
  end
  if state == OPEN then
    return { 0, 0, untilMs, now, OPEN, 0, held }, false
  end
  if state == CLOSED and failures == 0 then
    return { 1, 0, 0, now, CLOSED, 1, held }, false
  end

  -- In doubt: a bounded number of calls may find out. Half-open: exactly one (the probe).
  -- Closed: as many as the failures still allowed (at least 1, should the threshold have been lowered).
  local budget = 1
  if state == CLOSED then
    budget = math.max(1, threshold - (failures or 0))
  end
  if liveTrials(now) >= budget then
    local retryAt = busyRetryAt(now, busyMs)
    if held ~= NOT_HELD then
      retryAt = nextProbeAt(untilMs, now, periodMs)
    end
    return { 0, 0, retryAt, now, state, 0, held }, false
  end
  redis.call('ZADD', K_TRIALS, now + leaseMs, ticket)
  redis.call('PEXPIRE', K_TRIALS, leaseMs)
  local probe = 0
  if state == HALF_OPEN then
    probe = 1
  end
  return { 1, probe, 0, now, state, 0, held }, true
end

local reply, slot = admit()
reply[8] = 0
reply[9] = 0
if reply[1] == 0 or caller == '' or redis.call('EXISTS', KEYS[3]) == 0 then
  return reply
end
useScope(KEYS[3], KEYS[4])
local mine = admit()
if mine[1] == 0 then
  if slot then
    redis.call('ZREM', KEYS[2], ticket)
  end
  mine[8] = 1
  mine[9] = 0
  return mine
end
-- Admitted by both: proven only when both are; the probes of either scope are the call's.
reply[6] = math.min(mine[6], reply[6])
reply[9] = mine[2]
if reply[7] == NOT_HELD and mine[7] ~= NOT_HELD then
  reply[7] = mine[7]
  reply[8] = 1
end
if reply[5] == CLOSED then
  reply[5] = mine[5]
end
return reply

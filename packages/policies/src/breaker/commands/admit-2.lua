--[[
  May a call to this origin go ahead?
    closed and proven      -> yes, without a slot (callers may cache this and skip Redis)
    closed, not proven     -> yes while failures + live trials < threshold, taking a trial slot
    open (now < u)         -> no, come back at u
    half-open (now >= u)   -> the first caller takes the single slot and is the probe; others no

  KEYS[1..2] state, trials (see includes/state.lua)
  ARGV[1]  failure threshold
  ARGV[2]  trial lease (ms): how long a slot is held when its caller never reports
  ARGV[3]  ticket: a unique id for the slot
  ARGV[4]  busy retry (ms): when refused callers of a busy origin should come back

  Returns {admitted, probe, retryAtMs, nowMs, state, proven}
    admitted 1/0; probe 1 for the half-open probe; retryAtMs (Redis time) when refused, else 0;
    state as in includes/state.lua; proven 1 when closed and the last outcome was a success.
]]
--- @include "includes/state"

local threshold = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local ticket = ARGV[3]
local busyMs = tonumber(ARGV[4])
local now = nowMs()

local state, failures, untilMs = readState(now)
if state == OPEN then
  return { 0, 0, untilMs, now, OPEN, 0 }
end
if state == CLOSED and failures == 0 then
  return { 1, 0, 0, now, CLOSED, 1 }
end

-- In doubt: a bounded number of calls may find out. Half-open: exactly one (the probe).
-- Closed: as many as the failures still allowed (at least 1, should the threshold have been lowered).
local budget = 1
if state == CLOSED then
  budget = math.max(1, threshold - (failures or 0))
end
if liveTrials(now) >= budget then
  return { 0, 0, busyRetryAt(now, busyMs), now, state, 0 }
end
redis.call('ZADD', K_TRIALS, now + leaseMs, ticket)
redis.call('PEXPIRE', K_TRIALS, leaseMs)
local probe = 0
if state == HALF_OPEN then
  probe = 1
end
return { 1, probe, 0, now, state, 0 }

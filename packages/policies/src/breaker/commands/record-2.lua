--[[
  The outcome of an admitted call.
    closed:    success -> proven (f = 0, trials dropped); failure -> f + 1, and at threshold: open
               for the open duration (run of opens n = 1)
    half-open: the probe's success -> closed and proven; its failure -> open again, for twice the
               previous duration (openMs * 2^(n-1), capped at maxOpenMs)
    otherwise  (open, or a non-probe call in half-open): a late outcome of a call admitted before the
               breaker opened; ignored, so that stale answers neither extend nor end an open period.

  KEYS[1..2] state, trials (see includes/state.lua)
  ARGV[1]  failure threshold
  ARGV[2]  open duration (ms) of the first open
  ARGV[3]  cap on the open duration (ms)
  ARGV[4]  state TTL (ms) past the open period: an origin not heard of for this long is forgotten
  ARGV[5]  1 success, 0 failure
  ARGV[6]  1 when the call was admitted as the probe
  ARGV[7]  the call's ticket ('' when it was admitted without a slot)
  ARGV[8]  the origin (kept in the state for listings)

  Returns {state, retryAtMs, nowMs, proven, transition}
    retryAtMs: open-until (Redis time) when open, else 0; proven as in admit;
    transition 0 none, 1 closed -> open, 2 half-open -> open, 3 half-open -> closed.
]]
--- @include "includes/state"

local threshold = tonumber(ARGV[1])
local openMs = tonumber(ARGV[2])
local maxOpenMs = tonumber(ARGV[3])
local ttlMs = tonumber(ARGV[4])
local success = ARGV[5] == '1'
local probe = ARGV[6] == '1'
local ticket = ARGV[7]
local origin = ARGV[8]
local now = nowMs()

local function keep(extraMs)
  redis.call('PEXPIRE', K_STATE, ttlMs + extraMs)
end

local function close()
  redis.call('HSET', K_STATE, 'f', 0)
  redis.call('HDEL', K_STATE, 'u', 'n', 's')
  -- Proven: calls no longer need a slot.
  redis.call('DEL', K_TRIALS)
  keep(0)
end

-- Opens for the n-th time in a row; returns the open-until.
local function open(n, since)
  local duration = math.floor(math.min(openMs * 2 ^ (math.min(n, 64) - 1), maxOpenMs))
  local untilMs = now + duration
  redis.call('HSET', K_STATE, 'u', untilMs, 'n', n, 's', since, 'o', origin)
  redis.call('HDEL', K_STATE, 'f')
  -- Calls still out were admitted before: their late outcomes are ignored, their slots are void.
  redis.call('DEL', K_TRIALS)
  keep(duration)
  return untilMs
end

local state, failures = readState(now)
if ticket ~= '' then
  redis.call('ZREM', K_TRIALS, ticket)
end

if state == CLOSED then
  if success then
    close()
    return { CLOSED, 0, now, 1, 0 }
  end
  failures = (failures or 0) + 1
  if failures >= threshold then
    return { OPEN, open(1, now), now, 0, 1 }
  end
  redis.call('HSET', K_STATE, 'f', failures)
  keep(0)
  return { CLOSED, 0, now, 0, 0 }
end

if state == HALF_OPEN and probe then
  if success then
    close()
    return { CLOSED, 0, now, 1, 3 }
  end
  local fields = redis.call('HMGET', K_STATE, 'n', 's')
  local n = (tonumber(fields[1]) or 1) + 1
  return { OPEN, open(n, tonumber(fields[2]) or now), now, 0, 2 }
end

local untilMs = tonumber(redis.call('HGET', K_STATE, 'u'))
if state == OPEN then
  return { OPEN, untilMs, now, 0, 0 }
end
return { state, 0, now, 0, 0 }

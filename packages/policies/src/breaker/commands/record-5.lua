--[[
  The outcome of an admitted call.
    closed:    success -> proven (f = 0, trials dropped); failure -> f + 1, and at threshold: open
               for the open duration (run of opens n = 1)
    half-open: the probe's success -> closed and proven; its failure -> open again, for twice the
               previous duration (openMs * 2^(n-1), capped at maxOpenMs)
    otherwise  (open, or a non-probe call in half-open): a late outcome of a call admitted before the
               breaker opened; ignored, so that stale answers neither extend nor end an open period.
  The run of failures (fs, fc) grows with every failure counted above and ends with a success.
  When it has lasted holdAfterMs, or counts holdFailures, the origin is held (HOLD_FAILING): open
  for one hold period, then probed once per period on a fixed grid until a probe succeeds. A
  call whose answer carries the receiver's opt-out holds the origin at once (HOLD_OPT_OUT), with
  no probe and no expiry: only an operator's reset (DEL of the keys) ends it.

  With a caller (ARGV[13]), the origin's rules above count only what fails for several callers: a
  run of failures of one caller alone (fcl) neither opens nor holds the origin (its calls stay
  free for the others); once a second caller fails before a success ends the run (mx), the origin
  counts from there, one failure of each caller, and opens at the threshold as above. The caller's own breaker (KEYS[3..4]) then takes
  the outcome under the same rules, for that caller's calls alone, and an opt-out holds the caller
  only: the receiver answered that caller. A caller's breaker that closes is deleted (absent =
  nothing failing), so healthy callers cost no state.

  KEYS[1..5] origin state, origin trials, caller state, caller trials, callers (includes/state.lua)
  ARGV[1]  failure threshold
  ARGV[2]  open duration (ms) of the first open
  ARGV[3]  cap on the open duration (ms)
  ARGV[4]  state TTL (ms) past the open period: an origin not heard of for this long is forgotten
  ARGV[5]  1 success, 0 failure
  ARGV[6]  1 when the call was admitted as the origin's probe
  ARGV[7]  the call's ticket ('' when it was admitted without a slot)
  ARGV[8]  the origin (kept in the state for listings)
  ARGV[9]  hold after (ms): a run of failures this long holds the origin; 0 = never
  ARGV[10] hold failures: a run of this many failures holds the origin; 0 = never
  ARGV[11] 1 when the answer carried the receiver's opt-out
  ARGV[12] hold period (ms): the probe period of a held origin
  ARGV[13] the caller ('' = none: the origin's breaker alone, every failure counted)
  ARGV[14] 1 when the call was admitted as the caller's probe

  Returns {state, retryAtMs, nowMs, proven, transition, held, holdChange, heldSince, runFailures, runSince}
    retryAtMs: open-until (Redis time) when open, else 0; proven as in admit;
    transition 0 none, 1 closed -> open, 2 half-open -> open, 3 half-open -> closed;
    held as in admit (after this outcome); holdChange 0 none, 1 the hold began (or became an
    opt-out), 2 it ended (the probe succeeded); heldSince the hold's start (ms, 0 = none);
    runFailures, runSince: the run of failures (after this outcome; before it when it ended it).
    With a caller, 10 more: the same of the caller's breaker.
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
local holdAfterMs = tonumber(ARGV[9])
local holdFailures = tonumber(ARGV[10])
local optOut = ARGV[11] == '1'
local periodMs = tonumber(ARGV[12])
local caller = ARGV[13]
local callerProbe = ARGV[14] == '1'
local now = nowMs()

local NONE = 0
local HOLD_BEGAN = 1
local HOLD_ENDED = 2

local function keep(extraMs)
  redis.call('PEXPIRE', K_STATE, ttlMs + extraMs)
end

local function runOf()
  local fields = redis.call('HMGET', K_STATE, 'fc', 'fs', 'h')
  return tonumber(fields[1]) or 0, tonumber(fields[2]) or 0, tonumber(fields[3]) or 0
end

local function close()
  redis.call('HSET', K_STATE, 'f', 0)
  redis.call('HDEL', K_STATE, 'u', 'n', 's', 'fs', 'fc', 'h', 'hw', 'fcl', 'mx')
  -- Proven: calls no longer need a slot.
  redis.call('DEL', K_TRIALS)
  keep(0)
end

-- One more failure in the run; returns its count and start.
local function failed()
  local count, since = runOf()
  if since == 0 then
    since = now
  end
  count = count + 1
  redis.call('HSET', K_STATE, 'fc', count, 'fs', since)
  return count, since
end

local function holdDue(count, since)
  return (holdAfterMs > 0 and now - since >= holdAfterMs) or (holdFailures > 0 and count >= holdFailures)
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

-- Holds the origin (why: HOLD_*), open for one hold period; returns the record's reply.
local function hold(why, transition)
  local fields = redis.call('HMGET', K_STATE, 'n', 's', 'h')
  local n = (tonumber(fields[1]) or 0) + 1
  open(n, tonumber(fields[2]) or now)
  local untilMs = now + periodMs
  local since = tonumber(fields[3]) or now
  redis.call('HSET', K_STATE, 'u', untilMs, 'h', since, 'hw', why)
  if why == HOLD_OPT_OUT then
    -- The receiver's word stands until an operator's: the state does not expire.
    redis.call('PERSIST', K_STATE)
  else
    keep(periodMs)
  end
  local count, runSince = runOf()
  return { OPEN, untilMs, now, 0, transition, why, HOLD_BEGAN, since, count, runSince }
end

-- The rules on the scope in use (useScope); `shared`: the origin's, with a caller.
local function step(probe, optOut, shared)
  local state, failures, untilMs, held = readState(now)
  if ticket ~= '' then
    redis.call('ZREM', K_TRIALS, ticket)
  end
  if shared then
    -- A receiver's opt-out answered the caller: its own breaker holds it, not the origin.
    optOut = false
  end

  local transitionToOpen = 0
  if state == CLOSED then
    transitionToOpen = 1
  elseif state == HALF_OPEN then
    transitionToOpen = 2
  end

  if optOut and held ~= HOLD_OPT_OUT then
    return hold(HOLD_OPT_OUT, transitionToOpen)
  end

  if state == CLOSED then
    if success then
      close()
      return { CLOSED, 0, now, 1, 0, NOT_HELD, NONE, 0, 0, 0 }
    end
    if shared then
      local run = redis.call('HMGET', K_STATE, 'fcl', 'mx')
      if run[2] then
        failures = (failures or 0) + 1
      elseif run[1] and run[1] ~= caller then
        -- A second caller fails: the origin does. Its run begins here, with one failure of each.
        redis.call('HSET', K_STATE, 'mx', 1, 'fc', 1, 'fs', now)
        failures = 2
      else
        -- One caller's failures are its own (its breaker counts them): the origin stays as it was.
        if not run[1] then
          redis.call('HSET', K_STATE, 'fcl', caller)
        end
        keep(0)
        local proven = 0
        if failures == 0 then
          proven = 1
        end
        return { CLOSED, 0, now, proven, 0, NOT_HELD, NONE, 0, 0, 0 }
      end
    else
      failures = (failures or 0) + 1
    end
    local count, since = failed()
    if holdDue(count, since) then
      return hold(HOLD_FAILING, 1)
    end
    if failures >= threshold then
      return { OPEN, open(1, now), now, 0, 1, NOT_HELD, NONE, 0, count, since }
    end
    redis.call('HSET', K_STATE, 'f', failures)
    keep(0)
    return { CLOSED, 0, now, 0, 0, NOT_HELD, NONE, 0, count, since }
  end

  if state == HALF_OPEN and probe and held ~= HOLD_OPT_OUT then
    if success then
      local count, since, heldSince = runOf()
      close()
      if held ~= NOT_HELD then
        return { CLOSED, 0, now, 1, 3, NOT_HELD, HOLD_ENDED, heldSince, count, since }
      end
      return { CLOSED, 0, now, 1, 3, NOT_HELD, NONE, 0, 0, 0 }
    end
    local count, since = failed()
    if held ~= NOT_HELD then
      -- Still failing: the next probe at the next instant of the grid, where the refused wait.
      local nextAt = nextProbeAt(untilMs, now, periodMs)
      redis.call('HSET', K_STATE, 'u', nextAt)
      redis.call('DEL', K_TRIALS)
      keep(nextAt - now)
      local heldSince = tonumber(redis.call('HGET', K_STATE, 'h')) or now
      return { OPEN, nextAt, now, 0, 2, held, NONE, heldSince, count, since }
    end
    if holdDue(count, since) then
      return hold(HOLD_FAILING, 2)
    end
    local fields = redis.call('HMGET', K_STATE, 'n', 's')
    local n = (tonumber(fields[1]) or 1) + 1
    return { OPEN, open(n, tonumber(fields[2]) or now), now, 0, 2, NOT_HELD, NONE, 0, count, since }
  end

  local heldSince = 0
  if held ~= NOT_HELD then
    heldSince = tonumber(redis.call('HGET', K_STATE, 'h')) or 0
  end
  if state == OPEN then
    return { OPEN, untilMs, now, 0, 0, held, NONE, heldSince, 0, 0 }
  end
  return { state, 0, now, 0, 0, held, NONE, heldSince, 0, 0 }
end

local reply = step(probe, optOut, caller ~= '')
if caller == '' then
  return reply
end
local K_CALLERS = KEYS[5]
useScope(KEYS[3], KEYS[4])
if success and not optOut and redis.call('EXISTS', K_STATE) == 0 then
  -- Nothing failing for this caller: it keeps no state.
  if ticket ~= '' then
    redis.call('ZREM', K_TRIALS, ticket)
  end
  return reply
end
local mine = step(callerProbe, optOut, false)
if mine[1] == CLOSED and mine[4] == 1 then
  redis.call('DEL', K_STATE, K_TRIALS)
  redis.call('SREM', K_CALLERS, caller)
else
  -- The callers with a state, for a reset: kept as long as the longest of their states.
  local fresh = redis.call('EXISTS', K_CALLERS) == 0
  redis.call('SADD', K_CALLERS, caller)
  local keepMs = redis.call('PTTL', K_STATE)
  local hasMs = redis.call('PTTL', K_CALLERS)
  if keepMs == -1 then
    redis.call('PERSIST', K_CALLERS)
  elseif fresh or (hasMs ~= -1 and hasMs < keepMs) then
    redis.call('PEXPIRE', K_CALLERS, keepMs)
  end
end
for _, value in ipairs(mine) do
  table.insert(reply, value)
end
return reply

--[[
  The multi-window decision shared by every limiter script (textually included).

  ARGV[1]                   cost: calls this take consumes (integer >= 1)
  ARGV[2]                   dispatch budget (ms, >= 0): the latest the caller may send the call after
                            this decision. 0: the call is counted at the decision. Only the sliding
                            log uses it (a two-phase take: see slidingLog-1.lua); the others ignore it.
  ARGV[2i+1], ARGV[2i+2]    window i: duration (ms, >= 1), value (calls allowed per duration)

  The including script defines two functions and returns decide(inspect, commit):
    inspect(w)       reads window w at NOW_US and sets
                       w.allows     whether the window admits COST now
                       w.waitUs     when it does not: microseconds until it would (no other take assumed)
                       w.remaining  calls of cost 1 the window admits now, before this take
    commit(windows)  consumes COST from every window and writes the state with a TTL; returns the
                     reservation to settle (a string) or nothing.
  Every window is inspected before any is committed, so a denial consumes nothing anywhere: the
  popular "union of limiters" consumes the windows that allowed before finding one that denies.

  Reply {outcome, retryAfterMs, remaining, nowUs, reservation}:
    outcome       1 allowed (consumed), 0 limited, -1 COST exceeds a window's value: never allowed,
                  whatever the wait (a distinct answer, so that callers do not retry forever)
    retryAfterMs  when limited: the largest wait over the denying windows, rounded up (>= 1)
    remaining     calls of cost 1 still admitted by the tightest window (after this take if allowed)
    nowUs         the Redis clock of the decision (microseconds since the Unix epoch)
    reservation   when allowed by a two-phase take: the name the caller settles it by; else ''

  Time is Redis TIME, never the caller's clock. Numbers above 2^47 (microsecond timestamps) are
  written with fmt(): Lua's default number-to-string keeps only 14 significant digits.
]]
local OUTCOME_ALLOWED = 1
local OUTCOME_LIMITED = 0
local OUTCOME_OVERSIZED = -1

local COST = tonumber(ARGV[1])
local DISPATCH_US = tonumber(ARGV[2]) * 1000
local NOW_US
do
  local t = redis.call('TIME')
  NOW_US = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function fmt(n)
  return string.format('%.0f', n)
end

local function readWindows()
  local windows = {}
  for i = 1, (#ARGV - 2) / 2 do
    local ms = tonumber(ARGV[2 * i + 1])
    windows[i] = { index = i, ms = ms, us = ms * 1000, value = tonumber(ARGV[2 * i + 2]) }
  end
  return windows
end

local function decide(inspect, commit)
  local windows = readWindows()
  for _, w in ipairs(windows) do
    if COST > w.value then
      return { OUTCOME_OVERSIZED, 0, 0, NOW_US, '' }
    end
  end
  local allows, waitUs, remaining = true, 0, math.huge
  for _, w in ipairs(windows) do
    inspect(w)
    remaining = math.min(remaining, math.max(0, math.floor(w.remaining)))
    if not w.allows then
      allows = false
      waitUs = math.max(waitUs, w.waitUs)
    end
  end
  if not allows then
    return { OUTCOME_LIMITED, math.max(1, math.ceil(waitUs / 1000)), remaining, NOW_US, '' }
  end
  local reservation = commit(windows) or ''
  return { OUTCOME_ALLOWED, 0, math.max(0, remaining - COST), NOW_US, reservation }
end

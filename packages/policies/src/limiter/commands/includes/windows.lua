--[[
  The multi-window decision shared by every limiter script (textually included).

  ARGV[1]                   cost: calls this take consumes (integer >= 1)
  ARGV[2]                   dispatch budget (ms, >= 0): the latest the caller may send the call after
                            this decision. 0: the call is counted at the decision. Only the sliding
                            log uses it (a two-phase take: see slidingLog-n.lua); the others ignore it.
  ARGV[3]                   calendar quota: units per period; 0 = the limiter has none
  ARGV[4], ARGV[5]          the quota's current period [start, end), epoch ms, as the caller computed
                            it from its clock and the quota's calendar (Redis knows no time zones)
  ARGV[6]                   the caller's clock (epoch ms): the quota's now
  ARGV[2i+5], ARGV[2i+6]    window i: duration (ms, >= 1), value (calls allowed per duration)
  KEYS[#KEYS]               with a quota: its STRING "<start ms>:<end ms>:<count>", the period it
                            counts and the units spent in it; expires at the period's end. A stored
                            period later than the caller's (a process whose clock is ahead crossed
                            the reset first) is the current one; an earlier one counts nothing.

  The including script defines two functions and returns decide(inspect, commit):
    inspect(w)       reads window w at NOW_US and sets
                       w.allows     whether the window admits COST now
                       w.waitUs     when it does not: microseconds until it would (no other take assumed)
                       w.remaining  calls of cost 1 the window admits now, before this take
    commit(windows)  (called only when there are windows) consumes COST from every window and
                     writes the state with a TTL; returns the reservation to settle (a string) or
                     nothing.
  Every window and the quota are inspected before any is committed, so a denial consumes nothing
  anywhere: the popular "union of limiters" consumes the windows that allowed before finding one
  that denies.

  Reply {outcome, retryAfterMs, remaining, nowUs, reservation}:
    outcome       1 allowed (consumed), 0 limited, -1 COST exceeds a window's value: never allowed,
                  whatever the wait (a distinct answer, so that callers do not retry forever)
    retryAfterMs  when limited: the largest wait over the denying windows, rounded up (>= 1)
    remaining     calls of cost 1 still admitted by the tightest window (after this take if allowed)
    nowUs         the Redis clock of the decision (microseconds since the Unix epoch)
    reservation   when allowed by a two-phase take: the name the caller settles it by; else ''

  The windows' time is Redis TIME, never the caller's clock: their state lives and dies by it. The
  quota's period is a calendar reckoning in a time zone, which only the caller can make, so its
  now comes with it; a few milliseconds of skew between processes move a reset by as much.
  Numbers above 2^47 (microsecond timestamps) are written with fmt(): Lua's default
  number-to-string keeps only 14 significant digits.
]]
local OUTCOME_ALLOWED = 1
local OUTCOME_LIMITED = 0
local OUTCOME_OVERSIZED = -1

local COST = tonumber(ARGV[1])
local DISPATCH_US = tonumber(ARGV[2]) * 1000
local QUOTA = {
  value = tonumber(ARGV[3]),
  startMs = tonumber(ARGV[4]),
  endMs = tonumber(ARGV[5]),
  nowMs = tonumber(ARGV[6]),
  key = KEYS[#KEYS],
}
local FIRST_WINDOW_ARG = 7
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
  for i = 1, (#ARGV - FIRST_WINDOW_ARG + 1) / 2 do
    local at = FIRST_WINDOW_ARG + 2 * (i - 1)
    local ms = tonumber(ARGV[at])
    windows[i] = { index = i, ms = ms, us = ms * 1000, value = tonumber(ARGV[at + 1]) }
  end
  return windows
end

-- The quota's period and count now: the stored ones unless they are of an earlier period.
local function inspectQuota()
  local stored = redis.call('GET', QUOTA.key)
  QUOTA.count = 0
  if stored then
    local startMs, endMs, count = string.match(stored, '^(%d+):(%d+):(%d+)$')
    if startMs and tonumber(startMs) >= QUOTA.startMs then
      QUOTA.startMs, QUOTA.endMs, QUOTA.count = tonumber(startMs), tonumber(endMs), tonumber(count)
    end
  end
  QUOTA.allows = QUOTA.count + COST <= QUOTA.value
  QUOTA.waitUs = math.max(1, QUOTA.endMs - QUOTA.nowMs) * 1000
end

local function commitQuota()
  local state = fmt(QUOTA.startMs) .. ':' .. fmt(QUOTA.endMs) .. ':' .. fmt(QUOTA.count + COST)
  redis.call('SET', QUOTA.key, state, 'PXAT', fmt(QUOTA.endMs))
end

local function decide(inspect, commit)
  local windows = readWindows()
  for _, w in ipairs(windows) do
    if COST > w.value then
      return { OUTCOME_OVERSIZED, 0, 0, NOW_US, '' }
    end
  end
  if QUOTA.value > 0 and COST > QUOTA.value then
    return { OUTCOME_OVERSIZED, 0, 0, NOW_US, '' }
  end
  local allows, waitUs, remaining = true, 0, math.huge
  if QUOTA.value > 0 then
    inspectQuota()
    remaining = math.max(0, QUOTA.value - QUOTA.count)
    if not QUOTA.allows then
      allows, waitUs = false, QUOTA.waitUs
    end
  end
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
  if QUOTA.value > 0 then
    commitQuota()
  end
  local reservation = ''
  if #windows > 0 then
    reservation = commit(windows) or ''
  end
  return { OUTCOME_ALLOWED, 0, math.max(0, remaining - COST), NOW_US, reservation }
end

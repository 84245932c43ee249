--[[
  Sliding window counter: the fixed windows of fixedWindow-n.lua, where the previous window's count
  weighs in proportion to how much of it the sliding window [now - duration, now) still covers:
    estimate = previous * (1 - elapsed / duration) + current
  (elapsed = time since the current window began). Two counters per window instead of a log; an
  approximation of the sliding log that is exact when the previous window's calls were spread evenly.

  KEYS[i]  window i: STRING "<k>:<current>:<previous>", window number k and the counts of windows
           k and k - 1; expires when window k + 1 ends (its count still weighs during k + 1).
  KEYS[n]  last, when the limiter has a calendar quota: its count (includes/windows.lua)
  ARGV     see includes/windows.lua (cost, dispatch budget, quota, then duration ms and value per window)
  Returns  see includes/windows.lua

  Allowed iff estimate + cost <= value. When not, retryAfter is the first instant the estimate has
  decayed enough, assuming no other take:
    current + cost <= value: later in this window, when previous * (1 - e / d) <= value - cost - current
    otherwise:               in the next window, where the current count becomes the weighted one:
                             current * (1 - e' / d) <= value - cost
]]
--- @include "includes/windows"

-- Float noise must not refuse a take the arithmetic allows (1e-9 of a call is nothing).
local EPSILON = 1e-9

local function load(w)
  w.number = math.floor(NOW_US / w.us)
  w.current, w.previous = 0, 0
  local stored = redis.call('GET', KEYS[w.index])
  if not stored then
    return
  end
  local number, current, previous = string.match(stored, '^(%d+):(%d+):(%d+)$')
  number = tonumber(number)
  if number == w.number then
    w.current, w.previous = tonumber(current), tonumber(previous)
  elseif number == w.number - 1 then
    w.previous = tonumber(current)
  end
end

local function waitUs(w, elapsed)
  local room = w.value - COST - w.current
  if room >= 0 then
    return w.us * (1 - room / w.previous) - elapsed
  end
  return (w.us - elapsed) + math.max(0, w.us * (1 - (w.value - COST) / w.current))
end

local function inspect(w)
  load(w)
  local elapsed = NOW_US - w.number * w.us
  local estimate = w.previous * (1 - elapsed / w.us) + w.current
  w.allows = estimate + COST <= w.value + EPSILON
  w.waitUs = w.allows and 0 or waitUs(w, elapsed)
  w.remaining = w.value - estimate + EPSILON
end

local function commit(windows)
  for _, w in ipairs(windows) do
    local state = fmt(w.number) .. ':' .. fmt(w.current + COST) .. ':' .. fmt(w.previous)
    redis.call('SET', KEYS[w.index], state, 'PXAT', fmt((w.number + 2) * w.ms))
  end
end

return decide(inspect, commit)

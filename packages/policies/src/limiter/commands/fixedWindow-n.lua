--[[
  Fixed window counter: at most `value` calls in each window [k * duration, (k + 1) * duration),
  windows aligned to the Unix epoch (so that every process agrees on the boundaries).

  KEYS[i]  window i: STRING "<k>:<count>", the current window's number and the calls it admitted;
           expires at the window's end. The number is kept so that a key read in the first
           microseconds after the boundary (before Redis expires it) is not mistaken for the new window.
  KEYS[n]  last, when the limiter has a calendar quota: its count (includes/windows.lua)
  ARGV     see includes/windows.lua (cost, dispatch budget, quota, then duration ms and value per window)
  Returns  see includes/windows.lua

  Allowed iff count + cost <= value. When not: retryAfter = the window's remaining time (its TTL).
]]
--- @include "includes/windows"

local function inspect(w)
  w.number = math.floor(NOW_US / w.us)
  w.count = 0
  local stored = redis.call('GET', KEYS[w.index])
  if stored then
    local number, count = string.match(stored, '^(%d+):(%d+)$')
    if tonumber(number) == w.number then
      w.count = tonumber(count)
    end
  end
  w.allows = w.count + COST <= w.value
  w.waitUs = (w.number + 1) * w.us - NOW_US
  w.remaining = w.value - w.count
end

local function commit(windows)
  for _, w in ipairs(windows) do
    local state = fmt(w.number) .. ':' .. fmt(w.count + COST)
    redis.call('SET', KEYS[w.index], state, 'PXAT', fmt((w.number + 1) * w.ms))
  end
end

return decide(inspect, commit)

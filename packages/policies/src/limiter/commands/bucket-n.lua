--[[
  Token bucket and leaky bucket (as a meter): one GCRA policer per window.

  Both algorithms are this script; they differ only in their keys (tb / lb), so each keeps its own
  quota. With capacity = value and rate = value / duration they are the same policer seen from two
  sides: tokens = capacity - level.

  KEYS[i]  window i: STRING, the theoretical arrival time TAT (microseconds since the epoch): the
           instant the bucket is full of tokens again, i.e. the meter's level has leaked to zero.
           Absent = full bucket / empty meter. It expires exactly at TAT, when absence means the same.
  KEYS[n]  last, when the limiter has a calendar quota: its count (includes/windows.lua)
  ARGV     see includes/windows.lua (cost, dispatch budget, quota, then duration ms and value per window)
  Returns  see includes/windows.lua

  Emission interval T = duration / value. level = max(0, TAT - now) / T.
  Allowed iff level + cost <= capacity. When not:
    retryAfter = (level + cost - capacity) / rate  (= (cost - tokens) / rate for the token bucket).
]]
--- @include "includes/windows"

local function inspect(w)
  w.interval = w.us / w.value
  local tat = tonumber(redis.call('GET', KEYS[w.index])) or NOW_US
  w.base = math.max(tat, NOW_US)
  local levelUs = w.base - NOW_US
  local excessUs = levelUs + COST * w.interval - w.us
  w.allows = excessUs <= 0
  w.waitUs = excessUs
  w.remaining = (w.us - levelUs) / w.interval
end

local function commit(windows)
  for _, w in ipairs(windows) do
    -- Rounded up: a microsecond of extra level is harmless, a missing one could admit early.
    local tat = math.ceil(w.base + COST * w.interval)
    redis.call('SET', KEYS[w.index], fmt(tat), 'PX', math.max(1, math.ceil((tat - NOW_US) / 1000)))
  end
end

return decide(inspect, commit)

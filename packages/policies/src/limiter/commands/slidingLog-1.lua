--[[
  Sliding window log: at most `value` calls in every window (now - duration, now], exactly.

  KEYS[1]  ZSET of admitted calls: member "<us>:<j>" (j = 1..cost, one entry per unit of cost),
           score = admission time in microseconds. One log serves every window of the limiter: an
           admitted take enters all windows, a denied one none, so each window's count is a range
           count over the same log. Entries older than the longest window are trimmed on write, and
           the key expires one longest window after the last admission.
  ARGV     see includes/windows.lua (cost, then duration ms and value per window)
  Returns  see includes/windows.lua

  Allowed iff count + cost <= value. When not: retryAfter = the time until enough entries leave the
  window: the (count + cost - value)-th oldest entry in the window + duration - now (for cost 1:
  the oldest entry + duration - now).
]]
--- @include "includes/windows"

local function inspect(w)
  local after = '(' .. fmt(NOW_US - w.us)
  local count = redis.call('ZCOUNT', KEYS[1], after, '+inf')
  w.allows = count + COST <= w.value
  w.remaining = w.value - count
  w.waitUs = 0
  if not w.allows then
    local leaving = count + COST - w.value
    local entry = redis.call('ZRANGE', KEYS[1], after, '+inf', 'BYSCORE', 'LIMIT', leaving - 1, 1, 'WITHSCORES')
    w.waitUs = tonumber(entry[2]) + w.us - NOW_US
  end
end

local function record()
  local now = fmt(NOW_US)
  for j = 1, COST do
    local member = now .. ':' .. j
    -- Two takes in one microsecond would overwrite each other's entries: make the member unique.
    while redis.call('ZADD', KEYS[1], 'NX', now, member) == 0 do
      member = member .. "'"
    end
  end
end

local function commit(windows)
  local longest = 0
  for _, w in ipairs(windows) do
    longest = math.max(longest, w.ms)
  end
  record()
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fmt(NOW_US - longest * 1000))
  redis.call('PEXPIRE', KEYS[1], longest)
end

return decide(inspect, commit)

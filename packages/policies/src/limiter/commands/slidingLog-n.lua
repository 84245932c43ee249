--[[
  Sliding window log: at most `value` calls in every window (now - duration, now], exactly, and,
  with a dispatch budget, at most `value` calls *sent* in every window of that duration.

  KEYS[1]  ZSET of admitted calls: member "<us>:<j>" (j = 1..cost, one entry per unit of cost; <us>
           the decision's microsecond, made unique with trailing "'"), score = the instant the call
           counts at. One log serves every window of the limiter: an admitted take enters all
           windows, a denied one none, so each window's count is a range count over the same log.
           Entries older than the longest window are trimmed on write, and the key expires one
           longest window (plus the dispatch budget) after the last admission.
  KEYS[n]  last, when the limiter has a calendar quota: its count (includes/windows.lua)
  ARGV     see includes/windows.lua (cost, dispatch budget, quota, then duration ms and value per window)
  Returns  see includes/windows.lua; the reservation is "<us>" (the members' common head) when the
           take is two-phase

  Allowed iff count + cost <= value, count = the entries scored after now - duration (entries
  scored in the future included). When not: retryAfter = the time until enough entries leave the
  window: the (count + cost - value)-th oldest entry in the window + duration - now (for cost 1:
  the oldest entry + duration - now).

  Two-phase take (dispatch budget > 0, docs/architecture.md §9 "counted where the target counts"):
  the call leaves some time after this decision (the breaker's round trip, a connection, a busy
  event loop), and that gap differs from call to call and from executor to executor, so counting
  calls at the decision lets a window of *send* times hold more than `value`. So an admitted
  call is written *pending*: member "<us>:<j>!", scored at now + budget, the latest it may be
  sent. confirmLog-1.lua then rescores it at an upper bound of its real send instant (or removes
  it when it was never sent). Every entry's score is thus an upper bound of its send instant, and
  the decision instant a lower bound of the new call's: any other call sent within `duration`
  before the new one is still scored inside the new one's window at its decision, so it is
  counted. A pending entry's wait is estimated from its decision instant (it will most likely be
  confirmed soon after), at least duration / value: a retry is a hint, the next take decides.
]]
--- @include "includes/windows"

local PENDING = '!'

local function pendingSince(member)
  if string.sub(member, -1) ~= PENDING then
    return nil
  end
  return tonumber(string.match(member, '^(%d+)'))
end

local function inspect(w)
  local after = '(' .. fmt(NOW_US - w.us)
  local count = redis.call('ZCOUNT', KEYS[1], after, '+inf')
  w.allows = count + COST <= w.value
  w.remaining = w.value - count
  w.waitUs = 0
  if not w.allows then
    local leaving = count + COST - w.value
    local entry = redis.call('ZRANGE', KEYS[1], after, '+inf', 'BYSCORE', 'LIMIT', leaving - 1, 1, 'WITHSCORES')
    local decided = pendingSince(entry[1])
    if decided then
      w.waitUs = math.max(decided + w.us - NOW_US, w.us / w.value)
    else
      w.waitUs = tonumber(entry[2]) + w.us - NOW_US
    end
  end
end

local function record()
  -- Two takes in one microsecond would overwrite each other's entries: make the head unique.
  local head = fmt(NOW_US)
  while redis.call('ZSCORE', KEYS[1], head .. ':1') or redis.call('ZSCORE', KEYS[1], head .. ':1' .. PENDING) do
    head = head .. "'"
  end
  local score, suffix = fmt(NOW_US), ''
  if DISPATCH_US > 0 then
    score, suffix = fmt(NOW_US + DISPATCH_US), PENDING
  end
  for j = 1, COST do
    redis.call('ZADD', KEYS[1], score, head .. ':' .. j .. suffix)
  end
  return head
end

local function commit(windows)
  local longest = 0
  for _, w in ipairs(windows) do
    longest = math.max(longest, w.ms)
  end
  local head = record()
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fmt(NOW_US - longest * 1000))
  redis.call('PEXPIRE', KEYS[1], longest + math.ceil(DISPATCH_US / 1000))
  if DISPATCH_US > 0 then
    return head
  end
end

return decide(inspect, commit)

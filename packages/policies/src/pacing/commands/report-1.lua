--[[
  What a call's answer says about the origin's pace (the caller reads the headers, see signals.ts).
    slow (429, 503 + Retry-After): hold the origin for ARGV[2] ms; the pace falls to 70 % (of
        the rate we were sending at when unpaced), once per burst (the answers to calls already
        out within 1 s of a decrease, or before a hold's end, lower nothing more). The concurrency
        limit is left alone: the pace is the answer to a 429, and a lower limit would only send
        paced tasks back to the queue again
    overload (timeout, transport error, 5xx): the concurrency limit shrinks by 30 %, once per burst
    ok: the pace grows back by 0.35 call/s per success (≈ +35 % a second at that pace), up to 90 %
        of the advertised ceiling; without one, by 0.05 call/s (+5 % a second), and the pace is
        dropped once twice above the rate that was refused. The concurrency limit follows the
        latency against the floor a periodic probe measures (includes/limit.lua)
  An advertised ceiling (ARGV[3]) caps the pace at once (at 90 % of it), whatever the kind.

  KEYS[1]  pace HASH (see includes/pace.lua)
  ARGV[1]  kind: 0 ok, 1 slow, 2 overload
  ARGV[2]  hold (ms from now, already bounded by RETRY_AFTER_MAX); 0 = none
  ARGV[3]  advertised ceiling ×1000 (calls/s); 0 = none
  ARGV[4]  latency of the call (µs); 0 = unknown
  ARGV[5]  ceiling of the concurrency limit (MAX_WORKERS_PER_ORIGIN)
  ARGV[6]  state TTL (ms)
  ARGV[7]  event-loop lag of the reporting process (µs): answers it read late by that much
  ARGV[8]  1 when the call took the last slot the limit allowed (it binds), else 0
  ARGV[9]  calls to the origin in flight when it was granted, itself included (0 = unknown)

  Returns {limitMilli, rateMilli, holdMs, throttled}
    holdMs: how long the origin is still held; throttled 1 when this answer lowered the pace or the limit.
]]
--- @include "includes/pace"
--- @include "includes/limit"

local kind = tonumber(ARGV[1])
local holdMs = tonumber(ARGV[2])
local advertised = tonumber(ARGV[3]) / 1000
local latency = tonumber(ARGV[4]) / 1000
local maxLimit = tonumber(ARGV[5])
local ttlMs = tonumber(ARGV[6])
local lagMs = tonumber(ARGV[7]) / 1000
local full = tonumber(ARGV[8]) == 1
local inFlight = tonumber(ARGV[9]) or 0
local now = nowMs()

-- The slowest pace we fall to: one call per 10 s (a hold says more when the target wants less).
local MIN_RATE = 0.1
local CEILING_MARGIN = 0.9
-- After a slow-down: the pace we fall to (× the pace we were at), and what each success adds back
-- (calls/s: at a pace r, +GROWTH·r a second, i.e. +35 % a second: doubled in about 2 s).
local DECREASE = 0.7
local GROWTH = 0.35
local SILENT_GROWTH = 0.05
local BURST_MS = 1000

local f = redis.call('HMGET', K_PACE, 'h', 'r', 'x', 'ns', 'd', 'p', 'n', 'pn')
local hold = tonumber(f[1]) or 0
local rate = tonumber(f[2])
local ceiling = tonumber(f[3])
-- The rate we are sending at: this second's dispatches so far (over at least 250 ms, so that a
-- first burst reads as a burst, not as infinity), or the previous second's, whichever is higher.
local sendingNow = nil
if tonumber(f[4]) then
  sendingNow = (tonumber(f[7]) or 0) * 1000 / math.max(250, now - tonumber(f[4]))
end
local sendingBefore = tonumber(f[8])
local limit = loadLimit(maxLimit)
local decreased = tonumber(f[5]) or 0
local refusedAt = tonumber(f[6])
local throttled = 0

if advertised > 0 then
  -- A margin under what the target advertised: the jitter between dispatch and arrival must not
  -- put one call too many into one of its windows.
  ceiling = advertised * CEILING_MARGIN
  if rate == nil or rate > ceiling then
    rate = ceiling
  end
end

if holdMs > 0 and now + holdMs > hold then
  hold = now + holdMs
end

local fresh = now - decreased >= BURST_MS
if kind == 1 then
  if fresh then
    local sending = rate
    if sending == nil then
      sending = math.max(sendingNow or 0, sendingBefore or 0)
      if sending == 0 then
        sending = nil
      end
    end
    rate = math.max(MIN_RATE, (sending or MIN_RATE) * DECREASE)
    refusedAt = sending
    decreased = math.max(now, hold)
    throttled = 1
  end
elseif kind == 2 then
  if fresh then
    limitOverload(limit)
    decreased = now
    throttled = 1
  end
elseif now >= hold then
  if rate then
    if ceiling then
      rate = math.min(rate + GROWTH, ceiling)
    else
      -- Nothing advertised: the pace that was refused is the only clue, so it is approached
      -- slowly (+5 % a second), and the pace is dropped once well past it (the target changed).
      rate = rate + SILENT_GROWTH
      if refusedAt == nil or rate > 2 * refusedAt then
        rate = nil
        refusedAt = nil
      end
    end
  end
  if latency > 0 then
    limitSample(limit, now, latency, lagMs, maxLimit, full, inFlight, rate ~= nil)
  end
end
limitTick(limit, now)
saveLimit(limit)

local fields = { 'd', decreased }
if hold > now then
  table.insert(fields, 'h')
  table.insert(fields, hold)
end
if ceiling then
  table.insert(fields, 'x')
  table.insert(fields, ceiling)
end
if refusedAt then
  table.insert(fields, 'p')
  table.insert(fields, refusedAt)
end
if rate then
  table.insert(fields, 'r')
  table.insert(fields, rate)
else
  redis.call('HDEL', K_PACE, 'r', 't', 'p')
end
redis.call('HSET', K_PACE, unpack(fields))
redis.call('PEXPIRE', K_PACE, math.ceil(ttlMs + math.max(0, hold - now)))
return { milli(limit.c), milli(rate), math.max(0, hold - now), throttled }

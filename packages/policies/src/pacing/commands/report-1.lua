--[[
  What a call's answer says about the origin's pace (the caller reads the headers, see signals.ts).
    slow (429, 503 + Retry-After): hold the origin for the time asked; the pace falls to 70 % of the
        rate we were sending at (the pace, or the dispatches counted when unpaced), once per burst
        (the answers to calls already out within 1 s of a decrease, or before a hold's end, lower
        nothing more). Without an advertised ceiling, also to 90 % of the rate the target served
        (its answers < 400 per second, counted here: this second's over at least a second, or the
        previous second's), when that is lower: a first burst sent at 300/s to a 50/s target is
        paced under what it served (at most 90 % of its 200s in that second), not at 210/s. Answers of the burst still coming in during the hold raise
        that pace up to what they show (a 429 may be reported before the 200s sent ahead of it),
        never above the 70 %. The concurrency limit is left alone: the pace is the answer to a
        429, and a lower limit would only send paced tasks back to the queue again
    overload (timeout, transport error, 5xx): the concurrency limit shrinks by 30 %, once per burst
    ok: the pace grows back by 0.35 call/s per success (≈ +35 % a second at that pace), up to 90 %
        of the advertised ceiling. Without one, as fast up to the probe line `p` (90 % of the rate
        served when refused, read over a whole second; a shorter reading cannot tell a quota of 5
        per 100 ms from one of 50 per second, so it sets the pace but not the line: then `p` is the
        70 % of the rate sent), then by 0.05 call/s (+5 % a second): the pace is probed upward
        slowly past what was served, and is dropped once twice above `p` (the target changed).
        The concurrency limit follows the latency against the floor a periodic probe measures
        (includes/limit.lua)
  An advertised ceiling caps the pace at once (at 90 % of it), whatever the kind.

  The answers of one process to one origin come in batches (index.ts: those of a turn of its event
  loop, or a few ms), applied here one after the other as if each were reported alone, with the
  state read once and written once.

  KEYS[1]  pace HASH (see includes/pace.lua)
  ARGV[1]  ceiling of the concurrency limit (MAX_WORKERS_PER_ORIGIN)
  ARGV[2]  state TTL (ms)
  ARGV[3]  event-loop lag of the reporting process (µs): answers it read late by that much
  ARGV[4]  calls the process dispatched on its local permission since it last told (counted now,
           before the answers: see gate-1.lua)
  ARGV[5]  the local permission asked for (ms, as gate-1.lua's ARGV[6]); 0 = none
  ARGV[6]  the pacing channel: announced the key when the origin stops being free (held, paced,
           or probed), so that every executor drops its local permission; '' = none
  ARGV[7]  the reporting executor's id (one per pacer): the executors that apply the limit are
           counted from their reports (includes/limit.lua)
  ARGV[8..] six per answer, in order:
    kind: 0 ok, 1 slow, 2 overload
    hold (ms from now, already bounded by RETRY_AFTER_MAX); 0 = none
    advertised ceiling ×1000 (calls/s); 0 = none
    latency of the call (µs); 0 = unknown, or not an answer < 400 (not counted as served)
    1 when the call took the last slot the limit allowed (it binds), else 0
    calls to the origin in flight when it was granted, itself included (0 = unknown)

  Returns {limitMilli, rateMilli, holdMs, throttled} per answer, then freeMs
    holdMs: how long the origin is still held; throttled 1 when this answer lowered the pace or the
    limit; freeMs the local permission granted (0 = none).
]]
--- @include "includes/pace"
--- @include "includes/limit"

local maxLimit = tonumber(ARGV[1])
local ttlMs = tonumber(ARGV[2])
local lagMs = tonumber(ARGV[3]) / 1000
local pending = tonumber(ARGV[4])
local freeMs = tonumber(ARGV[5])
local channel = ARGV[6]
local reporter = ARGV[7]
local FIRST_ANSWER = 8
local PER_ANSWER = 6
local now = nowMs()

-- The slowest pace we fall to: one call per 10 s (a hold says more when the target wants less).
local MIN_RATE = 0.1
local CEILING_MARGIN = 0.9
-- After a slow-down: the pace we fall to (× the pace we were at); it grows back by GROWTH
-- (includes/pace.lua) per success.
local DECREASE = 0.7
local SILENT_GROWTH = 0.05
local BURST_MS = 1000
-- The served rate read at a 429 without a ceiling: this second's answers < 400 over at least a
-- second, or the previous second's; the pace set at SERVED_MARGIN of it (the dispatch jitter must
-- not put one call too many into a window). A shorter span reads a target's window, not its rate:
-- a 1 s-window target serves its whole quota in the first 100 ms of a burst (over 500 ms, 50 per
-- second read as 100/s: measured, 84–124 × 429 for 400 calls instead of 30), while a reading
-- under the rate (a 100 ms-window target refusing early in a second) costs only the fast growth
-- back to the probe line.
local SERVED_MIN_SPAN_MS = 1000
local SERVED_MARGIN = 0.9

local f = redis.call('HMGET', K_PACE, 'h', 'r', 'x', 'ns', 'd', 'p', 'n', 'pn', 'ss', 'sn', 'ps', 'sc')
local hold = tonumber(f[1]) or 0
local rate = tonumber(f[2])
local ceiling = tonumber(f[3])
local dispatches = { ns = tonumber(f[4]), n = tonumber(f[7]) or 0 }
if pending > 0 then
  countDispatches(dispatches, now, pending)
end
-- The rate we are sending at: this second's dispatches so far (over at least 250 ms, so that a
-- first burst reads as a burst, not as infinity), or the previous second's, whichever is higher.
local sendingNow = nil
if dispatches.ns then
  sendingNow = dispatches.n * 1000 / math.max(250, now - dispatches.ns)
end
local sendingBefore = dispatches.pn or tonumber(f[8])
local limit = loadLimit(maxLimit)
limitReporter(limit, reporter, now)
local decreased = tonumber(f[5]) or 0
local refusedAt = tonumber(f[6])
local servedFrom = tonumber(f[9])
local served = tonumber(f[10]) or 0
local servedBefore = tonumber(f[11])
-- The cap of the last cut without a ceiling (70 % of the rate sent), kept while its burst's answers
-- still come in: they may raise the pace up to it.
local sendCap = tonumber(f[12])
local wasFree = hold <= now and rate == nil and limit.probe == nil

-- One answer (its arguments from ARGV[at]); returns whether it lowered the pace or the limit.
local function apply(at)
  local kind = tonumber(ARGV[at])
  local holdMs = tonumber(ARGV[at + 1])
  local advertised = tonumber(ARGV[at + 2]) / 1000
  local latency = tonumber(ARGV[at + 3]) / 1000
  local full = tonumber(ARGV[at + 4]) == 1
  local inFlight = tonumber(ARGV[at + 5]) or 0
  local throttled = 0

  -- Answers < 400 (those that carry a latency) counted per second of arrival, as the gate counts
  -- dispatches: what the target served. The first one after a hold starts afresh, with no previous
  -- second: a second that held everything back says nothing of the target's rate.
  if latency > 0 then
    local afterHold = servedFrom ~= nil and now >= hold and servedFrom < hold
    if servedFrom == nil or now - servedFrom >= 1000 or afterHold then
      servedBefore = nil
      if servedFrom ~= nil and now - servedFrom < 2000 and not afterHold then
        servedBefore = served * 1000 / (now - servedFrom)
      end
      servedFrom = now
      served = 1
    else
      served = served + 1
    end
  end
  -- The rate served lately (nil: nothing served in the last two seconds), and whether the reading
  -- spans a whole second (the previous second's, or this one's once a second long).
  local servingNow = nil
  local servedWhole = false
  if servedFrom ~= nil and now - servedFrom < 2000 then
    servingNow = served * 1000 / math.max(SERVED_MIN_SPAN_MS, now - servedFrom)
    servedWhole = now - servedFrom >= 1000
    if servedBefore and servedBefore >= servingNow then
      servingNow = servedBefore
      servedWhole = true
    end
  end

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
      sendCap = nil
      if ceiling == nil then
        sendCap = rate
        refusedAt = rate
        if servingNow then
          local line = servingNow * SERVED_MARGIN
          rate = math.max(MIN_RATE, math.min(rate, line))
          if servedWhole then
            refusedAt = line
          end
        end
      end
      decreased = math.max(now, hold)
      throttled = 1
    end
  elseif kind == 2 then
    if fresh then
      limitOverload(limit)
      decreased = now
      throttled = 1
    end
  end
  if sendCap and rate and now < hold and kind ~= 2 and servingNow then
    -- An answer of the burst in the hold: what the target served may be more than was seen at the cut.
    rate = math.max(rate, math.min(sendCap, servingNow * SERVED_MARGIN))
    refusedAt = math.max(refusedAt or 0, rate)
  end
  if kind == 0 and now >= hold then
    if rate then
      if ceiling then
        rate = math.min(rate + GROWTH, ceiling)
      else
        -- Nothing advertised: back as fast up to the probe line (what was served when refused),
        -- then probed past it slowly (+5 % a second); dropped once well past it (the target changed).
        rate = rate + (rate < (refusedAt or 0) and GROWTH or SILENT_GROWTH)
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
  return throttled
end

local replies = {}
for at = FIRST_ANSWER, #ARGV, PER_ANSWER do
  local throttled = apply(at)
  replies[#replies + 1] = milli(limit.c)
  replies[#replies + 1] = milli(rate)
  replies[#replies + 1] = math.max(0, hold - now)
  replies[#replies + 1] = throttled
end
saveLimit(limit)

local fields = dispatchFields(dispatches, { 'd', decreased })
-- Each field written when it has a value; `stale`: the fields deleted when it has none (one HDEL
-- for all, before the HSET).
local gone = {}
local function put(name, value, stale)
  if value then
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  elseif stale then
    for _, field in ipairs(stale) do
      gone[#gone + 1] = field
    end
  end
end
if servedFrom then
  put('ss', servedFrom)
  put('sn', served)
end
put('ps', servedBefore, { 'ps' })
put('sc', now < hold and sendCap or nil, { 'sc' })
put('h', hold > now and hold or nil)
put('x', ceiling)
put('p', refusedAt)
put('r', rate, { 'r', 't', 'p' })
if #gone > 0 then
  redis.call('HDEL', K_PACE, unpack(gone))
end
redis.call('HSET', K_PACE, unpack(fields))
redis.call('PEXPIRE', K_PACE, math.ceil(ttlMs + math.max(0, hold - now)))

local free = hold <= now and rate == nil and limit.probe == nil
if wasFree and not free and channel ~= '' then
  -- Every executor's local permission for this origin ends (index.ts).
  redis.call('PUBLISH', channel, K_PACE)
end
replies[#replies + 1] = free and freeMs or 0
return replies

--[[
  The adaptive concurrency limit of one origin (textually included by report-1.lua after
  includes/pace.lua; its fields are listed there). What it must tell apart: a queue forming at the
  target (the latency grows with the calls we have in flight) from the target's own latency, which
  may be queued once the limit has been at its ceiling for a while. A moving average of the latency
  cannot: the "usual" latency is then the queued one. So the latency without load (the floor) is
  the least one seen, and measured again periodically, as Envoy's adaptive concurrency filter does
  its minRTT:
    first    the first answers of an origin: the first calls of a burst find the target's queue
             empty (those behind them queue), so the least of them is the floor
    probe    every 10 s (or 100 floors, if longer), at the answer of a call the limit bound (a
             floor matters only where the limit binds): the limit falls to PROBE_LIMIT per executor;
             once the calls in flight before it are answered (one recent latency later), the least
             latency of the next PROBE_SAMPLES calls is the floor (a slower target is then seen as
             such); the limit goes back to where it was
    between  per success, the limit grows by STEP/(limit × executors) (+½ per round of calls, the
             calls of every executor applying it: each applies the whole limit, so a step of
             1/limit per answer moved it one per executor per round, and with two executors the
             limit of a target of capacity 4 swung between 1 and 8) while the recent
             latency (a fast moving average) stays within TOLERANCE × floor + SLACK_MS + the
             reporting process's own event-loop lag (TOLERANCE 1.25: a little queue at the target
             is what keeps it busy while the caller holds its slots longer than the target does,
             as Gradient2's rttTolerance; no more, or its p99 passes 2 × the floor), and shrinks
             when it does not, by that step × how far past the bound (the gradient bound/recent: a
             whole step at MIN_GRADIENT or less): the limit settles on the latency's slope, where a
             queue shows, rather than wandering on its noise near the bound, and a queue twice the
             bound still costs a whole step an answer (a halved capacity is followed within a
             second); a lower latency lowers the floor at
             once, and the recent latency with it: a latency that falls is no queue (without it,
             a target held long and then answering faster reads as queueing until the average
             has come down). Past the bound it shrinks on the answers of calls that took the
             last slot the limit allowed (`full`, the executor's bulkhead says); on those of a
             call that found room, only while at least half of the limit is in flight (else the
             origin is not what holds our calls: the machine's load shows as latency, not a
             queue of ours), and never under the calls in flight + 1, where the limit binds: those
             our workers (or a client's cap) send anyway, and a limit under them would take away
             concurrency the target takes (a slow receiver held by a client's cap looks queued to
             a floor that is a minimum, and is not)
    overload (timeout, transport error, 5xx) −30 %, once per burst (report-1.lua decides when)
  The lag term: a client whose event loop is busy reads its answers late, by the same amount
  whatever the origin's queue; the floor (a minimum) has none of it, the recent latency all of it.
  Without it, a target answering in 1 ms is throttled by the jitter of a loaded caller; with it, the
  queue seen is the target's. Several executors apply the one limit each (per-process bulkhead):
  together they probe with PROBE_LIMIT × executors calls, so the floor is exact as long as the
  executors are fewer than the target's capacity.
]]

local PROBE_LIMIT = 1
local PROBE_SAMPLES = 8
-- A probe with some samples ends after this long (a slow target gives few); with none at all (only
-- errors or 4xx answered), it gives up after PROBE_GIVE_UP_MS and the floor stays as it was.
local PROBE_MAX_MS = 1000
local PROBE_GIVE_UP_MS = 3000
local PROBE_EVERY_MS = 10000
local FIRST_PROBE_MS = 1000
local PROBE_EVERY_FLOORS = 100
-- The queue tolerated: the recent latency may reach this × the floor (+ SLACK_MS + the lag) before
-- the limit shrinks. The floor is the least latency at one call per executor; with the target
-- full (C in flight at C slots) the caller still holds each slot longer than the target does (its
-- own round trips, its loop's turns), so a bound at the floor itself keeps the target idle part of
-- the time: the limit must sit where a little queue shows, as Gradient2's rttTolerance does. 1.25,
-- not Gradient2's 1.5: at 1.5 (+ 1 ms) the limit settled near 1.8 × the target's capacity, the
-- target's p99 2–3 × its floor; at 1.25 (+ 0.5 ms), ~1.4 ×, the p99 within 2 × its floor where
-- the call is long beside the caller's own share of it, for the same goodput before a capacity
-- change (docs/benchmarks/pacing.md "Capacity: the tolerance, on a quiet box", 2026-12-06).
local TOLERANCE = 1.25
-- Past the bound by this share (the gradient bound/recent at its least), the limit shrinks by a
-- whole 1/limit per answer; nearer the bound, by that much less: a latency just past the bound is
-- mostly noise, a queue twice it is not.
local MIN_GRADIENT = 0.5
-- What a round of calls moves the limit by at most: half a call. A whole one swung the limit of a
-- 5 ms target of capacity 8 by ±3 calls around where it settled, and after its capacity halved
-- it undershot: 82–84 % of the goodput there against 91–92 % at half a call, with a capacity
-- halving still followed within a second (docs/benchmarks/pacing.md "Capacity: the tolerance, on a quiet box").
local STEP = 0.5
local SLACK_MS = 0.5
local RECENT_WEIGHT = 0.1
local OVERLOAD_CUT = 0.7
-- An executor counts among those applying the limit while it reported within this long.
local REPORTER_MS = 2000

-- The limit's state; `c` is the limit applied (PROBE_LIMIT during a probe), never above maxLimit
-- (MAX_WORKERS_PER_ORIGIN may have been lowered since).
local function loadLimit(maxLimit)
  local f = redis.call('HMGET', K_PACE, 'c', 'm', 'l', 'q', 'qs', 'qc', 'qm', 'qk', 'qn', 'e')
  local s = {
    c = math.min(tonumber(f[1]) or maxLimit, maxLimit),
    floor = tonumber(f[2]),
    recent = tonumber(f[3]),
    probe = tonumber(f[4]),
    countFrom = tonumber(f[5]),
    before = tonumber(f[6]),
    probeMin = tonumber(f[7]),
    samples = tonumber(f[8]) or 0,
    nextProbe = tonumber(f[9]) or 0,
    -- The executors reporting lately: "id:ms,id:ms" (their last report, Redis time).
    reporters = f[10] or '',
    executors = 1,
  }
  if s.before then
    s.before = math.min(s.before, maxLimit)
  end
  return s
end

-- Counts `id` among the executors that reported within REPORTER_MS (`s.executors`, at least 1).
local function limitReporter(s, id, now)
  local kept = { id .. ':' .. math.floor(now) }
  for other, at in string.gmatch(s.reporters, '([^:,]+):(%d+)') do
    if other ~= id and now - tonumber(at) < REPORTER_MS then
      kept[#kept + 1] = other .. ':' .. at
    end
  end
  s.executors = #kept
  s.reporters = table.concat(kept, ',')
end

-- A timeout, a transport error or a 5xx: the limit (the one a probe will go back to) falls by 30 %.
local function limitOverload(s)
  if s.probe then
    s.before = math.max(1, s.before * OVERLOAD_CUT)
  else
    s.c = math.max(1, s.c * OVERLOAD_CUT)
  end
end

-- What one answer moves the limit by, the recent latency against the bound, `round` the calls of
-- a round (the limit × the executors applying it): +STEP/round (+STEP per round of calls) within
-- it; past it, −STEP/round × how far past (the gradient bound/recent: 1 at the bound, MIN_GRADIENT or
-- less at a whole step), so that the limit settles on the latency's slope, not on its noise.
local function limitStep(round, recent, bound)
  if recent <= bound then
    return STEP / round
  end
  local past = (1 - bound / recent) / (1 - MIN_GRADIENT)
  return -math.min(1, past) * STEP / round
end

-- A successful answer that took `latency` ms, reported at `now`, by a process whose event loop
-- lags by `lagMs`; `full`: the call took the last slot the limit allowed, `inFlight` of them (0 =
-- unknown).
local function limitSample(s, now, latency, lagMs, maxLimit, full, inFlight, paced)
  if s.floor == nil and s.probe == nil then
    -- No probe at first sight: it would hold a new origin's first burst at one call at a time.
    s.floor = latency
    s.recent = latency
    -- Soon, not in PROBE_EVERY_MS: a target our calls queue from the start shows no floor but a
    -- queued one, and with TOLERANCE that wide, a queued floor lets the limit stay near its ceiling.
    s.nextProbe = now + FIRST_PROBE_MS
    return
  end
  if s.probe == nil and now >= s.nextProbe and paced then
    -- Not while the origin is paced: the calls held back by a limit of 1 would leave bunched as it
    -- ends, into one of the target's windows. Its pace, not its queue, limits it meanwhile.
    s.nextProbe = now + PROBE_EVERY_MS
  elseif s.probe == nil and now >= s.nextProbe and full then
    s.probe = now
    -- Calls already out when the limit falls are answered within about one latency: later ones
    -- find the target's queue empty.
    s.countFrom = now + math.max(s.recent or 0, latency)
    s.before = s.c
    s.probeMin = nil
    s.samples = 0
    s.c = PROBE_LIMIT
    return
  end
  if s.probe then
    -- The call started at now - latency (Redis time, up to the report's own round trip late).
    if now - latency >= s.countFrom then
      s.samples = s.samples + 1
      s.probeMin = math.min(s.probeMin or latency, latency)
    end
    return
  end
  if latency < s.floor then
    -- The recent latency (an average of latencies at or above the floor) falls with it.
    s.floor = latency
    s.recent = latency
  end
  s.recent = s.recent and s.recent + RECENT_WEIGHT * (latency - s.recent) or latency
  local step = limitStep(s.c * s.executors, s.recent, TOLERANCE * s.floor + SLACK_MS + lagMs)
  if step > 0 then
    s.c = math.min(maxLimit, s.c + step)
  elseif full then
    s.c = math.max(1, s.c + step)
  elseif inFlight >= s.c / 2 then
    -- Near the limit, which held nothing back: down as fast, never under one above our calls.
    s.c = math.min(s.c, math.max(inFlight + 1, s.c + step))
  end
end

-- Every answer: ends a probe that has its samples, or has waited long enough for them (with none,
-- the floor stays as it was).
local function limitTick(s, now)
  if s.probe == nil then
    return
  end
  local counting = now - s.countFrom
  if s.samples >= PROBE_SAMPLES or (s.samples > 0 and counting >= PROBE_MAX_MS) then
    s.floor = s.probeMin
    s.recent = s.probeMin
    s.nextProbe = now + math.max(PROBE_EVERY_MS, PROBE_EVERY_FLOORS * s.floor)
  elseif now - s.probe >= PROBE_GIVE_UP_MS + (s.countFrom - s.probe) then
    s.nextProbe = now + PROBE_EVERY_MS
  else
    return
  end
  s.c = s.before
  s.probe = nil
  s.ended = true
end

-- Writes the state back.
local function saveLimit(s)
  local fields = { 'c', s.c, 'qn', s.nextProbe, 'e', s.reporters }
  if s.floor then
    table.insert(fields, 'm')
    table.insert(fields, s.floor)
  end
  if s.recent then
    table.insert(fields, 'l')
    table.insert(fields, s.recent)
  end
  if s.probe then
    for _, kv in ipairs({ { 'q', s.probe }, { 'qs', s.countFrom }, { 'qc', s.before }, { 'qk', s.samples } }) do
      table.insert(fields, kv[1])
      table.insert(fields, kv[2])
    end
    if s.probeMin then
      table.insert(fields, 'qm')
      table.insert(fields, s.probeMin)
    end
  elseif s.ended then
    redis.call('HDEL', K_PACE, 'q', 'qs', 'qc', 'qm', 'qk')
  end
  redis.call('HSET', K_PACE, unpack(fields))
end

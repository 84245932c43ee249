--[[
  May a call to this origin be dispatched, and when? Taken just before the call leaves, so that the
  pace is counted where the target counts it: at arrival.
    held (now < h)        -> not before h
    paced (r)             -> the next free slot t, one slot per 1000/r ms
    unpaced, not held     -> now
  A slot within ARGV[1] ms: the caller sleeps until it, then calls. A later one is reserved for
  the task, which waits (parked in its executor, or in the queue) until then carrying it (ARGV[3]
  when it is back): the waiters come back one per slot, at the pace, instead of all at the hold's
  end.
  Slots are booked ARGV[4] ms ahead at most: a slot is an instant fixed at booking, so a backlog
  booked at a pace cut by a 429 would keep that pace for as long as it lasts, however far the pace
  grows back meanwhile (issue 23: 400 tasks booked at 31.5/s in their first second, the pace at
  45/s two seconds later). A task whose slot would be farther takes none: it is told to come back
  (unbooked) when the horizon is about to reach it, in the return lane `w`, spaced at the pace the
  origin is expected to have by then (it grows back after a cut, see report-1.lua), LANE_MARGIN
  above it, so that the waiters neither come back all at once nor slower than the slots they are
  to take. Back, it is a new task again: it takes a slot at the pace of then, or is sent down the
  lane again if the horizon is still full (the pace grew slower than expected, or a hold came).
  Each client has a lane of its own (ARGV[7]), spaced at its weighted share of the pace among the
  clients whose lanes are in use: a client's backlog sent down its lane is no wait for a newcomer,
  whose first return is due when the horizon reaches it, and two backlogged clients come back, and
  so take the slots, in the ratio of their weights (docs/architecture.md §9, "whose turn").
  For every paced origin: one that advertised its pace (RateLimit-Policy), and one that did not,
  whose pace is learnt from the rate it served when it refused (report-1.lua): there the lane
  expects the pace to grow back as fast up to the probe line `p`, and no further (it grows
  slowly past it). (Before that estimate, a silent origin's pace came from the rate sent, far above the target's, and its
  waiters back at each hold's end drew a burst of 429s at it.)

  KEYS[1]  pace HASH (see includes/pace.lua)
  ARGV[1]  longest in-process wait (ms)
  ARGV[2]  state TTL (ms): an origin not called for this long is forgotten
  ARGV[3]  the slot reserved for this task when it was sent back (ms, Redis time); 0 = none
  ARGV[4]  booking horizon (ms): no slot is reserved farther ahead; 0 = none (book every slot)
  ARGV[5]  calls the caller dispatched on its local permission since it last told (counted now)
  ARGV[6]  the local permission asked for (ms): how long the caller may dispatch without asking
           while the origin is free (unpaced, not held, no probe of the floor under way); 0 = none
  ARGV[7]  the caller's client (meta.client; '' = none): its return lane is its own
  ARGV[8]  the client's weight (the queue's): its share of the returns

  Returns {admitted, waitMs, limitMilli, rateMilli, slot, freeMs}
    admitted 1: sleep waitMs, then call; 0: come back in waitMs (not an attempt) with `slot`, the
    slot reserved for it (Redis ms), or 0: none (beyond the horizon: ask again then).
    limitMilli the adaptive concurrency limit ×1000 (0 = not learnt yet); rateMilli the pace ×1000 (0 = none).
    freeMs the local permission granted (ARGV[6] when the origin is free, else 0): report-1.lua
    announces on the pacing channel whenever the origin stops being free, which voids it.
]]
--- @include "includes/pace"

local maxLocalMs = tonumber(ARGV[1])
local ttlMs = tonumber(ARGV[2])
local reserved = tonumber(ARGV[3])
local bookAheadMs = tonumber(ARGV[4])
local pending = tonumber(ARGV[5]) or 0
local freeMs = tonumber(ARGV[6]) or 0
local client = ARGV[7] or ''
local weight = math.max(tonumber(ARGV[8]) or 1, 0.001)
local now = nowMs()
-- The lane's margin above the pace expected (grown back by GROWTH, includes/pace.lua, up to the
-- ceiling or the probe line): waiters back early are sent down the lane again, a gate call each;
-- late ones leave the pace unused.
local LANE_MARGIN = 1.1

-- The sum of the weights of the clients whose return lane is in use (a waiter due back after
-- now), the asker's included; the lanes no longer in use are dropped (an idle client banks no
-- credit, and returns start from the horizon).
local function laneWeights(asker, askerWeight, at)
  local fields = redis.call('HGETALL', K_PACE)
  local lanes, weights = {}, {}
  for i = 1, #fields, 2 do
    local name = fields[i]
    if name == 'w' then
      lanes[''] = tonumber(fields[i + 1])
    elseif string.sub(name, 1, 2) == 'w:' then
      lanes[string.sub(name, 3)] = tonumber(fields[i + 1])
    elseif name == 'g' then
      weights[''] = tonumber(fields[i + 1])
    elseif string.sub(name, 1, 2) == 'g:' then
      weights[string.sub(name, 3)] = tonumber(fields[i + 1])
    end
  end
  local sum = askerWeight
  for lane, tag in pairs(lanes) do
    if lane ~= asker then
      if tag > at then
        sum = sum + (weights[lane] or 1)
      else
        redis.call('HDEL', K_PACE, laneField(lane), weightField(lane))
      end
    end
  end
  return sum
end

local f = redis.call('HMGET', K_PACE, 'h', 'r', 't', 'x', 'ns', 'c', 'k', 'n', laneField(client), 'p', 'q')
local hold = tonumber(f[1]) or 0
local rate = tonumber(f[2])
local limit = tonumber(f[6])
local dispatches = { ns = tonumber(f[5]), n = tonumber(f[8]) or 0 }
if pending > 0 then
  countDispatches(dispatches, now, pending)
  redis.call('HSET', K_PACE, unpack(dispatchFields(dispatches, {})))
  if redis.call('PTTL', K_PACE) == -1 then
    -- A new key (the origin forgotten since): the paths below that return early set no TTL.
    redis.call('PEXPIRE', K_PACE, ttlMs)
  end
  dispatches.dirty = false
  dispatches.pn = nil
end

-- A task back for the slot reserved for it goes at that slot, unless a hold came since. One back
-- late (a busy executor leased it late) must neither go behind every later reservation (it would
-- be sent back again and again) nor go at once (the late ones would bunch into one of the
-- target's windows): the late ones share a lane of their own, one per slot, from now.
if reserved > 0 and reserved >= hold and reserved - now <= maxLocalMs then
  if now - reserved <= maxLocalMs or rate == nil then
    return { 1, math.max(0, math.ceil(reserved - now)), milli(limit), milli(rate), 0 }
  end
  local late = math.max(now, tonumber(f[7]) or 0)
  redis.call('HSET', K_PACE, 'k', late + 1000 / rate)
  if late - now <= maxLocalMs then
    return { 1, math.ceil(late - now), milli(limit), milli(rate), 0 }
  end
  return { 0, math.ceil(late - now), milli(limit), milli(rate), math.ceil(late) }
end

local start = math.max(now, hold)
if rate then
  start = math.max(start, tonumber(f[3]) or 0)
  -- Where the pace stops growing fast: the advertised ceiling, else the probe line (report-1.lua).
  local line = tonumber(f[4]) or tonumber(f[10])
  if bookAheadMs > 0 and start - now > bookAheadMs then
    local back = math.max(start - bookAheadMs, tonumber(f[9]) or 0)
    local growing = math.max(0, back - math.max(now, hold)) / 1000
    local expected = rate * math.exp(GROWTH * growing)
    if line then
      expected = math.min(expected, line)
    end
    -- The lanes take turns by weight, as the slot line's clients do: this client's returns are
    -- spaced at its share of the pace, so a backlog booked down its own lane is no newcomer's wait.
    local share = weight / laneWeights(client, weight, now)
    redis.call('HSET', K_PACE, laneField(client), back + 1000 / (math.max(rate, expected) * LANE_MARGIN * share))
    redis.call('HSET', K_PACE, weightField(client), weight)
    redis.call('PEXPIRE', K_PACE, math.ceil(ttlMs + (back - now)))
    return { 0, math.ceil(back - now), milli(limit), milli(rate), 0 }
  end
  -- The slot is taken whether the caller waits for it here or in the queue.
  redis.call('HSET', K_PACE, 't', start + 1000 / rate)
end
redis.call('PEXPIRE', K_PACE, math.ceil(ttlMs + (start - now)))

if start - now <= maxLocalMs then
  countDispatches(dispatches, start, 1)
  redis.call('HSET', K_PACE, unpack(dispatchFields(dispatches, {})))
  local free = 0
  if rate == nil and hold <= now and f[11] == false then
    free = freeMs
  end
  return { 1, math.ceil(start - now), milli(limit), milli(rate), 0, free }
end
return { 0, math.ceil(start - now), milli(limit), milli(rate), math.ceil(start) }

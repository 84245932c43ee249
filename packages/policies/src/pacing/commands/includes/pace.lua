--[[
  The pace of one target origin (textually included by every pacing script).

  KEYS[1]  pace HASH, one key per origin (named by a hash of it, see keys in index.ts)
             h  hold-until (ms, Redis time): no call starts before it (Retry-After, quota used up)
             r  paced rate (calls/s); absent = unpaced
             p  when nothing is advertised, the probe line (calls/s): the pace grows back fast
                up to it, slowly past it, and is dropped at twice it; 90 % of the rate served
                when last refused (read over a whole second), else 70 % of the rate sent then
             ss, sn  start of this second's window of answers < 400 (ms, by arrival), and their
                count so far; ps the previous window's per second: the rate the target served
             sc the cut's 70 % of the rate sent, while its hold lasts: the burst's answers still
                coming in may raise the pace up to it
             x  the pace the target advertised (calls/s, its RateLimit-Policy); r never exceeds it
             t  next free dispatch slot of the paced rate (ms): the GCRA theoretical arrival time
             k  next free slot of the late lane: tasks back late for their reserved slot (ms)
             w  next free time of the return lane of the calls naming no client: tasks beyond
                the booking horizon come back then, unbooked (ms; see gate-1.lua); w:<client>
                that of a client's calls, g / g:<client> the client's weight (its share of the
                returns)
             ns, n  start of this second's window of dispatches (ms), and its dispatches so far
             pn     the previous window's dispatches per second: with n, the rate we are sending at
                    (counted by the gate, or by the next report of an executor that dispatched
                    on a local permission, see index.ts)
             c  adaptive concurrency limit applied (may be fractional; see includes/limit.lua)
             e  the executors that reported lately: "id:ms,..." (each pacer's id, its last report);
                a step of the limit is 1/(limit × their count)
             m  floor: the latency without load (ms), the least one seen since the last probe
             l  recent latency (ms): a fast moving average of the successful calls' latency
             qn the next probe of the floor (ms)
             q, qs  a probe under way: its start, and when its samples start counting (ms)
             qc, qm, qk  the limit it goes back to, its least latency so far (ms), its samples
             d  last decrease (ms): several answers to one burst lower the pace once
]]
local K_PACE = KEYS[1]

-- A client's return lane and weight fields (see above).
local function laneField(client)
  if client == '' then
    return 'w'
  end
  return 'w:' .. client
end

local function weightField(client)
  if client == '' then
    return 'g'
  end
  return 'g:' .. client
end

-- What each success adds back to a pace after a slow-down (calls/s; report-1.lua): at a pace r,
-- +GROWTH·r a second, i.e. × e^GROWTH a second (+35 %: doubled in about 2 s). The gate expects it
-- when it spaces the return lane (gate-1.lua).
local GROWTH = 0.35

--- @include "shared/now"

-- Integers for the reply (Lua numbers become integers on the way out): thousandths.
local function milli(value)
  if value == nil then
    return 0
  end
  return math.floor(value * 1000 + 0.5)
end

-- Dispatches counted per window of a second (`w`: ns its start, n its dispatches so far, pn the
-- previous window's per second): the rate we are sending at, which a 429 without an advertised
-- pace cuts. `count` dispatches at `at` (ms).
local function countDispatches(w, at, count)
  if w.ns == nil or at - w.ns >= 1000 then
    if w.ns ~= nil and at - w.ns < 2000 then
      w.pn = w.n * 1000 / (at - w.ns)
    end
    w.ns = at
    w.n = count
  else
    w.n = w.n + count
  end
  w.dirty = true
end

-- The fields of `w` to write (appended to `fields`) when counted.
local function dispatchFields(w, fields)
  if w.dirty then
    fields[#fields + 1] = 'ns'
    fields[#fields + 1] = w.ns
    fields[#fields + 1] = 'n'
    fields[#fields + 1] = w.n
    if w.pn then
      fields[#fields + 1] = 'pn'
      fields[#fields + 1] = w.pn
    end
  end
  return fields
end

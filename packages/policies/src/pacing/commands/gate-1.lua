--[[
  May a call to this origin be dispatched, and when? Taken just before the call leaves, so that the
  pace is counted where the target counts it: at arrival.
    held (now < h)        -> not before h
    paced (r)             -> the next free slot t, one slot per 1000/r ms
    unpaced, not held     -> now
  A slot within ARGV[1] ms is taken (the caller sleeps until it, then calls); a later one is not:
  the task goes back to the queue until a promised time, spaced from the other waiters by one
  slot, so that waiters come back at the pace instead of all at the hold's end.

  KEYS[1]  pace HASH (see includes/pace.lua)
  ARGV[1]  longest in-process wait (ms)
  ARGV[2]  state TTL (ms): an origin not called for this long is forgotten

  Returns {admitted, waitMs, limitMilli, rateMilli}
    admitted 1: sleep waitMs, then call; 0: come back in waitMs (not an attempt).
    limitMilli the adaptive concurrency limit ×1000 (0 = not learnt yet); rateMilli the pace ×1000 (0 = none).
]]
--- @include "includes/pace"

local maxLocalMs = tonumber(ARGV[1])
local ttlMs = tonumber(ARGV[2])
local now = nowMs()

local f = redis.call('HMGET', K_PACE, 'h', 'r', 't', 'w', 'e', 'a', 'c')
local hold = tonumber(f[1]) or 0
local rate = tonumber(f[2])
local limit = tonumber(f[7])

local start = math.max(now, hold)
local interval = 0
if rate then
  interval = 1000 / rate
  start = math.max(start, tonumber(f[3]) or 0)
end

if start - now <= maxLocalMs then
  local fields = { 'a', start }
  if rate then
    table.insert(fields, 't')
    table.insert(fields, start + interval)
  end
  local last = tonumber(f[6])
  if last and start > last then
    local gap = math.min(start - last, 1000)
    local avg = tonumber(f[5]) or gap
    table.insert(fields, 'e')
    table.insert(fields, avg + 0.1 * (gap - avg))
  end
  redis.call('HSET', K_PACE, unpack(fields))
  redis.call('PEXPIRE', K_PACE, ttlMs + (hold > now and hold - now or 0))
  return { 1, start - now, milli(limit), milli(rate) }
end

local promise = math.max(start, (tonumber(f[4]) or 0) + interval)
redis.call('HSET', K_PACE, 'w', promise)
redis.call('PEXPIRE', K_PACE, ttlMs + (promise - now))
return { 0, math.ceil(promise - now), milli(limit), milli(rate) }

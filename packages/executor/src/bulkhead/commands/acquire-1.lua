--[[
  May a call to this origin go ahead under the cluster-wide cap of calls in flight?

  KEYS[1]  slots ZSET lease id -> lease deadline (ms, Redis time). A slot is freed by ZREM when
           its call ends; the slot of a caller that died is freed when its lease ends.
  ARGV[1]  cap: calls in flight allowed to the origin across every executor
  ARGV[2]  lease (ms): longer than any call can last
  ARGV[3]  lease id (unique per call)

  Returns {granted, inFlight, oldestAgeMs}
    granted 1/0; inFlight the live slots (this one included when granted); oldestAgeMs how long
    the oldest live slot has been held (when refused, else 0): a hanging origin shows there.
]]
local cap = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
--- @include "shared/now"
local now = nowMs()

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local inFlight = redis.call('ZCARD', KEYS[1])
if inFlight < cap then
  redis.call('ZADD', KEYS[1], now + leaseMs, ARGV[3])
  -- Every deadline is at most now + lease: the key outlives its slots, no more.
  redis.call('PEXPIRE', KEYS[1], leaseMs)
  return { 1, inFlight + 1, 0 }
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return { 0, inFlight, math.max(0, leaseMs - (tonumber(oldest[2]) - now)) }

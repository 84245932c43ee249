--[[
  May a call to this origin go ahead under the cluster-wide cap of calls in flight?

  A freed slot goes to the executors in the order they began to wait for one, not to whichever
  asks first: the executor whose call ended asks again at once, so first come would leave an
  executor that holds no slot waiting behind another's whole line (its cold partitions behind the
  other's hot backlog). An executor with tasks waiting joins the line when refused, leaves it when
  granted (and joins again at the back if it still has some), and is woken by PUBLISH when a slot
  is its turn.

  KEYS[1]  slots ZSET lease id -> lease deadline (ms, Redis time). A slot is freed by ZREM when
           its call ends (release-3.lua); the slot of a caller that died is freed when its lease ends.
  KEYS[2]  waiting ZSET executor -> ticket (includes/line.lua)
  KEYS[3]  seen ZSET executor -> last ask ms
  ARGV[1]  cap: calls in flight allowed to the origin across every executor
  ARGV[2]  lease (ms): longer than any call can last
  ARGV[3]  lease id (unique per call)
  ARGV[4]  the asking executor's id
  ARGV[5]  1: it has tasks waiting (joins the line when refused); 0: a call that would not wait here
  ARGV[6]  staleMs: an executor that has not asked for this long is out of the line
  ARGV[7]  the wake channels' prefix (the executor id is appended)

  Returns {granted, inFlight, oldestAgeMs}
    granted 1/0 (0 also when a slot is free but executors ahead in the line wait for it); inFlight
    the live slots (this one included when granted); oldestAgeMs how long the oldest live slot has
    been held (when refused for a full origin, else 0): a hanging origin shows there.
]]
local cap = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local executor = ARGV[4]
local joins = ARGV[5] == '1'
local staleMs = tonumber(ARGV[6])
--- @include "shared/now"
--- @include "includes/line"
local now = nowMs()

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
dropStale(staleMs, now)
local inFlight = redis.call('ZCARD', KEYS[1])

local function join()
  if not joins then return end
  redis.call('ZADD', KEYS[2], 'NX', now, executor)
  redis.call('ZADD', KEYS[3], now, executor)
  redis.call('PEXPIRE', KEYS[2], staleMs * 2)
  redis.call('PEXPIRE', KEYS[3], staleMs * 2)
end

local free = cap - inFlight
if free > 0 then
  -- Executors ahead of this one in the line (all of it when it is not in the line).
  local rank = redis.call('ZRANK', KEYS[2], executor)
  local ahead = rank or redis.call('ZCARD', KEYS[2])
  if ahead >= free then
    join()
    wakeFront(free, ARGV[7], executor)
    return { 0, inFlight, 0 }
  end
  redis.call('ZADD', KEYS[1], now + leaseMs, ARGV[3])
  -- Every deadline is at most now + lease: the key outlives its slots, no more.
  redis.call('PEXPIRE', KEYS[1], leaseMs)
  if rank then
    redis.call('ZREM', KEYS[2], executor)
    redis.call('ZREM', KEYS[3], executor)
  end
  return { 1, inFlight + 1, 0 }
end
join()
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return { 0, inFlight, math.max(0, leaseMs - (tonumber(oldest[2]) - now)) }

--[[
  A call to this origin ended: its slot is freed, and the executors first in the line for one
  (acquire-3.lua) are told, so a slot freed by an executor with nothing waiting does not sit idle
  until the next re-check of the one that waits.

  KEYS[1]  slots ZSET lease id -> lease deadline
  KEYS[2]  waiting ZSET executor -> ticket
  KEYS[3]  seen ZSET executor -> last ask ms
  ARGV[1]  the lease id to free
  ARGV[2]  cap the slot was taken under
  ARGV[3]  staleMs
  ARGV[4]  the wake channels' prefix
  ARGV[5]  the releasing executor's id: not told (it asks again itself when it has tasks waiting)

  Returns the number of executors told
]]
--- @include "shared/now"
--- @include "includes/line"
local now = nowMs()
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
dropStale(tonumber(ARGV[3]), now)
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])
wakeFront(free, ARGV[4], ARGV[5])
return math.max(0, math.min(free, redis.call('ZCARD', KEYS[2])))

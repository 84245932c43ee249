--[[
  An executor has no task waiting for this origin any more: it leaves the line (acquire-3.lua), so
  others do not yield free slots to it until it goes stale, and the next in line is told if a slot
  is free.

  KEYS[1]  slots ZSET lease id -> lease deadline
  KEYS[2]  waiting ZSET executor -> ticket
  KEYS[3]  seen ZSET executor -> last ask ms
  ARGV[1]  the executor's id
  ARGV[2]  cap
  ARGV[3]  the wake channels' prefix

  Returns 1 when it was in the line
]]
--- @include "includes/line"
local left = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if left == 1 then
  wakeFront(tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1]), ARGV[3], nil)
end
return left

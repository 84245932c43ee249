--[[
  Read-only statistics of one shard. O(partitions in flight · log N), never a scan of the tasks.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)

  Returns {pending, inFlight, dead, ready, waiting, blocked, oldestPublishedSecond (-1: none),
           dedupIds, nowMs}
    ready    partitions in the round-robin now
    waiting  partitions waiting for a due time (delayed head, ordered partition blocked after reject)
    blocked  partitions with pending tasks that may not run: in-flight limit reached (ordered: 1)
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local blocked = 0
local running = redis.call('HGETALL', K_RUNNING)
for i = 1, #running, 2 do
  local partition = running[i]
  local limit = limitOf(partition, unorderedLimit)
  if limit > 0 and tonumber(running[i + 1]) >= limit and headOf(partition) then
    blocked = blocked + 1
  end
end
local oldest = redis.call('ZRANGE', K_AGES, 0, 0)[1] or -1
return {
  redis.call('ZCARD', K_PENDING),
  redis.call('ZCARD', K_LEASES),
  redis.call('ZCARD', K_DLQ),
  redis.call('ZCARD', K_READY),
  redis.call('ZCARD', K_TIMERS),
  blocked,
  tonumber(oldest),
  redis.call('ZCARD', K_DONE),
  nowMs(),
}

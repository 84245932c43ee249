--[[
  Reclaim expired leases of one shard (lease does this too, a batch at a time): the tasks of a dead
  worker return to pending; ordered partitions are unlocked with the task back at the head.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  max deliveries before an expiring lease dead-letters the task (0 = unlimited)
  ARGV[3]  the most leases reclaimed by this call

  Returns {readyCount, nextEventMs, reclaimed, deadLettered, more (1 when the batch was full)}
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local maxDeliveries = tonumber(ARGV[2])
local batch = tonumber(ARGV[3])
local now = nowMs()

local reclaimed, deadLettered = reclaimExpired(now, batch, maxDeliveries, unorderedLimit)
local readyCount, nextEvent = shardState(now)
local more = 0
if reclaimed >= batch then
  more = 1
end
return { readyCount, nextEvent, reclaimed, deadLettered, more }

--[[
  Read-only: when does this shard have work? Used to refresh a client's view of the shards.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV        none

  Returns {readyCount, nextEventMs (-1: none)}
]]
--- @include "includes/shard"

local readyCount, nextEvent = shardState(nowMs())
return { readyCount, nextEvent }

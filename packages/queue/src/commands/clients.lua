--[[
  Read-only: the clients of one shard with pending tasks, for `queue info --by-client` and the
  per-client metrics. O(C + R log N) for the C clients with pending tasks here and the R ready
  partitions (read in tag order, by chunks), never a task scan.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua

  Returns {nowMs, n, then n groups of 4: client, pending, readyPartitions, oldestReadyPublishedAt}
    readyPartitions         the client's partitions whose head is due and may run
    oldestReadyPublishedAt  first publish (ms) of the head of the client's partition first in
                            line (-1: none ready): how long its next task has waited
]]
--- @include "includes/shard"

local depths = redis.call('HGETALL', K_CDEPTH)
local ready, front = {}, {}
local CHUNK = 1000
local from = 0
repeat
  local partitions = redis.call('ZRANGE', K_READY, from, from + CHUNK - 1)
  for _, partition in ipairs(partitions) do
    local client = clientOf(partition)
    ready[client] = (ready[client] or 0) + 1
    if not front[client] then
      front[client] = partition
    end
  end
  from = from + CHUNK
until #partitions < CHUNK
local reply = { nowMs(), #depths / 2 }
for i = 1, #depths, 2 do
  local client = depths[i]
  local oldest = -1
  local partition = front[client]
  if partition then
    local head = headOf(partition)
    local record = head and loadRecord(idOfMember(partition, head))
    if record then
      oldest = record[R_PUBLISHED]
    end
  end
  for _, v in ipairs({ client, tonumber(depths[i + 1]), ready[client] or 0, oldest }) do
    reply[#reply + 1] = v
  end
end
return reply

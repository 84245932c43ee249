--[[
  Read-only: the clients of one shard with pending tasks, for `queue info --by-client` and the
  per-client metrics. O(C · log N) for the C clients with pending tasks here, never a task scan.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua

  Returns {nowMs, n, then n groups of 4: client, pending, readyPartitions, oldestReadyPublishedAt}
    readyPartitions         the client's partitions whose head is due and may run
    oldestReadyPublishedAt  first publish (ms) of the head of the client's partition waiting
                            longest in its line (-1: none ready): how long its next task has waited
]]
--- @include "includes/shard"

local depths = redis.call('HGETALL', K_CDEPTH)
local reply = { nowMs(), #depths / 2 }
for i = 1, #depths, 2 do
  local client = depths[i]
  local ready = redis.call('ZLEXCOUNT', K_CREADY, '[' .. client .. '\0', '(' .. client .. '\1')
  local oldest = -1
  local first = nextReadyOf(client)
  if first then
    local partition = string.sub(first, #client + 14)
    local head = headOf(partition)
    local record = head and loadRecord(idOfMember(partition, head))
    if record then
      oldest = record[R_PUBLISHED]
    end
  end
  for _, v in ipairs({ client, tonumber(depths[i + 1]), ready, oldest }) do
    reply[#reply + 1] = v
  end
end
return reply

--[[
  Read-only: a bounded sample of one shard's partitions, for the operator's view of who is heavy and
  who is held back. O(k · log N): at most k partitions from each of ready (first in fair order),
  timers (waking last) and running (a bounded HSCAN), never a scan of the tasks.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  k, the most partitions taken from each set

  Returns {nowMs, n, then n groups of 10: partition, state (ready|waiting|blocked|idle), pending,
           inFlight, wakeAt (-1: none), headId ('' : none), headDue, headDeliveries, headPublished,
           headPayload}
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local k = tonumber(ARGV[2])
local now = nowMs()
local seen = {}
local order = {}
local function add(partition)
  if not seen[partition] then
    seen[partition] = true
    order[#order + 1] = partition
  end
end
for _, p in ipairs(redis.call('ZRANGE', K_READY, 0, k - 1)) do add(p) end
for _, p in ipairs(redis.call('ZRANGE', K_TIMERS, '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, k)) do add(p) end
local scan = redis.call('HSCAN', K_RUNNING, 0, 'COUNT', k)[2]
for i = 1, math.min(#scan, 2 * k), 2 do add(scan[i]) end

local reply = { now, #order }
for _, partition in ipairs(order) do
  local pending = redis.call('ZLEXCOUNT', K_PENDING, '[' .. partition .. '\0', '(' .. partition .. '\1')
  local inFlight = runningOf(partition)
  local wakeAt = tonumber(redis.call('ZSCORE', K_TIMERS, partition) or '-1')
  local limit = limitOf(partition, unorderedLimit)
  local state = 'idle'
  if redis.call('ZSCORE', K_READY, partition) then
    state = 'ready'
  elseif wakeAt >= 0 then
    state = 'waiting'
  elseif pending > 0 and limit > 0 and inFlight >= limit then
    state = 'blocked'
  end
  local head = headOf(partition)
  local id, due, deliveries, published, payload = '', -1, 0, -1, ''
  if head then
    id = idOfMember(partition, head)
    due = dueOfMember(partition, head)
    local record = loadRecord(id)
    if record then
      deliveries = record[R_DELIVERIES]
      published = record[R_PUBLISHED]
      payload = record[R_PAYLOAD]
    end
  end
  for _, v in ipairs({ partition, state, pending, inFlight, wakeAt, id, due, deliveries, published, payload }) do
    reply[#reply + 1] = v
  end
end
return reply

--[[
  Lease up to k tasks from one shard, fairly: one task per partition per turn of the round-robin.
  First moves due timers to ready and reclaims expired leases (bounded by the housekeeping batch),
  then pops the partition waiting longest in `ready` k times: O(k log P), never a scan.

  KEYS[1..11] the shard keys (see includes/shard.lua)
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  shard number (goes into the lease tokens)
  ARGV[3]  k: the most tasks to lease
  ARGV[4]  lease duration (ms)
  ARGV[5]  max deliveries before an expiring lease dead-letters the task (0 = unlimited)
  ARGV[6]  housekeeping batch: the most timers promoted and leases reclaimed per call

  Returns {readyCount, nextEventMs, reclaimed, deadLettered, n, then n groups of 7:
           id, partition, payload, token, deliveries, publishedAt, dueAt}
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local shard = ARGV[2]
local k = tonumber(ARGV[3])
local leaseMs = tonumber(ARGV[4])
local maxDeliveries = tonumber(ARGV[5])
local batch = tonumber(ARGV[6])
local now = nowMs()

promoteTimers(now, batch, unorderedLimit)
local reclaimed, deadLettered = reclaimExpired(now, batch, maxDeliveries, unorderedLimit)

local leased = {}
for _ = 1, k do
  local popped = redis.call('ZPOPMIN', K_READY)
  local partition = popped[1]
  if not partition then
    break
  end
  -- The invariant guarantees a due head here; the check only keeps a damaged shard from erroring.
  local head = headOf(partition)
  if head then
    local id = idOfMember(partition, head)
    redis.call('ZREM', K_PENDING, head)
    local record = loadRecord(id)
    record[R_DELIVERIES] = record[R_DELIVERIES] + 1
    saveRecord(id, record)
    local token = shard .. ':' .. string.format('%x', nextSeq()) .. ':' .. id
    redis.call('ZADD', K_LEASES, now + leaseMs, token)
    redis.call('HINCRBY', K_RUNNING, partition, 1)
    leased[#leased + 1] = { id, partition, record[R_PAYLOAD], token, record[R_DELIVERIES], record[R_PUBLISHED], record[R_DUE] }
  end
  -- Back of the line (or out of it, when it may not run more or has nothing due).
  place(partition, now, unorderedLimit)
end

local readyCount, nextEvent = shardState(now)
local reply = { readyCount, nextEvent, reclaimed, deadLettered, #leased }
for _, task in ipairs(leased) do
  for _, field in ipairs(task) do
    reply[#reply + 1] = field
  end
end
return reply

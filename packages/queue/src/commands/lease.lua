--[[
  Lease up to k tasks from one shard, fairly: one task per partition per turn of the round-robin.
  First moves due timers to ready and reclaims expired leases (bounded by the housekeeping batch),
  then pops the partition waiting longest in `ready` k times: O(k log P), never a scan.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  shard number (goes into the lease tokens)
  ARGV[3]  k: the most tasks to lease
  ARGV[4]  lease duration (ms)
  ARGV[5]  max deliveries before an expiring lease dead-letters the task (0 = unlimited)
  ARGV[6]  housekeeping batch: the most timers promoted and leases reclaimed per call
  ARGV[7]  quantum: the most tasks one partition gives in this call (0 = no cap); when the
           partition at the front of the line has had its quantum, the call stops there

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
local quantum = tonumber(ARGV[7])
local now = nowMs()

promoteTimers(now, batch, unorderedLimit)
local reclaimed, deadLettered = reclaimExpired(now, batch, maxDeliveries, unorderedLimit)

local leased = {}
local taken = {}
for _ = 1, k do
  local popped = redis.call('ZPOPMIN', K_READY)
  local partition = popped[1]
  if not partition then
    break
  end
  -- Round-robin: a partition back at the front with its quantum used means everyone in line had
  -- as many turns; it keeps its place (same ticket) for the next call.
  if quantum > 0 and (taken[partition] or 0) >= quantum then
    redis.call('ZADD', K_READY, popped[2], partition)
    break
  end
  taken[partition] = (taken[partition] or 0) + 1
  -- The invariant guarantees a due head here; the check only keeps a damaged shard from erroring.
  local head, nextHead = headAndNext(partition)
  if head then
    local id = idOfMember(partition, head)
    redis.call('ZREM', K_PENDING, head)
    local record = loadRecord(id)
    ageRemove(record[R_PUBLISHED])
    local delivery = record[R_DELIVERIES] + 1
    local token = tokenOf(shard, id, record, delivery, limitOf(partition, unorderedLimit) > 0)
    redis.call('ZADD', K_LEASES, now + leaseMs, token)
    holdRunning(partition, unorderedLimit)
    leased[#leased + 1] = { id, partition, record[R_PAYLOAD], token, delivery, record[R_PUBLISHED], record[R_DUE] }
  end
  -- Back of the line (or out of it, when it may not run more or has nothing due).
  placeAfterLease(partition, nextHead, now, unorderedLimit)
end

local readyCount, nextEvent = shardState(now)
local reply = { readyCount, nextEvent, reclaimed, deadLettered, #leased }
for _, task in ipairs(leased) do
  for _, field in ipairs(task) do
    reply[#reply + 1] = field
  end
end
return reply

--[[
  Publish a batch of tasks into one shard, idempotently by task id.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  dedup window after ack (ms)
  ARGV[3]  wake channel: where the announcement goes when notify > 0 ('' = none)
  ARGV[4]  this shard's number, for the announcement
  ARGV[5]  the announcement's tail (the publishing process's tag, `,@…`)
  ARGV[6]  number of tasks n, then n groups of 6:
           id, partition, payload, dueAt (epoch ms, 0 = none), delayMs (used when dueAt is 0),
           priority (-10..10; 0 = none)

  Returns {readyCount, nextEventMs, notify, r1..rn}
    r = 1 queued, 0 duplicate (the id is pending, leased, dead, or was acked inside the window)
    notify = 1 when this shard has work sooner than before (idle workers should look again);
             2 when, besides, a client joined this shard's fair share (it has the next turn here),
             or a task above the default priority came (it has its client's next turn here):
             busy workers should visit this shard first
  When notify > 0 and a channel is given, `<shard>:<inMs>[,!<shard>]<tail>` is published on it
  here rather than by the caller: one round trip fewer per publish that announces.
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local wakeChannel = ARGV[3]
local wakeShard = ARGV[4]
local wakeTail = ARGV[5]
local n = tonumber(ARGV[6])
local FIRST = 7
local now = nowMs()

local function wakeIn()
  local readyCount, nextEvent = shardState(now)
  if readyCount > 0 then
    return 0
  end
  return nextEvent
end

local function isDuplicate(id)
  if redis.call('HEXISTS', K_TASKS, id) == 1 then
    return true
  end
  local ackedAt = redis.call('ZSCORE', K_DONE, id)
  if ackedAt then
    if tonumber(ackedAt) > now - window then
      return true
    end
    redis.call('ZREM', K_DONE, id)
  end
  return false
end

local before = wakeIn()
local results = {}
local fresh = {}
for i = 0, n - 1 do
  local id = ARGV[FIRST + i * 6]
  if isDuplicate(id) or fresh[id] then
    results[#results + 1] = 0
  else
    fresh[id] = true
    results[#results + 1] = 1
  end
end

-- One counter bump for the whole batch: sequence numbers base+1 .. base+queued, in batch order.
local queued = 0
for _, r in ipairs(results) do
  queued = queued + r
end
local seq = redis.call('INCRBY', K_SEQ, queued) - queued
local touched = {}
local touchedOrder = {}
-- A task above the default priority: busy workers visit this shard first, as for a client joining.
local urgent = false
for i = 0, n - 1 do
  if results[i + 1] == 1 then
    local base = FIRST + i * 6
    local id = ARGV[base]
    local partition = ARGV[base + 1]
    local due = tonumber(ARGV[base + 3])
    if due <= 0 then
      due = now + tonumber(ARGV[base + 4])
    end
    seq = seq + 1
    local record = { partition, seq, due, 0, now, ARGV[base + 2] }
    saveRecord(id, record)
    local priority = tonumber(ARGV[base + 5])
    if priority ~= 0 then
      redis.call('HSET', K_TPRIO, id, priority)
      prioInUse = true
      urgent = urgent or priority > 0
    end
    enqueue(id, record)
    if not touched[partition] then
      touched[partition] = true
      touchedOrder[#touchedOrder + 1] = partition
    end
  end
end
if queued > 0 then
  ageAdd(now, queued)
end
-- Partitions enter the round-robin in the order they first appear in the batch.
for _, partition in ipairs(touchedOrder) do
  placeAfterPublish(partition, now, unorderedLimit)
end

local readyCount, nextEvent = shardState(now)
local after = wakeIn()
local notify = 0
if after >= 0 and (before < 0 or after < before) then
  notify = 1
end
if (clientsJoined > 0 or urgent) and readyCount > 0 then
  notify = 2
end
if notify > 0 and wakeChannel ~= '' then
  local inMs = 0
  if readyCount == 0 then
    inMs = math.floor(nextEvent)
  end
  local message = wakeShard .. ':' .. inMs
  if notify == 2 then
    message = message .. ',!' .. wakeShard
  end
  redis.call('PUBLISH', wakeChannel, message .. wakeTail)
end
local reply = { readyCount, nextEvent, notify }
for _, r in ipairs(results) do
  reply[#reply + 1] = r
end
return reply

--[[
  Lease up to k tasks from one shard, fairly at two levels: the client with the lowest virtual
  time takes a turn (weighted fair share, see includes/shard.lua), and gives the task of its
  partition waiting longest (one task per partition per turn of that client's round-robin).
  First moves due timers to ready and reclaims expired leases (bounded by the housekeeping batch),
  then takes k turns: O(k log P), never a scan.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  shard number (goes into the lease tokens)
  ARGV[3]  k: the most tasks to lease
  ARGV[4]  lease duration (ms)
  ARGV[5]  max deliveries before an expiring lease dead-letters the task (0 = unlimited)
  ARGV[6]  housekeeping batch: the most timers promoted and leases reclaimed per call
  ARGV[7]  quantum: the most tasks one partition gives in this call (0 = no cap); when the
           partition at the front of a client's line has had its quantum, that client's turns
           end for this call (it keeps its virtual time and its line)
  ARGV[8]  m: clients with a cap (`caps`) the caller holds permits for, then m pairs: client,
           permits (cap slots taken in the client's own slot, cap/commands/acquire-2.lua). A capped
           client is leased at most that many tasks here; with none left it is skipped like a
           client with nothing due (it keeps its virtual time and its line, so it is served first
           once it has permits again)

  Returns {readyCount, nextEventMs, reclaimed, deadLettered, n, then n groups of 7:
           id, partition, payload, token, deliveries, publishedAt, dueAt,
           then w, then w clients: the capped clients skipped for want of permits with work ready}
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local shard = ARGV[2]
local k = tonumber(ARGV[3])
local leaseMs = tonumber(ARGV[4])
local maxDeliveries = tonumber(ARGV[5])
local batch = tonumber(ARGV[6])
local quantum = tonumber(ARGV[7])
local permits = {}
for i = 1, tonumber(ARGV[8]) do
  permits[ARGV[7 + i * 2]] = tonumber(ARGV[8 + i * 2])
end
local now = nowMs()

promoteTimers(now, batch, unorderedLimit)
local reclaimed, deadLettered = reclaimExpired(now, batch, maxDeliveries, unorderedLimit)

-- Partitions made ready by an earlier version are in `ready` only, not in their client's line.
-- Their tickets are older than any placed since, so they are at the front of `ready`: adopt them
-- there (a batch per call, only while `ready` holds more than `cready`), so that an upgrade under
-- load never leaves them waiting behind every client's work.
local unadopted = redis.call('ZCARD', K_READY) - redis.call('ZCARD', K_CREADY)
if unadopted > 0 then
  local front = redis.call('ZRANGE', K_READY, 0, batch - 1, 'WITHSCORES')
  for i = 1, #front, 2 do
    local partition, ticket = front[i], tonumber(front[i + 1])
    if not redis.call('ZSCORE', K_CREADY, creadyMember(clientOf(partition), ticket, partition)) then
      readyAdd(partition, ticket)
      unadopted = unadopted - 1
      if unadopted == 0 then
        break
      end
    end
  end
end

local leased = {}
local taken = {}
-- Clients whose partitions had their quantum, or capped ones out of permits: out of `clients` for
-- the rest of this call.
local rested = {}
-- Capped clients out of permits with work ready here: the caller asks their slots for more.
local wanting = {}

-- One task of `partition` (just taken out of `ready`), leased; the partition back in line.
-- Returns true when the partition is ready again.
local function leaseHead(partition)
  -- The invariant guarantees a due head here; the check only keeps a damaged shard from erroring.
  local head, nextHead = headAndNext(partition)
  if head then
    local id = idOfMember(partition, head)
    dequeue(partition, head)
    local record = loadRecord(id)
    ageRemove(record[R_PUBLISHED])
    local delivery = record[R_DELIVERIES] + 1
    local token = tokenOf(shard, id, record, delivery, limitOf(partition, unorderedLimit) > 0)
    redis.call('ZADD', K_LEASES, now + leaseMs, token)
    holdRunning(partition, unorderedLimit)
    leased[#leased + 1] = { id, partition, record[R_PAYLOAD], token, delivery, record[R_PUBLISHED], record[R_DUE] }
  end
  -- Back of the line (or out of it, when it may not run more or has nothing due).
  return placeAfterLease(partition, nextHead, now, unorderedLimit)
end

local turns = k
while turns > 0 do
  -- The client whose turn it is, and the runner-up's virtual time: the client is served turn after
  -- turn (one ZSET write for the run) until its virtual time reaches the runner-up's.
  local two = redis.call('ZRANGE', K_CLIENTS, 0, 1, 'WITHSCORES')
  local client = two[1]
  if not client and #rested > 0 then
    break
  elseif not client then
    -- Partitions of an earlier version not adopted yet (more than a batch of them): plain
    -- round-robin, once no client's partition is ready.
    local popped = redis.call('ZPOPMIN', K_READY)
    if not popped[1] then
      break
    end
    leaseHead(popped[1])
    turns = turns - 1
  else
    local vt = tonumber(two[2])
    local bound = two[4] and tonumber(two[4]) or math.huge
    local step = 1 / weightOf(client)
    local capped = capOf(client) > 0
    local more = true
    local resting = false
    repeat
      if capped and (permits[client] or 0) <= 0 then
        -- At its cap as far as this call may lease: skipped, its place kept (see ARGV[8]).
        resting = true
        wanting[#wanting + 1] = client
        break
      end
      -- Its partition waiting longest, and whether another one waits behind it.
      local line = redis.call('ZRANGE', K_CREADY, '[' .. client .. '\0', '(' .. client .. '\1', 'BYLEX', 'LIMIT', 0, 2)
      local member = line[1]
      local partition = string.sub(member, #client + 14)
      if quantum > 0 and (taken[partition] or 0) >= quantum then
        -- Back at the front of its client's line with its quantum used: every partition of this
        -- client had as many turns; the client rests until the next call, the others go on.
        resting = true
      else
        taken[partition] = (taken[partition] or 0) + 1
        redis.call('ZREM', K_CREADY, member)
        redis.call('ZREM', K_READY, partition)
        more = leaseHead(partition) or line[2] ~= nil
        if capped then
          permits[client] = permits[client] - 1
        end
        turns = turns - 1
        vt = vt + step
      end
    until resting or not more or turns == 0 or vt >= bound
    if resting then
      redis.call('ZREM', K_CLIENTS, client)
      rested[#rested + 1] = { vt, client }
    elseif more then
      redis.call('ZADD', K_CLIENTS, vt, client)
    else
      redis.call('ZREM', K_CLIENTS, client)
    end
  end
end
for _, rest in ipairs(rested) do
  redis.call('ZADD', K_CLIENTS, rest[1], rest[2])
end

local readyCount, nextEvent = shardState(now)
local reply = { readyCount, nextEvent, reclaimed, deadLettered, #leased }
for _, task in ipairs(leased) do
  for _, field in ipairs(task) do
    reply[#reply + 1] = field
  end
end
reply[#reply + 1] = #wanting
for _, client in ipairs(wanting) do
  reply[#reply + 1] = client
end
return reply

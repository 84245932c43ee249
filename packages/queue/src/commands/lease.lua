--[[
  Lease up to k tasks from one shard in fair order: the partitions of `ready` by start tag
  (weighted fair share between clients, round-robin within a client: see includes/shard.lua), one
  task per partition per turn. First moves due timers to ready and reclaims expired leases
  (bounded by the housekeeping batch), then takes k turns: O(k log P), never a scan.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  shard number (goes into the lease tokens)
  ARGV[3]  k: the most tasks to lease
  ARGV[4]  lease duration (ms)
  ARGV[5]  max deliveries before an expiring lease dead-letters the task (0 = unlimited)
  ARGV[6]  housekeeping batch: the most timers promoted and leases reclaimed per call
  ARGV[7]  quantum: the most tasks one partition gives in this call (0 = no cap); a partition that
           had its quantum keeps its new tag for the next call
  ARGV[8]  m: clients with a cap (`caps`) the caller holds permits for, then m pairs: client,
           permits (cap slots taken in the client's own slot, cap/commands/acquire-2.lua). A capped
           client is leased at most that many tasks here. Its partitions met in line with no
           permit keep their place when the client was not asked for or used up its permits (the
           reply names it: the caller asks for it next time), and are set aside (`cready`, ASIDE
           band of `ready`), out of the others' way, when it was asked for and granted none (at
           its cap); a call with permits for it puts back as many of them first, with fresh tags

  Returns {readyCount, nextEventMs, reclaimed, deadLettered, n, then n groups of 8:
           id, partition, payload, token, deliveries, publishedAt, dueAt, priority,
           then w, then w clients: the capped clients met in line here without a permit, in the
           order of their turns (then those first in the aside band),
           then g, then g clients: the capped clients with nothing pending here any more}
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
local asked = {} -- client -> permits given for this call
local permitted = {}
for i = 1, tonumber(ARGV[8]) do
  permits[ARGV[7 + i * 2]] = tonumber(ARGV[8 + i * 2])
  asked[ARGV[7 + i * 2]] = tonumber(ARGV[8 + i * 2])
  permitted[i] = ARGV[7 + i * 2]
end
local now = nowMs()

promoteTimers(now, batch, unorderedLimit)
local reclaimed, deadLettered = reclaimExpired(now, batch, maxDeliveries, unorderedLimit)
local state = fairState()
-- Capped clients met in line without a permit, or with work set aside (the caller asks their slots
-- for more), and those with nothing pending here any more (the caller stops asking slots for them
-- here).
local wanting = {}
local wantingSet = {}
local left = {}

-- Variadic writes in chunks (Lua's unpack has a stack limit).
local function callChunked(command, key, list, width)
  local chunk = 512 * width
  for from = 1, #list, chunk do
    redis.call(command, key, unpack(list, from, math.min(#list, from + chunk - 1)))
  end
end

-- The values of these fields of a hash (nil where absent), like HMGET; but a hash with none at all
-- (no client has a weight, or a cap: the common case) is not read field by field.
local emptyHash = {}
local function fieldsOf(key, names)
  if emptyHash[key] == nil then
    emptyHash[key] = redis.call('EXISTS', key) == 0
  end
  if emptyHash[key] then
    return {}
  end
  return redis.call('HMGET', key, unpack(names))
end

-- Weights and caps of clients not met yet in this call, read for many at once.
local cap = {}
local function learn(names)
  if #names == 0 then
    return
  end
  local weights = fieldsOf(K_SHARES, names)
  local caps = fieldsOf(K_CAPS, names)
  for i, name in ipairs(names) do
    if weightCache[name] == nil then
      weightCache[name] = tonumber(weights[i] or '1')
    end
    cap[name] = tonumber(caps[i] or '0')
  end
end

-- A capped client's partitions set aside go back into `ready` (up to n, in the order they left),
-- with fresh tags: from its finish tag, or just below V when that is behind.
local function putBack(client, n)
  local members = redis.call('ZRANGE', K_CREADY, '[' .. client .. '\0', '(' .. client .. '\1', 'BYLEX', 'LIMIT', 0, n)
  if #members == 0 then
    return
  end
  local partitions = {}
  for i, member in ipairs(members) do
    partitions[i] = string.sub(member, #client + 14)
  end
  local scores = redis.call('ZMSCORE', K_READY, unpack(partitions))
  local adds, outs = {}, {}
  for i, member in ipairs(members) do
    local ticket = tonumber(string.sub(member, #client + 2, #client + 13), 16)
    local score = scores[i] and tonumber(scores[i])
    if score == ASIDE + ticket then
      adds[#adds + 1] = exact(tagFor(client))
      adds[#adds + 1] = partitions[i]
      outs[#outs + 1] = member
    elseif not score then
      outs[#outs + 1] = member -- (a damaged shard: a line member without its partition)
    end -- else an earlier layout's member: its partition is served in ticket order
  end
  if #adds > 0 then
    redis.call('ZADD', K_READY, unpack(adds))
    redis.call('ZADD', K_CLIENTS, exact(finishOf[client]), client)
  end
  if #outs > 0 then
    redis.call('ZREM', K_CREADY, unpack(outs))
  end
end

learn(permitted)
if #permitted > 0 and redis.call('EXISTS', K_CREADY) == 1 then
  for _, client in ipairs(permitted) do
    if permits[client] > 0 then
      putBack(client, permits[client])
    end
  end
end

--[[
  The turns work in Lua memory and write once at the end (or before a read that must see the
  writes): the partitions are popped from `ready` by the turns wanted (ZPOPMIN), and a turn reads
  its partition's head. Deferred: the partitions back into `ready` (one variadic ZADD), the finish
  tags and V (one ZADD of `clients`), the heads out of `pending`, the clients' depth counts (one
  HMGET, HSET and HDEL for all), the age counts (one HINCRBY per second), the records (one HMGET)
  and the leases (one ZADD).
]]
local leased = {} -- {id, partition, limited}
local turnsLeft = k
local taken = {}

-- Heads leased (out of `pending` at the next flush), and the partitions whose head was taken.
local headsOut = {}
local headTaken = {}
local function flushHeads()
  callChunked('ZREM', K_PENDING, headsOut, 1)
  headsOut = {}
end

local depthOut = {} -- client -> tasks leased
-- Leases the head of a partition taken from `ready`; returns whether it may go back to `ready`
-- now (else it is put in `timers`, or nowhere, where the invariant says).
local function leaseHead(partition, client)
  if headTaken[partition] then
    flushHeads() -- its line is read again: the heads taken must be gone from it
  end
  -- The invariant guarantees a due head here; the check only keeps a damaged shard from erroring.
  local head, nextHead = headAndNext(partition)
  if head then
    headTaken[partition] = true
    headsOut[#headsOut + 1] = head
    depthOut[client] = (depthOut[client] or 0) + 1
    holdRunning(partition, unorderedLimit)
    leased[#leased + 1] = { idOfMember(partition, head), partition, limitOf(partition, unorderedLimit) > 0 }
  end
  if priorityInUse() then
    priorityUnindex(partition) -- its head changes; served: its aging count goes
  end
  if not nextHead or isOrdered(partition) then
    return false -- ordered: its one task in flight holds it back until settled
  end
  if unorderedLimit > 0 and runningOf(partition) >= unorderedLimit then
    return false
  end
  local due = dueOfMember(partition, nextHead)
  if due > now then
    redis.call('ZADD', K_TIMERS, due, partition)
    return false
  end
  priorityIndex(partition, nextHead)
  return true
end

--[[
  A turn of the client that its tag gave to `partition`: the client's highest-priority ready
  partition, when it ranks above that one and is in `ready` with a tag (not in this call's hands,
  not set aside), is served instead; the one passed over takes its tag (see "Priority" in
  includes/shard.lua; aging: not once it was passed over AGING_PASSES times). Returns the partition
  served and the tag the one passed over goes back with (nil when it is served itself).
]]
local function priorityTurn(partition, client)
  if not priorityInUse() then
    return partition, nil
  end
  local best = redis.call('ZRANGE', K_PREADY, '[' .. client .. '\0', '(' .. client .. '\1', 'BYLEX', 'LIMIT', 0, 1)[1]
  if not best then
    return partition, nil
  end
  local own = redis.call('HGET', K_PBAND, partition)
  local ownBand = own and string.byte(own, #client + 2) or string.byte(bandOf(0))
  if string.byte(best, #client + 2) >= ownBand then
    return partition, nil
  end
  local passed = tonumber(redis.call('HGET', K_PASSED, partition) or '0')
  if passed >= AGING_PASSES then
    return partition, nil
  end
  local other = string.sub(best, #client + 15)
  local score = redis.call('ZSCORE', K_READY, other)
  if not score then
    return partition, nil
  end
  score = tonumber(score)
  if score >= ASIDE or score < fairState().b - 0.5 then
    return partition, nil
  end
  redis.call('ZREM', K_READY, other)
  redis.call('HSET', K_PASSED, partition, passed + 1)
  return other, score
end

--[[
  The line in memory: `popped` (from ZPOPMIN, in tag order, `at` the next), and `again`: the
  partitions leased in this call and back in line with their new tags, sorted, that may give
  another task in this call (their quantum not used up). A turn takes the lower of the two fronts.
  `back`: partition -> score, what goes back into `ready` at the end.
]]
local popped = {}
local at = 1
local drained = false -- `ready` had no more to pop
local again = {}
local back = {}
local creadyIn, creadyOut = {}, {}
-- Whether `cready` holds members (set aside, or written by an earlier version during an upgrade).
local lines = redis.call('EXISTS', K_CREADY) == 1
local finishDirty = {}
local v = state.v
local skipped = 0

local function lower(a, b)
  return a.tag < b.tag or (a.tag == b.tag and a.partition < b.partition)
end

local function pop()
  local rows = redis.call('ZPOPMIN', K_READY, turnsLeft)
  popped = {}
  at = 1
  local names, seen = {}, {}
  for i = 1, #rows, 2 do
    local partition = rows[i]
    local client = clientOf(partition)
    popped[#popped + 1] = { partition = partition, tag = tonumber(rows[i + 1]), client = client }
    if cap[client] == nil and not seen[client] then
      seen[client] = true
      names[#names + 1] = client
    end
  end
  drained = #rows / 2 < turnsLeft
  learn(names)
end

local function want(client)
  if not wantingSet[client] then
    wantingSet[client] = true
    wanting[#wanting + 1] = client
  end
end

while turnsLeft > 0 do
  if at > #popped and not drained then
    pop()
  end
  local entry = popped[at]
  local first = again[1]
  if first and (not entry or lower(first, entry)) then
    table.remove(again, 1)
    entry = first
    back[entry.partition] = nil
  elseif entry then
    at = at + 1
  else
    break
  end
  local partition, client, tag = entry.partition, entry.client, entry.tag
  if tag >= ASIDE then
    -- Only partitions set aside are left (`ready` holds them at the back).
    back[partition] = tag
    break
  end
  local capped = cap[client] > 0
  if capped and (permits[client] or 0) <= 0 then
    -- No permit left in this call (bounded per call: the rest are met again by the next calls).
    if skipped >= k + batch then
      back[partition] = tag
      break
    end
    skipped = skipped + 1
    want(client)
    if permits[client] == nil or asked[client] > 0 then
      -- Not asked, or its permits used up: it keeps its place, the caller asks for it next time.
      back[partition] = tag
    else
      -- Asked and granted none (at its cap): set aside in its client's line, out of the way.
      local ticket = nextSeq()
      back[partition] = ASIDE + ticket
      creadyIn[#creadyIn + 1] = 0
      creadyIn[#creadyIn + 1] = creadyMember(client, ticket, partition)
    end
  else
    if tag < state.b - 0.5 then
      creadyOut[#creadyOut + 1] = creadyMember(client, tag, partition) -- an earlier layout's
    else
      if lines then
        -- The member an earlier version's lease adopted this partition under, if it did: left in
        -- its client's line, it would lease the partition again, an ordered one's next task too.
        creadyOut[#creadyOut + 1] = creadyMember(client, tag, partition)
      end
      if tag > v then
        v = tag
        state.v = v
      end
    end
    local passedTag
    partition, passedTag = priorityTurn(partition, client)
    if passedTag then
      back[entry.partition] = passedTag
      if lines then
        creadyOut[#creadyOut + 1] = creadyMember(client, passedTag, partition) -- as above
      end
    end
    taken[partition] = (taken[partition] or 0) + 1
    if capped then
      permits[client] = permits[client] - 1
    end
    turnsLeft = turnsLeft - 1
    if leaseHead(partition, client) then
      local next = tagFor(client)
      finishDirty[client] = true
      back[partition] = next
      if quantum == 0 or taken[partition] < quantum then
        local item = { partition = partition, tag = next, client = client }
        local lo, hi = 1, #again + 1
        while lo < hi do
          local mid = math.floor((lo + hi) / 2)
          if lower(again[mid], item) then
            lo = mid + 1
          else
            hi = mid
          end
        end
        table.insert(again, lo, item)
      end
    end
  end
end
-- Popped and not taken: back with their tags.
for i = at, #popped do
  back[popped[i].partition] = popped[i].tag
end
local adds = {}
for partition, score in pairs(back) do
  adds[#adds + 1] = exact(score)
  adds[#adds + 1] = partition
end
callChunked('ZADD', K_READY, adds, 2)
callChunked('ZADD', K_CREADY, creadyIn, 2)
callChunked('ZREM', K_CREADY, creadyOut, 1)
local finishes = { exact(v), TAG_V }
for client in pairs(finishDirty) do
  finishes[#finishes + 1] = exact(finishOf[client])
  finishes[#finishes + 1] = client
end
callChunked('ZADD', K_CLIENTS, finishes, 2)
flushHeads()

-- Capped clients whose work waits set aside, first in line there (a caller that does not know of
-- them yet, e.g. after a restart, learns of them here), and aside work of clients whose cap went.
local aside = redis.call('ZRANGE', K_READY, exact(ASIDE), '+inf', 'BYSCORE', 'LIMIT', 0, 16)
if #aside > 0 then
  local names, seen = {}, {}
  for _, partition in ipairs(aside) do
    local client = clientOf(partition)
    if cap[client] == nil and not seen[client] then
      seen[client] = true
      names[#names + 1] = client
    end
  end
  learn(names)
  for _, partition in ipairs(aside) do
    local client = clientOf(partition)
    if cap[client] == 0 then
      putBack(client, k)
    elseif (permits[client] or 0) <= 0 then
      want(client)
    end
  end
end

-- The counts of what was leased (one read, one write and one delete for all clients: with many
-- clients each turn is another client's), then the records (read once) and the leases (written once).
local depthClients = {}
for client in pairs(depthOut) do
  depthClients[#depthClients + 1] = client
end
for from = 1, #depthClients, 512 do
  local names = { unpack(depthClients, from, math.min(#depthClients, from + 511)) }
  local depths = redis.call('HMGET', K_CDEPTH, unpack(names))
  local kept, emptied = {}, {}
  for i, client in ipairs(names) do
    local depth = tonumber(depths[i] or '0') - depthOut[client]
    if depth > 0 then
      kept[#kept + 1] = client
      kept[#kept + 1] = depth
    else
      emptied[#emptied + 1] = client
    end
  end
  if #kept > 0 then
    redis.call('HSET', K_CDEPTH, unpack(kept))
  end
  if #emptied > 0 then
    redis.call('HDEL', K_CDEPTH, unpack(emptied))
    redis.call('ZREM', K_CLIENTS, unpack(emptied)) -- nothing left here: its next partition starts at V
    for _, client in ipairs(emptied) do
      if cap[client] > 0 then
        left[#left + 1] = client
      end
    end
  end
end
-- Capped clients given permits here that have nothing pending here (nor leased now).
local idle = {}
for _, client in ipairs(permitted) do
  if not depthOut[client] and not wantingSet[client] then
    idle[#idle + 1] = client
  end
end
if #idle > 0 then
  local depths = redis.call('HMGET', K_CDEPTH, unpack(idle))
  for i, client in ipairs(idle) do
    if not depths[i] and cap[client] > 0 then
      left[#left + 1] = client
    end
  end
end
local tasks = {}
if #leased > 0 then
  local ids = {}
  for i, task in ipairs(leased) do
    ids[i] = task[1]
  end
  local raws = {}
  for from = 1, #ids, 512 do
    local part = redis.call('HMGET', K_TASKS, unpack(ids, from, math.min(#ids, from + 511)))
    for _, raw in ipairs(part) do
      raws[#raws + 1] = raw
    end
  end
  local priorities = {}
  if priorityInUse() then
    for from = 1, #ids, 512 do
      local part = redis.call('HMGET', K_TPRIO, unpack(ids, from, math.min(#ids, from + 511)))
      for i = 1, #part do
        priorities[from + i - 1] = tonumber(part[i] or '0')
      end
    end
  end
  local ages = {}
  local leases = {}
  for i, task in ipairs(leased) do
    local id, partition, limited = task[1], task[2], task[3]
    local record = cmsgpack.unpack(raws[i])
    local second = math.floor(record[R_PUBLISHED] / 1000)
    ages[second] = (ages[second] or 0) + 1
    local delivery = record[R_DELIVERIES] + 1
    local token = tokenOf(shard, id, record, delivery, limited)
    leases[#leases + 1] = now + leaseMs
    leases[#leases + 1] = token
    tasks[i] = { id, partition, record[R_PAYLOAD], token, delivery, record[R_PUBLISHED], record[R_DUE], priorities[i] or 0 }
  end
  for second, count in pairs(ages) do
    if redis.call('HINCRBY', K_AGECOUNT, second, -count) <= 0 then
      redis.call('HDEL', K_AGECOUNT, second)
      redis.call('ZREM', K_AGES, second)
    end
  end
  callChunked('ZADD', K_LEASES, leases, 2)
end

local readyCount, nextEvent = shardState(now)
local reply = { readyCount, nextEvent, reclaimed, deadLettered, #tasks }
for _, task in ipairs(tasks) do
  for _, field in ipairs(task) do
    reply[#reply + 1] = field
  end
end
reply[#reply + 1] = #wanting
for _, client in ipairs(wanting) do
  reply[#reply + 1] = client
end
reply[#reply + 1] = #left
for _, client in ipairs(left) do
  reply[#reply + 1] = client
end
return reply

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
           then w, then w clients: the capped clients skipped for want of permits with work ready,
           in the order of their turns,
           then g, then g clients: the capped clients that left the shard's line (nothing ready)}
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

--[[
  The turns work in Lua memory and write once at the end (or before a read that must see the
  writes): a turn costs two reads (its client's line when not cached, its partition's head) and no
  write of its own. Deferred: the virtual times (one variadic ZADD / ZREM of `clients`), the
  partitions out of `ready` and `cready`, the heads out of `pending`, the clients' depth counts
  (one HMGET, HSET and HDEL for all), the age counts (one HINCRBY per second), the records (one
  HMGET) and the leases (one ZADD).
]]
local leased = {} -- {id, partition, limited}
local turnsLeft = k
local taken = {}
-- Capped clients out of permits with work ready here: the caller asks their slots for more.
local wanting = {}
-- Capped clients with nothing ready here any more: the caller stops asking slots for them here.
local left = {}

-- Variadic writes in chunks (Lua's unpack has a stack limit).
local function callChunked(command, key, list, width)
  local chunk = 512 * width
  for from = 1, #list, chunk do
    redis.call(command, key, unpack(list, from, math.min(#list, from + chunk - 1)))
  end
end

-- Heads leased (out of `pending` at the next flush), and the partitions whose head was taken.
local headsOut = {}
local headTaken = {}
local function flushHeads()
  callChunked('ZREM', K_PENDING, headsOut, 1)
  headsOut = {}
end

-- Members out of `cready`, and partitions out of `ready` (unless one came back in since: readyAdd
-- then gave it its new ticket there).
local creadyOut = {}
local readyOut = {}
local function flushReady()
  callChunked('ZREM', K_CREADY, creadyOut, 1)
  creadyOut = {}
  local out = {}
  for partition in pairs(readyOut) do
    out[#out + 1] = partition
  end
  callChunked('ZREM', K_READY, out, 1)
  readyOut = {}
end

local depthOut = {} -- client -> tasks leased
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
  -- Back of the line (or out of it, when it may not run more or has nothing due).
  local back = placeAfterLease(partition, nextHead, now, unorderedLimit)
  if back then
    readyOut[partition] = nil
  end
  return back
end

--[[
  The clients in memory: `order` sorted by (virtual time, name), as ZRANGE orders `clients`. Read
  by the first turns + 1; `horizon` = the last read when there were more: an unread client sorts
  after it, so a client still before it is the lowest of all; past it, `clients` is read again.
]]
local order = {}
local horizon
local weight = {}
local cap = {}
-- Clients whose partitions had their quantum, or capped ones out of permits: out of the turns for
-- the rest of this call, their virtual time kept.
local restedSet = {}
local restedCount = 0
local changed = {} -- client -> entry whose virtual time changed
local gone = {} -- clients with no ready partition left

local function before(a, b)
  return a.vt < b.vt or (a.vt == b.vt and a.name < b.name)
end

local function flushClients()
  local adds, rems = {}, {}
  for name, entry in pairs(changed) do
    if gone[name] then
      rems[#rems + 1] = name
    else
      adds[#adds + 1] = entry.vt
      adds[#adds + 1] = name
    end
  end
  callChunked('ZADD', K_CLIENTS, adds, 2)
  callChunked('ZREM', K_CLIENTS, rems, 1)
  changed = {}
  gone = {}
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

-- Reads the first turns + 1 clients not resting (those resting are still in `clients`).
local function readClients()
  flushClients()
  local count = turnsLeft + restedCount
  local rows = redis.call('ZRANGE', K_CLIENTS, 0, count, 'WITHSCORES')
  order = {}
  local names = {}
  for i = 1, #rows, 2 do
    if not restedSet[rows[i]] then
      order[#order + 1] = { name = rows[i], vt = tonumber(rows[i + 1]) }
      if not weight[rows[i]] then
        names[#names + 1] = rows[i]
      end
    end
  end
  horizon = nil
  if #rows / 2 > count then
    horizon = { name = rows[#rows - 1], vt = tonumber(rows[#rows]) }
  end
  if #names > 0 then
    local weights = fieldsOf(K_SHARES, names)
    local caps = fieldsOf(K_CAPS, names)
    for i, name in ipairs(names) do
      weight[name] = tonumber(weights[i] or '1')
      cap[name] = tonumber(caps[i] or '0')
    end
  end
end

-- The entry at order[1] moved back (its virtual time grew): to its sorted place.
local function resort()
  local entry = table.remove(order, 1)
  local lo, hi = 1, #order + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if before(order[mid], entry) then
      lo = mid + 1
    else
      hi = mid
    end
  end
  table.insert(order, lo, entry)
end

--[[
  Each client's line (its partitions in `cready`) as read: members, the next one's index, whether
  the read held the whole line, and how many partitions joined its back since. Read 2 members at
  first (most clients get one turn per call), twice as many at each read again.
]]
local lines = {}
local function frontOf(client)
  local line = lines[client]
  if line and line.at <= #line.members then
    return line.members[line.at]
  end
  if line and line.complete and line.joined == 0 then
    return nil
  end
  local want = line and math.max(2, math.min(2 * #line.members, turnsLeft + 1)) or 2
  if line then
    flushReady() -- what this call took from the line must be gone from what is read
  end
  local members = redis.call('ZRANGE', K_CREADY, '[' .. client .. '\0', '(' .. client .. '\1', 'BYLEX', 'LIMIT', 0, want)
  lines[client] = { members = members, at = 1, complete = #members < want, joined = 0 }
  return members[1]
end

-- Whether a partition of the client is still in line (read again when the read part is used up).
local function hasMore(client)
  local line = lines[client]
  if line.at <= #line.members or line.joined > 0 then
    return true
  end
  return not line.complete and frontOf(client) ~= nil
end

local function leave(entry)
  table.remove(order, 1)
  gone[entry.name] = true
  changed[entry.name] = entry
  if cap[entry.name] > 0 then
    left[#left + 1] = entry.name
  end
end

local function rest(entry)
  table.remove(order, 1)
  restedSet[entry.name] = true
  restedCount = restedCount + 1
  changed[entry.name] = entry
end

readClients()
while turnsLeft > 0 do
  local entry = order[1]
  if horizon and (not entry or before(horizon, entry)) then
    readClients()
    entry = order[1]
  end
  if not entry and restedCount > 0 then
    break
  elseif not entry then
    -- Partitions of an earlier version not adopted yet (more than a batch of them): plain
    -- round-robin, once no client's partition is ready.
    flushClients()
    flushReady()
    local popped = redis.call('ZPOPMIN', K_READY)
    if not popped[1] then
      break
    end
    leaseHead(popped[1], clientOf(popped[1]))
    turnsLeft = turnsLeft - 1
    readClients() -- the partition may have come back into a client's line
  else
    local client = entry.name
    local capped = cap[client] > 0
    if capped and (permits[client] or 0) <= 0 then
      -- At its cap as far as this call may lease: skipped, its place kept (see ARGV[8]).
      rest(entry)
      wanting[#wanting + 1] = client
    else
      -- Its partition waiting longest.
      local member = frontOf(client)
      if not member then
        -- (a damaged shard: a client without a line) out of `clients`
        leave(entry)
      else
        local partition = string.sub(member, #client + 14)
        if quantum > 0 and (taken[partition] or 0) >= quantum then
          -- Back at the front of its client's line with its quantum used: every partition of this
          -- client had as many turns; the client rests until the next call, the others go on.
          rest(entry)
        else
          taken[partition] = (taken[partition] or 0) + 1
          local line = lines[client]
          line.at = line.at + 1
          creadyOut[#creadyOut + 1] = member
          readyOut[partition] = true
          if leaseHead(partition, client) then
            line.joined = line.joined + 1
          end
          if capped then
            permits[client] = permits[client] - 1
          end
          turnsLeft = turnsLeft - 1
          entry.vt = entry.vt + 1 / weight[client]
          changed[client] = entry
          if hasMore(client) then
            resort()
          else
            leave(entry)
          end
        end
      end
    end
  end
end
flushClients()
flushReady()
flushHeads()

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
    tasks[i] = { id, partition, record[R_PAYLOAD], token, delivery, record[R_PUBLISHED], record[R_DUE] }
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

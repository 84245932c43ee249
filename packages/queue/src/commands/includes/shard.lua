--[[
  Shared state and helpers of one queue shard (textually included by every queue script).

  The shard layout: every script (commands/<op>.lua) receives the same keys, those of one shard S,
  all tagged {q:S}, in this order (SHARD_KEY_NAMES in keys.ts):
    KEYS[1]  ready     ZSET partition -> start tag. Partitions whose head is due and that may run
                       (ordered: nothing in flight), in fair order: ZPOPMIN = the next turn
                       (weighted fair share between clients, then round-robin within a client; see
                       "Fair share" below). Three bands of scores:
                         < `\0b` - 0.5   a ticket of an earlier layout (round-robin number from
                                         `seq`): served first, in ticket order (the upgrade)
                         below ASIDE     a start tag (virtual time)
                         >= ASIDE (2^48) ASIDE + ticket: a capped client's partition set aside
                                         while the client has no cap slot (also in `cready`)
    KEYS[2]  timers    ZSET partition -> wake time (ms). Partitions whose head becomes due later
                       (delayed task, ordered partition blocked after a reject).
    KEYS[3]  pending   ZSET, every score 0, ordered by member bytes:
                         "<partition>\0<sort key><task id>"
                       sort key (23 hex chars): ordered "<seq:12><due:11>", unordered "<due:11><seq:12>".
                       The head of partition P = first member in the lex range [P\0, P\1).
    KEYS[4]  tasks     HASH task id -> cmsgpack record (R_* indexes below). Holds every task that is
                       pending, leased or dead: its presence refuses a duplicate publish. While a
                       task is leased, its delivery count lives in the lease token (so that lease
                       does not rewrite the record); settling writes it back.
    KEYS[5]  leases    ZSET lease token -> lease deadline (ms).
    KEYS[6]  running   HASH partition -> tasks in flight, for partitions with an in-flight limit
                       (ordered ones, and unordered ones when a concurrency is configured); only
                       partitions with at least one.
    KEYS[7]  seq       STRING counter: arrival sequence numbers and round-robin tickets (survives
                       purge, so that lease tokens, built from it, are never reused).
    KEYS[8]  done      ZSET task id -> ack time (ms): the post-ack dedup window, trimmed on write.
    KEYS[9]  dlq       ZSET task id -> dead-letter time (ms).
    KEYS[10] ages      ZSET second -> second: publish seconds that still have pending tasks.
    KEYS[11] agecount  HASH second -> pending tasks published in that second (the oldest waiting
                       task's age without an index per task; leased tasks are not counted, so
                       that ack need not read the record).
    KEYS[12] clients   ZSET client -> its finish tag: the start tag its next ready partition gets
                       (absent or <= V: it has no partition ready ahead of the virtual time; reset
                       when its last pending task here goes, see `cdepth`). Two members that are
                       no client: `\0v` = V, the shard's virtual time (the tag of the last partition
                       leased), and `\0b` = the first V (the `seq` counter + 2^32 when the key was
                       first written: every ticket of an earlier layout is below it, also those an
                       earlier version's process gives during a rolling upgrade).
    KEYS[13] cready    ZSET, every score 0, ordered by member bytes:
                         "<client>\0<ticket:12 hex><partition>"
                       the partitions set aside (score ASIDE + ticket in `ready`), grouped by
                       client, each client's in the order they were set aside; lease puts them
                       back with fresh tags once the client has cap slots. (An earlier layout had
                       every ready partition here with its `ready` ticket: such members go with
                       their partition's first lease.)
    KEYS[14] shares    HASH client -> weight (absent: 1). Written by setClientWeight (`requester
                       keys create|update --weight`), in every shard; never removed by purge.
    KEYS[15] cdepth    HASH client -> its pending tasks in this shard (only clients with some): the
                       per-client depth of `queue info --by-client` and the client metrics.
    KEYS[16] caps      HASH client -> the most tasks it may have in flight cluster-wide (absent: no
                       cap). Written by setClientMaxInFlight (`requester keys create|update
                       --max-in-flight`), in every shard like `shares`. The count itself is not kept
                       here (shards are separate slots): lease takes a capped client's tasks only
                       against permits the caller holds in the client's own slot (cap/commands/).
    KEYS[17] tprio     HASH task id -> its priority (-10..10), only for tasks whose priority is not
                       0 and that are pending, leased or dead (its absence: no task here has one,
                       and the priority helpers below cost one EXISTS per script).
    KEYS[18] pready    ZSET, every score 0, ordered by member bytes:
                         "<client>\0<band:1><ticket:12 hex><partition>"
                       the ready partitions (those readied while `tprio` exists), grouped by
                       client, highest priority first (band 'A' = 10 .. 'K' = 0 .. 'U' = -10), then
                       in the order they became ready: where a client's turn looks for a partition
                       to serve before the one its tag gave (see "Priority" below).
    KEYS[19] pband     HASH partition -> its `pready` member (the partitions in `pready`).
    KEYS[20] passed    HASH partition -> how many times in a row a turn passed it over for a
                       higher-priority partition of its client (only partitions passed over and not
                       served since): the aging of "Priority" below.

  A partition's client is the part of its name after the last " @" (the client namespace,
  `clientScoped` in @requester/shared/contract: "!order-42 @billing" is billing's); a name without
  one belongs to the anonymous client "".

  Invariant after every script: a partition is in `ready` iff its head is due and it may run; else in
  `timers` at its head's due time if it may run; else in neither. Every task id in `tasks` is in
  exactly one of pending / leases / dlq.
]]
local K_READY = KEYS[1]
local K_TIMERS = KEYS[2]
local K_PENDING = KEYS[3]
local K_TASKS = KEYS[4]
local K_LEASES = KEYS[5]
local K_RUNNING = KEYS[6]
local K_SEQ = KEYS[7]
local K_DONE = KEYS[8]
local K_DLQ = KEYS[9]
local K_AGES = KEYS[10]
local K_AGECOUNT = KEYS[11]
local K_CLIENTS = KEYS[12]
local K_CREADY = KEYS[13]
local K_SHARES = KEYS[14]
local K_CDEPTH = KEYS[15]
local K_CAPS = KEYS[16]
local K_TPRIO = KEYS[17]
local K_PREADY = KEYS[18]
local K_PBAND = KEYS[19]
local K_PASSED = KEYS[20]

-- Task record fields (a cmsgpack array).
local R_PARTITION = 1
local R_SEQ = 2
local R_DUE = 3
local R_DELIVERIES = 4
local R_PUBLISHED = 5
local R_PAYLOAD = 6
local R_REASON = 7
local R_DEAD_AT = 8

-- Redis time, never the caller's clock: every process agrees on what is due.
--- @include "shared/now"

local function nextSeq()
  return redis.call('INCR', K_SEQ)
end

local function isOrdered(partition)
  return string.byte(partition, 1) == 33 -- '!'
end

-- The client of a partition: what follows the last " @" of its name ("" for none; see the header).
local function clientOf(partition)
  local at = string.match(partition, '^.*() @')
  if not at then
    return ''
  end
  return string.sub(partition, at + 2)
end

--[[
  Fair share (start-time fair queuing, one tag per ready partition). V is the shard's virtual time:
  the start tag of the last partition leased. A partition of client c entering `ready` gets the
  start tag S = c's finish tag F_c when that is ahead of V, else V - NEWCOMER_LEAD (a client with
  nothing ready ahead starts just below V: served next, without banking credit while idle nor
  waiting behind the others' history); then F_c = S + 1/weight. Lease takes partitions in tag
  order (ZPOPMIN), so saturated clients are served in proportion to their weights, and a client's
  partitions round-robin (one readied again goes behind the client's others). NEWCOMER_LEAD is
  below the smallest step (1/MAX_CLIENT_WEIGHT). F_c is dropped when the client's last pending
  task here goes (`cdepth`), so a purge or a cancel of all its work does not leave it in the
  future. Residual effect: ready partitions that leave without a lease while others of the client
  stay (a partial cancel, a reject to `timers`) leave F_c where their tags took it: the client's
  next partitions start behind that gap (the others get up to gap/weight turns each first, once).
  A capped client's partition met without a permit keeps its tag (lease), so it may sit behind V.
]]
local NEWCOMER_LEAD = 1 / 2000
local ASIDE = 2 ^ 48
local TAG_V = '\0v'
local TAG_B = '\0b'
-- Clients that joined `clients` during this script (publish tells workers: see FairQueue.announce).
local clientsJoined = 0
local function creadyMember(client, ticket, partition)
  return client .. '\0' .. string.format('%012x', ticket) .. partition
end

-- A score spelled out to 17 significant digits (a round trip of the double, whatever the server's
-- conversion of a Lua number argument).
local function exact(x)
  return string.format('%.17g', x)
end

--[[
  V and the first V, read once per script (written the first time: see KEYS[12]). The first V is
  the `seq` counter + 2^32: above every round-robin ticket an earlier version's process may still
  give a partition during a rolling upgrade (each takes one from `seq`), so that those are served
  first whenever they come; 2^32 keeps the tags' resolution at ~1e-6 for the first billions.
]]
local OLD_TICKETS_AHEAD = 2 ^ 32
local fair
local function fairState()
  if not fair then
    local s = redis.call('ZMSCORE', K_CLIENTS, TAG_V, TAG_B)
    if s[1] and s[2] then
      fair = { v = tonumber(s[1]), b = tonumber(s[2]) }
    else
      local b = tonumber(redis.call('GET', K_SEQ) or '0') + OLD_TICKETS_AHEAD
      redis.call('ZADD', K_CLIENTS, b, TAG_V, b, TAG_B)
      fair = { v = b, b = b }
    end
  end
  return fair
end

-- Weights read once per script (lease fills it for many clients at once).
local weightCache = {}
-- A client's weight (its share of this shard's leases relative to the others').
local function weightOf(client)
  local w = weightCache[client]
  if w == nil then
    w = tonumber(redis.call('HGET', K_SHARES, client) or '1')
    weightCache[client] = w
  end
  return w
end

-- Finish tags read or computed in this script (client -> number, false = none).
local finishOf = {}
local function finishTag(client)
  local f = finishOf[client]
  if f == nil then
    f = tonumber(redis.call('ZSCORE', K_CLIENTS, client) or nil) or false
    finishOf[client] = f
  end
  return f
end

-- The start tag of the client's next ready partition (its finish tag moves on; not written).
local function tagFor(client)
  local v = fairState().v
  local last = finishTag(client)
  local start
  if last and last > v then
    start = last
  else
    start = v - NEWCOMER_LEAD
    clientsJoined = clientsJoined + 1
  end
  finishOf[client] = start + 1 / weightOf(client)
  return start
end

-- The `cready` member of a ready partition with this score, if it has one (set aside, or of an
-- earlier layout).
local function lineMemberOf(partition, score)
  if score >= ASIDE then
    return creadyMember(clientOf(partition), score - ASIDE, partition)
  end
  if score < fairState().b - 0.5 then
    return creadyMember(clientOf(partition), score, partition)
  end
end

--[[
  Priority (`PublishTask.priority`, -10..10, default 0) acts inside a client's share: the turns a
  client gets are its tags, as without priority, but a turn of client c serves c's highest-priority
  ready partition when that ranks above the partition the tag gave (lease: the two swap places, the
  one passed over takes the other's tag). So the weighted share between clients is untouched, and
  a partition's priority is its head's: an ordered partition never reorders, its head decides when
  it runs. Aging: a partition passed over AGING_PASSES times is not passed over again until it has
  been served (its count, `passed`, is then dropped), so under a constant stream of higher-priority
  work a partition waits at most AGING_PASSES rounds of its client's line. The line (`pready`) is
  kept only while the shard has a task with a priority (`tprio`): a shard without pays one EXISTS
  per script; a partition readied before then is not in it and counts as priority 0 when its tag
  comes up, but is not found by a turn of a lower-priority one.
]]
local AGING_PASSES = 4
local prioInUse
local function priorityInUse()
  if prioInUse == nil then
    prioInUse = redis.call('EXISTS', K_TPRIO) == 1
  end
  return prioInUse
end

local function bandOf(priority)
  return string.char(75 - priority) -- 10 -> 'A', 0 -> 'K', -10 -> 'U': higher sorts first
end

-- The priority of a task (0 when it has none recorded).
local function priorityOf(id)
  if not priorityInUse() then
    return 0
  end
  return tonumber(redis.call('HGET', K_TPRIO, id) or '0')
end

local function idOfPendingMember(partition, member)
  return string.sub(member, #partition + 25)
end

-- A partition entering `ready` with this head: into its client's priority line (when the shard
-- has prioritized tasks at all).
local function priorityIndex(partition, head)
  if priorityInUse() then
    local priority = priorityOf(idOfPendingMember(partition, head))
    local member = clientOf(partition) .. '\0' .. bandOf(priority) .. string.format('%012x', nextSeq()) .. partition
    redis.call('ZADD', K_PREADY, 0, member)
    redis.call('HSET', K_PBAND, partition, member)
  end
end

-- A partition leaving `ready` (or whose head changes): out of its client's priority line.
local function priorityUnindex(partition)
  if not priorityInUse() then
    return
  end
  local member = redis.call('HGET', K_PBAND, partition)
  if member then
    redis.call('ZREM', K_PREADY, member)
    redis.call('HDEL', K_PBAND, partition)
  end  redis.call('HDEL', K_PASSED, partition)
end

-- A partition staying in `ready` whose head may have changed (a task due earlier published, a
-- lease reclaimed): its place in its client's priority line follows the new head's priority, at
-- the ticket it became ready with (a partition not in the line yet joins it).
local function priorityFollow(partition, head)
  if not priorityInUse() then
    return
  end
  local band = bandOf(priorityOf(idOfPendingMember(partition, head)))
  local member = redis.call('HGET', K_PBAND, partition)
  local at = #clientOf(partition) + 2
  if member and string.sub(member, at, at) == band then
    return
  end
  if member then
    redis.call('ZREM', K_PREADY, member)
    member = string.sub(member, 1, at - 1) .. band .. string.sub(member, at + 1)
  else
    member = clientOf(partition) .. '\0' .. band .. string.format('%012x', nextSeq()) .. partition
  end
  redis.call('ZADD', K_PREADY, 0, member)
  redis.call('HSET', K_PBAND, partition, member)
end

-- The partition into `ready` (its head given), behind its client's others.
local function readyAdd(partition, head)
  local client = clientOf(partition)
  redis.call('ZADD', K_READY, exact(tagFor(client)), partition)
  redis.call('ZADD', K_CLIENTS, exact(finishOf[client]), client)
  priorityIndex(partition, head)
end

-- The partition out of `ready` (and out of its client's line when set aside).
local function readyRemove(partition)
  local score = redis.call('ZSCORE', K_READY, partition)
  if not score then
    return
  end
  redis.call('ZREM', K_READY, partition)
  local member = lineMemberOf(partition, tonumber(score))
  if member then
    redis.call('ZREM', K_CREADY, member)
  end
  -- The member an earlier version's lease adopted it under, if it did (see lease.lua).
  local adopted = creadyMember(clientOf(partition), tonumber(score), partition)
  if adopted ~= member then
    redis.call('ZREM', K_CREADY, adopted)
  end
  priorityUnindex(partition)
end

-- A client's cap of tasks in flight across the cluster; 0 = none.
local function capOf(client)
  return tonumber(redis.call('HGET', K_CAPS, client) or '0')
end

-- How many tasks of a partition may be in flight at once; 0 = unlimited.
local function limitOf(partition, unorderedLimit)
  if isOrdered(partition) then
    return 1
  end
  return unorderedLimit
end

local function memberOf(partition, seq, due, id)
  local sortKey
  if isOrdered(partition) then
    sortKey = string.format('%012x%011x', seq, due)
  else
    sortKey = string.format('%011x%012x', due, seq)
  end
  return partition .. '\0' .. sortKey .. id
end

local function dueOfMember(partition, member)
  local at = #partition + 2
  if isOrdered(partition) then
    return tonumber(string.sub(member, at + 12, at + 22), 16)
  end
  return tonumber(string.sub(member, at, at + 10), 16)
end

local function idOfMember(partition, member)
  return string.sub(member, #partition + 25)
end

local function headOf(partition)
  return redis.call('ZRANGE', K_PENDING, '[' .. partition .. '\0', '(' .. partition .. '\1', 'BYLEX', 'LIMIT', 0, 1)[1]
end

-- The head and the task after it (the next head once the head is leased).
local function headAndNext(partition)
  local two = redis.call('ZRANGE', K_PENDING, '[' .. partition .. '\0', '(' .. partition .. '\1', 'BYLEX', 'LIMIT', 0, 2)
  return two[1], two[2]
end

local function idOfToken(token)
  local first = string.find(token, ':', 1, true)
  local second = string.find(token, ':', first + 1, true)
  return string.sub(token, second + 1)
end

local function loadRecord(id)
  local raw = redis.call('HGET', K_TASKS, id)
  if not raw then
    return nil
  end
  return cmsgpack.unpack(raw)
end

local function saveRecord(id, record)
  redis.call('HSET', K_TASKS, id, cmsgpack.pack(record))
end

local function runningOf(partition)
  return tonumber(redis.call('HGET', K_RUNNING, partition) or '0')
end

-- In-flight counts are kept only where a limit needs them (see KEYS[6]).
local function holdRunning(partition, unorderedLimit)
  if limitOf(partition, unorderedLimit) > 0 then
    redis.call('HINCRBY', K_RUNNING, partition, 1)
  end
end

local function releaseRunning(partition, unorderedLimit)
  if limitOf(partition, unorderedLimit) > 0 and redis.call('HINCRBY', K_RUNNING, partition, -1) <= 0 then
    redis.call('HDEL', K_RUNNING, partition)
  end
end

--[[
  A lease token: "<shard>:<seq hex>-<delivery>-<limited 1|0>:<id>". The record's sequence number and
  the delivery number make it unique for ever; `limited` says whether the partition counts its
  tasks in flight, so that acking an unlimited one needs no record read.
]]
local function tokenOf(shard, id, record, delivery, limited)
  local flag = limited and '1' or '0'
  return shard .. ':' .. string.format('%x', record[R_SEQ]) .. '-' .. delivery .. '-' .. flag .. ':' .. id
end

-- Returns id, delivery number, limited.
local function parseLeaseToken(token)
  local first = string.find(token, ':', 1, true)
  local second = string.find(token, ':', first + 1, true)
  local dash1 = string.find(token, '-', first, true)
  local dash2 = string.find(token, '-', dash1 + 1, true)
  return string.sub(token, second + 1), tonumber(string.sub(token, dash1 + 1, dash2 - 1)), string.sub(token, dash2 + 1, second - 1) == '1'
end

-- Pending-task counts per publish second (see KEYS[10..11]).
local function ageAdd(publishedMs, count)
  local second = math.floor(publishedMs / 1000)
  if redis.call('HINCRBY', K_AGECOUNT, second, count or 1) == (count or 1) then
    redis.call('ZADD', K_AGES, second, second)
  end
end

local function ageRemove(publishedMs)
  local second = math.floor(publishedMs / 1000)
  if redis.call('HINCRBY', K_AGECOUNT, second, -1) <= 0 then
    redis.call('HDEL', K_AGECOUNT, second)
    redis.call('ZREM', K_AGES, second)
  end
end

--[[
  Put a partition where the invariant says it belongs. Called after anything that may change its
  head, its due time or its in-flight count. A partition already in `ready` keeps its tag (its
  place in line); one entering `ready` gets a fresh tag (the back of its client's line).
]]
local function place(partition, now, unorderedLimit)
  local head = headOf(partition)
  local limit = limitOf(partition, unorderedLimit)
  if not head or (limit > 0 and runningOf(partition) >= limit) then
    readyRemove(partition)
    redis.call('ZREM', K_TIMERS, partition)
    return
  end
  local due = dueOfMember(partition, head)
  if due <= now then
    if not redis.call('ZSCORE', K_READY, partition) then
      readyAdd(partition, head)
      redis.call('ZREM', K_TIMERS, partition)
    else
      priorityFollow(partition, head)
    end
  else
    readyRemove(partition)
    redis.call('ZADD', K_TIMERS, due, partition)
  end
end

--[[
  `place` for a partition that just received new tasks: one already in `ready` stays there (a new
  task never delays a due head: ordered ones queue behind it, unordered ones sort by due time),
  ranked by its head's priority (a new task due earlier is its new head).
]]
local function placeAfterPublish(partition, now, unorderedLimit)
  if not redis.call('ZSCORE', K_READY, partition) then
    place(partition, now, unorderedLimit)
  elseif priorityInUse() then
    priorityFollow(partition, headOf(partition)) -- an unordered task due earlier is its new head
  end
end

-- A task (not currently pending) goes back into its partition's pending line.
local function enqueue(id, record)
  redis.call('ZADD', K_PENDING, 0, memberOf(record[R_PARTITION], record[R_SEQ], record[R_DUE], id))
  redis.call('HINCRBY', K_CDEPTH, clientOf(record[R_PARTITION]), 1)
end

-- A pending task leaves its partition's line (leased).
local function dequeue(partition, member)
  redis.call('ZREM', K_PENDING, member)
  local client = clientOf(partition)
  if redis.call('HINCRBY', K_CDEPTH, client, -1) <= 0 then
    redis.call('HDEL', K_CDEPTH, client)
    redis.call('ZREM', K_CLIENTS, client) -- nothing left here: its next partition starts at V
  end
end

-- A leased task (lease already released) moves to the dead letters.
local function bury(id, record, reason, now)
  record[R_REASON] = reason
  record[R_DEAD_AT] = now
  saveRecord(id, record)
  redis.call('ZADD', K_DLQ, now, id)
end

--[[
  Settle a lease: checks the token is still live and releases it.
  Returns the task id and its record (delivery count brought up to date), or nil when the token is
  stale (reclaimed, settled, or unknown).
]]
local function takeLease(token, unorderedLimit)
  if redis.call('ZREM', K_LEASES, token) == 0 then
    return nil
  end
  local id, delivery = parseLeaseToken(token)
  local record = loadRecord(id)
  record[R_DELIVERIES] = delivery
  releaseRunning(record[R_PARTITION], unorderedLimit)
  return id, record
end

-- Expired leases come back: their tasks return to pending (or die after maxDeliveries leases).
local function reclaimExpired(now, batch, maxDeliveries, unorderedLimit)
  local tokens = redis.call('ZRANGE', K_LEASES, '-inf', now, 'BYSCORE', 'LIMIT', 0, batch)
  local dead = 0
  for _, token in ipairs(tokens) do
    local id, record = takeLease(token, unorderedLimit)
    if maxDeliveries > 0 and record[R_DELIVERIES] >= maxDeliveries then
      bury(id, record, 'lease expired ' .. record[R_DELIVERIES] .. ' times', now)
      dead = dead + 1
    else
      saveRecord(id, record) -- the delivery count
      enqueue(id, record)
      ageAdd(record[R_PUBLISHED])
    end
    place(record[R_PARTITION], now, unorderedLimit)
  end
  return #tokens, dead
end

--[[
  Due timers become ready (bounded per call; the rest on the next call): `place` for each, with
  its writes batched. A crowd due at one instant (a "send at 09:00" campaign: a partition per
  unordered task) is promoted by the leases right after it, so each partition's own ZSCORE, two
  ZADDs and ZREM were most of a lease's Redis time then (docs/benchmarks/wake-ups.md, "Far schedules"); here one
  ZMSCORE, one ZADD of `ready`, one of `clients` and one ZREM of `timers` per call, and a head read
  per partition. The tags are taken in the same order as one `place` after another would.
]]
local function promoteTimers(now, batch, unorderedLimit)
  local partitions = redis.call('ZRANGE', K_TIMERS, '-inf', now, 'BYSCORE', 'LIMIT', 0, batch)
  if #partitions == 0 then
    return 0
  end
  local scores = redis.call('ZMSCORE', K_READY, unpack(partitions))
  local adds, outs, joined = {}, {}, {}
  for i, partition in ipairs(partitions) do
    local head = headOf(partition)
    local limit = limitOf(partition, unorderedLimit)
    if not head or (limit > 0 and runningOf(partition) >= limit) then
      readyRemove(partition)
      outs[#outs + 1] = partition
    else
      local due = dueOfMember(partition, head)
      if due > now then
        readyRemove(partition)
        redis.call('ZADD', K_TIMERS, due, partition)
      elseif not scores[i] then
        local client = clientOf(partition)
        adds[#adds + 1] = exact(tagFor(client))
        adds[#adds + 1] = partition
        priorityIndex(partition, head)
        joined[client] = true
        outs[#outs + 1] = partition
      end
    end
  end
  for from = 1, #adds, 1024 do
    redis.call('ZADD', K_READY, unpack(adds, from, math.min(#adds, from + 1023)))
  end
  local finishes = {}
  for client in pairs(joined) do
    finishes[#finishes + 1] = exact(finishOf[client])
    finishes[#finishes + 1] = client
  end
  for from = 1, #finishes, 1024 do
    redis.call('ZADD', K_CLIENTS, unpack(finishes, from, math.min(#finishes, from + 1023)))
  end
  for from = 1, #outs, 512 do
    redis.call('ZREM', K_TIMERS, unpack(outs, from, math.min(#outs, from + 511)))
  end
  return #partitions
end

--[[
  What an idle worker needs to know about this shard: how many partitions are ready now, and in
  how many ms the next timer or lease deadline falls (-1: none).
]]
local function shardState(now)
  local readyCount = redis.call('ZCARD', K_READY)
  local nextEvent = -1
  local timer = redis.call('ZRANGE', K_TIMERS, 0, 0, 'WITHSCORES')[2]
  if timer then
    nextEvent = math.max(0, tonumber(timer) - now)
  end
  local lease = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')[2]
  if lease then
    local inMs = math.max(0, tonumber(lease) - now)
    if nextEvent < 0 or inMs < nextEvent then
      nextEvent = inMs
    end
  end
  return readyCount, nextEvent
end

-- The reply header of a settling script ({readyCount, nextEventMs, notify}); notify = 1 when the
-- shard had no ready partition before the script (readyBefore) and has one now: idle workers wake.
local function settledReply(reply, readyBefore, now)
  reply[1], reply[2] = shardState(now)
  if readyBefore == 0 and reply[1] > 0 then
    reply[3] = 1
  end
  return reply
end

--[[
  Read-only consistency check of one shard: O(N), for tests and operators (`queue verify`), not for
  the hot path. Checks the placement invariant, that every task is in exactly one of pending /
  leased / dead, the in-flight counts, the age counts and the priority line.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  the most violations to report

  Returns {tasks, violations...}
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local maxReport = tonumber(ARGV[2])
local now = nowMs()
local problems = {}
local function report(message)
  if #problems < maxReport then
    problems[#problems + 1] = message
  end
end

local stateOf = {}
local function mark(id, state)
  if stateOf[id] then
    report('task ' .. id .. ' is both ' .. stateOf[id] .. ' and ' .. state)
  end
  stateOf[id] = state
end

-- pending: members well formed, records agree, heads per partition
local heads = {}
for _, member in ipairs(redis.call('ZRANGE', K_PENDING, 0, -1)) do
  local cut = string.find(member, '\0', 1, true)
  local partition = string.sub(member, 1, cut - 1)
  local id = idOfMember(partition, member)
  mark(id, 'pending')
  local record = loadRecord(id)
  if not record then
    report('pending task ' .. id .. ' has no record')
  elseif record[R_PARTITION] ~= partition or memberOf(partition, record[R_SEQ], record[R_DUE], id) ~= member then
    report('pending task ' .. id .. ' disagrees with its record')
  end
  if not heads[partition] then
    heads[partition] = member
  end
end

-- leases: live tasks, in-flight counts
local inFlight = {}
for _, token in ipairs(redis.call('ZRANGE', K_LEASES, 0, -1)) do
  local id = idOfToken(token)
  mark(id, 'leased')
  local record = loadRecord(id)
  if not record then
    report('leased task ' .. id .. ' has no record')
  else
    local partition = record[R_PARTITION]
    if limitOf(partition, unorderedLimit) > 0 then
      inFlight[partition] = (inFlight[partition] or 0) + 1
    end
  end
end
local running = redis.call('HGETALL', K_RUNNING)
local runningOfPartition = {}
for i = 1, #running, 2 do
  runningOfPartition[running[i]] = tonumber(running[i + 1])
  if inFlight[running[i]] ~= tonumber(running[i + 1]) then
    report('partition ' .. running[i] .. ' counts ' .. running[i + 1] .. ' in flight, leases say ' .. (inFlight[running[i]] or 0))
  end
end
for partition, count in pairs(inFlight) do
  if not runningOfPartition[partition] then
    report('partition ' .. partition .. ' has ' .. count .. ' leases but no in-flight count')
  end
  local limit = limitOf(partition, unorderedLimit)
  if limit > 0 and count > limit then
    report('partition ' .. partition .. ' has ' .. count .. ' in flight, limit ' .. limit)
  end
end

for _, id in ipairs(redis.call('ZRANGE', K_DLQ, 0, -1)) do
  mark(id, 'dead')
  if not loadRecord(id) then
    report('dead task ' .. id .. ' has no record')
  end
end

-- every record is in exactly one state; age counts match the pending tasks
local records = redis.call('HGETALL', K_TASKS)
local liveBySecond = {}
for i = 1, #records, 2 do
  local id = records[i]
  if not stateOf[id] then
    report('task ' .. id .. ' is in no state')
  end
  if stateOf[id] == 'pending' then
    local second = tostring(math.floor(cmsgpack.unpack(records[i + 1])[R_PUBLISHED] / 1000))
    liveBySecond[second] = (liveBySecond[second] or 0) + 1
  end
end
local ageCounts = redis.call('HGETALL', K_AGECOUNT)
local seen = {}
for i = 1, #ageCounts, 2 do
  seen[ageCounts[i]] = true
  if liveBySecond[ageCounts[i]] ~= tonumber(ageCounts[i + 1]) then
    report('age second ' .. ageCounts[i] .. ' counts ' .. ageCounts[i + 1] .. ', pending tasks ' .. (liveBySecond[ageCounts[i]] or 0))
  end
  if not redis.call('ZSCORE', K_AGES, ageCounts[i]) then
    report('age second ' .. ageCounts[i] .. ' missing from the ages index')
  end
end
for second, count in pairs(liveBySecond) do
  if not seen[second] then
    report('age second ' .. second .. ' has ' .. count .. ' pending tasks but no count')
  end
end

-- placement invariant
local function expectedPlace(partition)
  local head = heads[partition]
  local limit = limitOf(partition, unorderedLimit)
  if not head or (limit > 0 and (runningOfPartition[partition] or 0) >= limit) then
    return 'none'
  end
  local due = dueOfMember(partition, head)
  if due <= now then
    return 'ready-or-due-timer', due
  end
  return 'timer', due
end
local function check(partition)
  local inReady = redis.call('ZSCORE', K_READY, partition)
  local timer = redis.call('ZSCORE', K_TIMERS, partition)
  local expected, due = expectedPlace(partition)
  if inReady and timer then
    report('partition ' .. partition .. ' is both ready and waiting')
  elseif expected == 'none' and (inReady or timer) then
    report('partition ' .. partition .. ' may not run but is ' .. (inReady and 'ready' or 'waiting'))
  elseif expected == 'timer' and not (timer and tonumber(timer) == due) then
    report('partition ' .. partition .. ' should wait until ' .. due .. ' but is ' .. (inReady and 'ready' or (timer or 'nowhere')))
  elseif expected == 'ready-or-due-timer' and not inReady and not (timer and tonumber(timer) == due) then
    -- a timer that fell due since the last script is fine: lease promotes it
    report('partition ' .. partition .. ' has a due head but is neither ready nor waiting')
  end
end
local checked = {}
for partition in pairs(heads) do
  checked[partition] = true
  check(partition)
end
for _, partition in ipairs(redis.call('ZRANGE', K_READY, 0, -1)) do
  if not checked[partition] then
    checked[partition] = true
    check(partition)
  end
end
for _, partition in ipairs(redis.call('ZRANGE', K_TIMERS, 0, -1)) do
  if not checked[partition] then
    check(partition)
  end
end

-- fair share: `cready` holds exactly the partitions set aside (ASIDE band of `ready`, with their
-- tickets); every other ready partition's tag (tickets of an earlier layout aside) is below its
-- client's finish tag. Not bounded below by V: a capped client's partition met without a permit
-- keeps its place, and its cap may be lifted since.
local fairScores = redis.call('ZMSCORE', K_CLIENTS, TAG_V, TAG_B)
local vNow, bFirst = tonumber(fairScores[1] or nil), tonumber(fairScores[2] or nil)
local inCready = {}
for _, member in ipairs(redis.call('ZRANGE', K_CREADY, 0, -1)) do
  local cut = string.find(member, '\0', 1, true)
  local client = string.sub(member, 1, cut - 1)
  local partition = string.sub(member, cut + 13)
  local ticket = tonumber(string.sub(member, cut + 1, cut + 12), 16)
  inCready[partition] = true
  if clientOf(partition) ~= client then
    report('partition ' .. partition .. ' is in the line of client ' .. client)
  end
  local score = redis.call('ZSCORE', K_READY, partition)
  if not score or tonumber(score) ~= ASIDE + ticket then
    report('partition ' .. partition .. ' is set aside with ticket ' .. ticket .. ' but ready says ' .. tostring(score))
  end
end
local readyRows = redis.call('ZRANGE', K_READY, 0, -1, 'WITHSCORES')
if #readyRows > 0 and not (vNow and bFirst) then
  report('ready partitions but no virtual time')
end
for i = 1, #readyRows, 2 do
  local partition, tag = readyRows[i], tonumber(readyRows[i + 1])
  if tag >= ASIDE then
    if not inCready[partition] then
      report('partition ' .. partition .. ' is set aside but in no client\'s line')
    end
  elseif vNow and tag >= bFirst - 0.5 then
    local finish = tonumber(redis.call('ZSCORE', K_CLIENTS, clientOf(partition)) or nil)
    if not finish or tag >= finish then
      report('partition ' .. partition .. ' has tag ' .. tag .. ' not before its client\'s finish tag ' .. tostring(finish))
    end
  end
end

-- priority: `tprio` names live tasks; `pband` and `pready` agree, name ready partitions only (each
-- ranked by its head's priority), and exist only while `tprio` does (see "Priority" in includes/shard.lua)
local prios = redis.call('HGETALL', K_TPRIO)
for i = 1, #prios, 2 do
  if not stateOf[prios[i]] then
    report('task ' .. prios[i] .. ' has a priority but is not a task')
  end
end
local lines = redis.call('ZRANGE', K_PREADY, 0, -1)
local bands = redis.call('HGETALL', K_PBAND)
if #prios == 0 and (#lines > 0 or #bands > 0) then
  report('a priority line but no prioritized task')
end
if #lines * 2 ~= #bands then
  report('the priority line has ' .. #lines .. ' members, its index ' .. (#bands / 2))
end
for i = 1, #bands, 2 do
  local partition, member = bands[i], bands[i + 1]
  if redis.call('ZSCORE', K_PREADY, member) == false then
    report('partition ' .. partition .. ' is indexed in no priority line')
  end
  if not redis.call('ZSCORE', K_READY, partition) then
    report('partition ' .. partition .. ' is in its client\'s priority line but not ready')
  end
  if string.sub(member, 1, #clientOf(partition) + 1) ~= clientOf(partition) .. '\0' then
    report('partition ' .. partition .. ' is in another client\'s priority line')
  end
  local head = headOf(partition)
  local at = #clientOf(partition) + 2
  if head and string.sub(member, at, at) ~= bandOf(priorityOf(idOfPendingMember(partition, head))) then
    report('partition ' .. partition .. ' is ranked in its priority line by another priority than its head\'s')
  end
end

-- per-client depth: the pending tasks of each client
local pendingOfClient = {}
for _, member in ipairs(redis.call('ZRANGE', K_PENDING, 0, -1)) do
  local client = clientOf(string.sub(member, 1, string.find(member, '\0', 1, true) - 1))
  pendingOfClient[client] = (pendingOfClient[client] or 0) + 1
end
local depths = redis.call('HGETALL', K_CDEPTH)
for i = 1, #depths, 2 do
  if pendingOfClient[depths[i]] ~= tonumber(depths[i + 1]) then
    report('client ' .. depths[i] .. ' counts ' .. depths[i + 1] .. ' pending, pending says ' .. (pendingOfClient[depths[i]] or 0))
  end
  pendingOfClient[depths[i]] = nil
end
for client, count in pairs(pendingOfClient) do
  report('client ' .. client .. ' has ' .. count .. ' pending but no depth count')
end

local reply = { #records / 2 }
for _, p in ipairs(problems) do
  reply[#reply + 1] = p
end
return reply

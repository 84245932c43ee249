--[[
  Acknowledge leased tasks: each is removed, and its id enters the post-ack dedup window.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  dedup window after ack (ms)
  ARGV[3]  number of tokens n, then n tokens

  Returns {readyCount, nextEventMs, notify, r1..rn}: r = 1 acked, 0 stale token
    notify = 1 when the shard had no ready partition before and has one now (wake idle workers)
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local now = nowMs()

local readyBefore = redis.call('ZCARD', K_READY)
local reply = { 0, 0, 0 }
-- The acked ids leave `tasks` and enter `done` in one write each, after the loop (place reads neither).
local acked = {}
local doneAt = {}
-- Which tokens are still leased: one read, then one write for all of them.
local live = {}
local liveTokens = {}
for from = 1, n, 512 do
  local to = math.min(n, from + 511)
  local scores = redis.call('ZMSCORE', K_LEASES, unpack(ARGV, 3 + from, 3 + to))
  for i = from, to do
    local token = ARGV[3 + i]
    if scores[i - from + 1] and not live[token] then
      live[token] = true
      liveTokens[#liveTokens + 1] = token
    end
  end
end
for from = 1, #liveTokens, 512 do
  redis.call('ZREM', K_LEASES, unpack(liveTokens, from, math.min(#liveTokens, from + 511)))
end
for i = 1, n do
  local token = ARGV[3 + i]
  if live[token] == true then
    live[token] = false -- the same token twice: settled once
    local id, _, limited = parseLeaseToken(token)
    -- A partition held back by its in-flight limit (ordered: this task) may run again. Without a
    -- limit, an ack changes neither the head nor whether the partition may run: no record read.
    local partition
    if limited then
      partition = loadRecord(id)[R_PARTITION]
      releaseRunning(partition, unorderedLimit)
    end
    acked[#acked + 1] = id
    doneAt[#doneAt + 1] = now
    doneAt[#doneAt + 1] = id
    if limited then
      place(partition, now, unorderedLimit)
    end
    reply[#reply + 1] = 1
  else
    reply[#reply + 1] = 0
  end
end

for from = 1, #acked, 512 do
  local to = math.min(#acked, from + 511)
  redis.call('HDEL', K_TASKS, unpack(acked, from, to))
  if priorityInUse() then
    redis.call('HDEL', K_TPRIO, unpack(acked, from, to))
  end
  redis.call('ZADD', K_DONE, unpack(doneAt, 2 * from - 1, 2 * to))
end

-- The shard's last prioritized task gone: its priority line goes too (see "Priority" in shard.lua).
if priorityInUse() and redis.call('EXISTS', K_TPRIO) == 0 then
  redis.call('UNLINK', K_PREADY, K_PBAND, K_PASSED)
end

-- Trim the dedup window on write; bounded per call, and each ack adds only one entry.
local expired = redis.call('ZRANGE', K_DONE, '-inf', '(' .. (now - window), 'BYSCORE', 'LIMIT', 0, 64 + n)
if #expired > 0 then
  redis.call('ZREM', K_DONE, unpack(expired))
end

return settledReply(reply, readyBefore, now)

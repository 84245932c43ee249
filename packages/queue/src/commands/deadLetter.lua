--[[
  Move leased tasks to the dead letters (kept with their reason until retried or purged; their ids
  stay refused by publish). An ordered partition moves on to its next task.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  number of tokens n, then n pairs: token, reason

  Returns {readyCount, nextEventMs, notify, r1..rn}: r = 1 dead-lettered, 0 stale token
    notify = 1 when the shard had no ready partition before and has one now (wake idle workers)
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local now = nowMs()

local readyBefore = redis.call('ZCARD', K_READY)
local reply = { 0, 0, 0 }
for i = 0, n - 1 do
  local id, record = takeLease(ARGV[3 + i * 2], unorderedLimit)
  if id then
    bury(id, record, ARGV[4 + i * 2], now)
    place(record[R_PARTITION], now, unorderedLimit)
    reply[#reply + 1] = 1
  else
    reply[#reply + 1] = 0
  end
end
return settledReply(reply, readyBefore, now)

--[[
  Read-only: the most recent dead letters of one shard.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  limit

  Returns {n, then n groups of 7: id, partition, payload, reason, deadAt, deliveries, publishedAt}
]]
--- @include "includes/shard"

local ids = redis.call('ZRANGE', K_DLQ, '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, tonumber(ARGV[1]))
local reply = { #ids }
for _, id in ipairs(ids) do
  local record = loadRecord(id)
  reply[#reply + 1] = id
  reply[#reply + 1] = record[R_PARTITION]
  reply[#reply + 1] = record[R_PAYLOAD]
  reply[#reply + 1] = record[R_REASON] or ''
  reply[#reply + 1] = record[R_DEAD_AT] or 0
  reply[#reply + 1] = record[R_DELIVERIES]
  reply[#reply + 1] = record[R_PUBLISHED]
end
return reply

--[[
  Put dead letters back into their partitions as new arrivals (new sequence number, due now,
  deliveries reset; the original publish time is kept). Dead letters of one partition retried in
  one call keep their original relative order.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  mode: "all" (the oldest `batch` dead letters) | "ids" (the ids that follow, when dead here)
  ARGV[3]  batch (mode "all")
  ARGV[4..] task ids (mode "ids")

  Returns {retried, remaining dead letters}
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local now = nowMs()
local ids
if ARGV[2] == 'all' then
  ids = redis.call('ZRANGE', K_DLQ, 0, tonumber(ARGV[3]) - 1)
else
  ids = {}
  for i = 4, #ARGV do
    ids[#ids + 1] = ARGV[i]
  end
end

local revived = {}
for _, id in ipairs(ids) do
  if redis.call('ZREM', K_DLQ, id) == 1 then
    revived[#revived + 1] = { id, loadRecord(id) }
  end
end
-- Tasks of one partition retried together keep their original relative order.
table.sort(revived, function(a, b)
  return a[2][R_SEQ] < b[2][R_SEQ]
end)
for _, entry in ipairs(revived) do
  local id, record = entry[1], entry[2]
  local fresh = { record[R_PARTITION], nextSeq(), now, 0, record[R_PUBLISHED], record[R_PAYLOAD] }
  saveRecord(id, fresh)
  enqueue(id, fresh)
  ageAdd(fresh[R_PUBLISHED])
  place(fresh[R_PARTITION], now, unorderedLimit)
end
return { #revived, redis.call('ZCARD', K_DLQ) }

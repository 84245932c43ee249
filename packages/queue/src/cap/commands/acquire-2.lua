--[[
  Take cap slots of one client (its per-client cap of tasks in flight, cluster-wide). The slots
  live in the client's own slot ({c:<client>}), not in the queue's shards: a client's partitions
  spread over every shard, and a script may touch one slot only. A caller takes slots here first,
  then leases in a shard against them (lease.lua ARGV[8]), and gives back the ones it did not use.

  KEYS[1]  cap   STRING the client's cap (absent or 0: none)
  KEYS[2]  held  ZSET permit id -> expiry (ms): the slots taken. A slot bound to a lease expires
                 with it (the holder extends both on heartbeat), so the slots of a dead executor
                 come back by themselves once its leases would have been reclaimed.
  ARGV[1]  how long the slots are held (ms): the lease duration plus a grace
  ARGV[2..] permit ids wanted (unique per caller)

  Returns the number of slots granted (the first ones of ARGV[2..]), or -1 when the client has no
  cap (nothing recorded).
]]
--- @include "shared/now"

local now = nowMs()
local cap = tonumber(redis.call('GET', KEYS[1]) or '0')
if cap <= 0 then
  return -1
end
-- Expired slots first: amortized O(log n) per slot, each slot removed once.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local granted = math.min(#ARGV - 1, cap - redis.call('ZCARD', KEYS[2]))
if granted <= 0 then
  return 0
end
-- One variadic ZADD (in chunks: Lua's unpack has a stack limit): a lease asks for as many slots as
-- its shard may give the client, and most are given back unused.
local expiry = now + tonumber(ARGV[1])
for from = 1, granted, 512 do
  local args = {}
  for i = from, math.min(granted, from + 511) do
    args[#args + 1] = expiry
    args[#args + 1] = ARGV[1 + i]
  end
  redis.call('ZADD', KEYS[2], unpack(args))
end
return granted

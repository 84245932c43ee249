--[[
  Extend leases (heartbeat). A lease that was reclaimed or settled is not revived.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  number of leases n, then n pairs: token, lease duration from now (ms)

  Returns {r1..rn}: 1 extended, 0 stale token
]]
--- @include "includes/shard"

local n = tonumber(ARGV[1])
local now = nowMs()
local results = {}
for i = 0, n - 1 do
  local token = ARGV[2 + i * 2]
  if redis.call('ZSCORE', K_LEASES, token) then
    redis.call('ZADD', K_LEASES, 'XX', now + tonumber(ARGV[3 + i * 2]), token)
    results[#results + 1] = 1
  else
    results[#results + 1] = 0
  end
end
return results

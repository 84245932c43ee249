--[[
  Extend cap slots bound to leases (the heartbeat extends the lease, then its slot). A slot that
  expired already is not revived (XX): its lease is being reclaimed.

  KEYS[1]  held  ZSET permit id -> expiry (ms) (see acquire-2.lua)
  ARGV[1]  how long from now (ms): the lease duration plus a grace
  ARGV[2..] permit ids

  Returns the number of slots extended.
]]
--- @include "shared/now"

local expiry = nowMs() + tonumber(ARGV[1])
local extended = 0
for i = 2, #ARGV do
  extended = extended + redis.call('ZADD', KEYS[1], 'XX', 'CH', expiry, ARGV[i])
end
return extended

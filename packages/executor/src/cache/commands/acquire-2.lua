--[[
  Read a cached response, or else take the fill lock of its key: one atomic step, so that a caller
  who misses cannot take the lock just after the previous holder stored the value.

  KEYS[1]  value  STRING the cached entry (JSON), expiring with the request's TTL
  KEYS[2]  lock   STRING the token of the caller filling the entry, expiring after the lock TTL
  ARGV[1]  lock token (unique per attempt)
  ARGV[2]  lock TTL (ms)

  Returns {1, entry}  hit
          {2}         the caller holds the lock now: it calls the target and settles
          {3, pttl}   another caller holds the lock for pttl more ms (-1: no expiry): wait
]]
local entry = redis.call('GET', KEYS[1])
if entry then
  return { 1, entry }
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return { 2 }
end
return { 3, redis.call('PTTL', KEYS[2]) }

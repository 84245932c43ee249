--[[
  Keep the fill lock while the holder's call runs (called every third of the lock TTL), so that the
  lock TTL only bounds how long a holder that died keeps the waiters waiting.

  KEYS[1]  lock  STRING `<identity>\n<token>` of the caller filling the entry
  ARGV[1]  the caller's lock value
  ARGV[2]  lock TTL (ms)

  Returns 1 when extended, 0 when the lock is no longer the caller's
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

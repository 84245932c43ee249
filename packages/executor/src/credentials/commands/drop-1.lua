--[[
  Delete a key only while its value still starts with what the caller saw: a token holder's lock
  (the value is the holder's random id), or a cached token the target refused (the value starts
  with the token's fingerprint). A token another executor has meanwhile replaced, or a lock taken
  over after it expired, stays.

  KEYS[1]  the key (a token's lock STRING, or the cached token STRING)
  ARGV[1]  the prefix its value must start with

  Returns 1 when deleted, 0 otherwise
]]
local value = redis.call('GET', KEYS[1])
if value and string.sub(value, 1, string.len(ARGV[1])) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

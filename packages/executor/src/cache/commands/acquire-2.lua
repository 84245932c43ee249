--[[
  Read a cached response, or else take the fill lock of its key: one atomic step, so that a caller
  who misses cannot take the lock just after the previous holder stored the value.

  An entry, and a fill in progress, record the request they answer: the value and the lock start
  with that request's identity line (`<identity>\n`, every identity of one length). Only the same
  request reads the entry or waits for the fill; another request sharing the key is told so and
  calls the target beside them, storing nothing. A value without an identity line (an entry of an
  earlier version, or unreadable) is filled again as if absent; a lock without one (a fill of an
  earlier version) is waited for as before.

  KEYS[1]  value  STRING `<identity>\n<entry JSON>`, expiring with the request's TTL
  KEYS[2]  lock   STRING `<identity>\n<token>` of the caller filling the entry, expiring after the lock TTL
  ARGV[1]  the caller's lock value: `<identity>\n<token>`, the token unique per attempt
  ARGV[2]  lock TTL (ms)
  ARGV[3]  the request's identity line (`<identity>\n`)

  Returns {1, entry}  hit: the entry JSON (without its identity line)
          {2}         the caller holds the lock now: it calls the target and settles
          {3, pttl}   another caller holds the lock for this request for pttl more ms (-1: no expiry): wait
          {4}         the entry, or the fill in progress, answers another request
]]
local tag = ARGV[3]
local entry = redis.call('GET', KEYS[1])
if entry then
  if string.sub(entry, 1, #tag) == tag then
    return { 1, string.sub(entry, #tag + 1) }
  end
  if string.byte(entry, #tag) == 10 then -- the identity line of another request
    return { 4 }
  end
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return { 2 }
end
local held = redis.call('GET', KEYS[2])
if held and string.byte(held, #tag) == 10 and string.sub(held, 1, #tag) ~= tag then
  return { 4 }
end
return { 3, redis.call('PTTL', KEYS[2]) }

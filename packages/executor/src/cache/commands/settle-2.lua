--[[
  End a fill: store the entry (when there is one), drop the lock if the caller still holds it, and
  tell the waiters (pub/sub on the key's channel) what happened.

  The entry is stored with its request's identity line, and only over nothing, an entry of the
  same request, or a value without an identity line (an entry of an earlier version, or
  unreadable): an entry answers its request until it expires, whatever other request shares the key.

  KEYS[1]  value  STRING `<identity>\n<entry JSON>`
  KEYS[2]  lock   STRING `<identity>\n<token>` of the caller filling the entry
  ARGV[1]  the caller's lock value (`<identity>\n<token>`)
  ARGV[2]  channel of the key (waiters of every process subscribe to it)
  ARGV[3]  entry JSON to store, '' when the outcome is not cacheable (non-2xx, failure, oversize)
  ARGV[4]  entry TTL (ms)
  ARGV[5]  the request's identity line (`<identity>\n`)

  Publishes 'stored' after a store; 'released' when the caller held the lock and stored nothing
  (the fill failed: waiters stop waiting and call the target themselves). A caller that no longer
  holds the lock (it expired, or it called after giving up waiting) announces no failure, since
  another holder may still be filling.
  Returns {stored 1|0, released 1|0}
]]
local tag = ARGV[5]
local stored = 0
if ARGV[3] ~= '' then
  local head = redis.call('GETRANGE', KEYS[1], 0, #tag - 1)
  if head == tag or string.byte(head, #tag) ~= 10 then
    redis.call('SET', KEYS[1], tag .. ARGV[3], 'PX', ARGV[4])
    stored = 1
  end
end
local released = 0
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  released = 1
end
if stored == 1 then
  redis.call('PUBLISH', ARGV[2], 'stored')
elseif released == 1 then
  redis.call('PUBLISH', ARGV[2], 'released')
end
return { stored, released }

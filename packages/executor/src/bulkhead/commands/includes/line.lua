--[[
  The executors waiting for a slot of one origin, in the order they began to wait (see
  acquire-3.lua): KEYS[2] waiting ZSET executor -> ticket (ms it joined), KEYS[3] seen ZSET
  executor -> ms of its last ask. An executor that stopped asking (stopped, killed) is out of the
  line after staleMs.
]]
local function dropStale(staleMs, now)
  local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - staleMs, 'LIMIT', 0, 100)
  if #stale > 0 then
    redis.call('ZREM', KEYS[2], unpack(stale))
    redis.call('ZREM', KEYS[3], unpack(stale))
  end
end

-- Tells the first `free` executors of the line that a slot is theirs to ask for.
local function wakeFront(free, channelPrefix, except)
  if free <= 0 then return end
  local front = redis.call('ZRANGE', KEYS[2], 0, free - 1)
  for _, executor in ipairs(front) do
    if executor ~= except then redis.call('PUBLISH', channelPrefix .. executor, KEYS[1]) end
  end
end

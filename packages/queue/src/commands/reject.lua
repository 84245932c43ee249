--[[
  Give leased tasks back for a later attempt.
  Ordered partition: the task keeps its sequence number, so it stays at the head, and the partition
  waits in `timers` until now + delay (blocked: nothing behind it can overtake).
  Unordered partition: the task becomes due at now + delay, behind tasks due earlier.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  unordered partition concurrency (0 = unlimited)
  ARGV[2]  number of tokens n, then n triples: token, delay (ms), new payload ('' = keep the payload;
           a retry replaces it to carry its attempt count)

  Returns {readyCount, nextEventMs, notify, r1..rn}: r = 1 rejected, 0 stale token
    notify = 1 when the shard had no ready partition before and has one now (wake idle workers);
             2 when a task above the default priority is due again now (a lease gave it back):
             busy workers should visit this shard first, as after its publish
]]
--- @include "includes/shard"

local unorderedLimit = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local now = nowMs()

local readyBefore = redis.call('ZCARD', K_READY)
local reply = { 0, 0, 0 }
local urgent = false
for i = 0, n - 1 do
  local id, record = takeLease(ARGV[3 + i * 3], unorderedLimit)
  if id then
    local delay = math.max(0, tonumber(ARGV[4 + i * 3]))
    record[R_DUE] = now + delay
    -- The announcement of its publish was spent on the lease that gave it back: without a new
    -- one, workers would reach this shard only when their cursors come round.
    urgent = urgent or (delay == 0 and priorityOf(id) > 0)
    local payload = ARGV[5 + i * 3]
    if payload ~= '' then
      record[R_PAYLOAD] = payload
    end
    saveRecord(id, record)
    enqueue(id, record)
    ageAdd(record[R_PUBLISHED])
    place(record[R_PARTITION], now, unorderedLimit)
    reply[#reply + 1] = 1
  else
    reply[#reply + 1] = 0
  end
end
settledReply(reply, readyBefore, now)
if urgent then
  reply[3] = 2
end
return reply

--[[
  Purge one shard.
  mode "all":  every key of the shard is unlinked (freed in the background), dedup window included,
               except the sequence counter (lease tokens are built from it and must never repeat)
               and the client weights and caps (configuration).
  mode "dead": up to `batch` dead letters are removed; their ids enter the dedup window so that a
               replay is still refused.
  mode "destroy": every key, the sequence counter and client weights and caps included (only when no worker of the queue is
               left: a token issued before could then match a new lease).

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  mode: "all" | "dead" | "destroy"
  ARGV[2]  batch (mode "dead")

  Returns {removedTasks, remaining (dead letters left in mode "dead", 0 otherwise)}
]]
--- @include "includes/shard"

local mode = ARGV[1]
if mode == 'all' or mode == 'destroy' then
  local removed = redis.call('HLEN', K_TASKS)
  redis.call('UNLINK', K_READY, K_TIMERS, K_PENDING, K_TASKS, K_LEASES, K_RUNNING, K_DONE, K_DLQ, K_AGES, K_AGECOUNT, K_CLIENTS, K_CREADY, K_CDEPTH, K_TPRIO, K_PREADY, K_PBAND, K_PASSED)
  if mode == 'destroy' then
    -- the client weights and caps are configuration (`requester keys`), kept by a purge
    redis.call('UNLINK', K_SEQ, K_SHARES, K_CAPS)
  end
  return { removed, 0 }
end

local now = nowMs()
local ids = redis.call('ZRANGE', K_DLQ, 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  redis.call('HDEL', K_TASKS, id)
  redis.call('HDEL', K_TPRIO, id)
  redis.call('ZADD', K_DONE, now, id)
end
if #ids > 0 then
  redis.call('ZREM', K_DLQ, unpack(ids))
end
if redis.call('EXISTS', K_TPRIO) == 0 then
  redis.call('UNLINK', K_PREADY, K_PBAND, K_PASSED) -- no prioritized task left (see shard.lua)
end
return { #ids, redis.call('ZCARD', K_DLQ) }

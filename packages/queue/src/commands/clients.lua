--[[
  Read-only: the clients of one shard with pending tasks, for `queue info --by-client` (counted) and
  the routers' per-client gauges (fronts only, every METRICS_SAMPLE_INTERVAL).

  A client's ready partitions are interleaved in `ready` by their start tags, with no line of its
  own to count, so:
    counted (ARGV[1] = 0): reads the whole of `ready` (in chunks): O(C + R log N) for the C clients
      with pending tasks and the R ready partitions. On demand only (an operator's view).
    fronts (ARGV[1] = 1): reads the front of `ready` only, as far as every client's first partition
      can be: the tags of a client's partitions are 1/w apart from its front, and no client d has
      more than w_d + 1 partitions tagged below another client's front (start-time fair queuing;
      weights ≥ 1), so the first Σ (w_d + 1) partitions over the clients with pending tasks (+ a
      margin for the capped partitions kept behind V by the lease) hold every client's front; a
      client at its cap, its partitions set aside at the back, has its front read from `cready`.
      O((Σ w_d + C) log N) whatever the backlog: what a sampler may afford. Ready counts are not
      given (-1).

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  0 = count every ready partition, 1 = fronts only

  Returns {nowMs, n, then n groups of 4: client, pending, readyPartitions, oldestReadyPublishedAt}
    readyPartitions         the client's partitions whose head is due and may run (-1: not counted)
    oldestReadyPublishedAt  first publish (ms) of the head of the client's partition first in
                            line (-1: none ready): how long its next task has waited
]]
--- @include "includes/shard"

local frontsOnly = ARGV[1] == '1'
-- Partitions a lease may leave behind V (a capped client met without a permit keeps its tag).
local BEHIND_V_MARGIN = 1000
local CHUNK = 1000

local depths = redis.call('HGETALL', K_CDEPTH)
local window = math.huge
if frontsOnly then
  window = BEHIND_V_MARGIN
  -- The weights by chunks (unpack is bounded by Lua's stack).
  for at = 1, #depths, 2 * CHUNK do
    local names = {}
    for i = at, math.min(at + 2 * CHUNK - 1, #depths), 2 do
      names[#names + 1] = depths[i]
    end
    local weights = redis.call('HMGET', K_SHARES, unpack(names))
    for i = 1, #names do
      window = window + (tonumber(weights[i]) or 1) + 1
    end
  end
end

local ready, front = {}, {}
local from = 0
repeat
  local last = math.min(from + CHUNK, window) - 1
  local partitions = redis.call('ZRANGE', K_READY, from, last)
  for _, partition in ipairs(partitions) do
    local client = clientOf(partition)
    ready[client] = (ready[client] or 0) + 1
    if not front[client] then
      front[client] = partition
    end
  end
  from = last + 1
until #partitions < CHUNK or from >= window

-- A capped client at its cap has its partitions set aside, in the ASIDE band at the back of
-- `ready`, beyond the fronts' window: its first one is the front of its `cready` line, O(log N).
local anyAside = frontsOnly and redis.call('EXISTS', K_CREADY) == 1
local function asideFrontOf(client)
  local first = redis.call('ZRANGE', K_CREADY, '[' .. client .. '\0', '(' .. client .. '\1', 'BYLEX', 'LIMIT', 0, 1)[1]
  return first and string.sub(first, #client + 14)
end

local reply = { nowMs(), #depths / 2 }
for i = 1, #depths, 2 do
  local client = depths[i]
  local oldest = -1
  local partition = front[client] or (anyAside and asideFrontOf(client))
  if partition then
    local head = headOf(partition)
    local record = head and loadRecord(idOfMember(partition, head))
    if record then
      oldest = record[R_PUBLISHED]
    end
  end
  local count = frontsOnly and -1 or (ready[client] or 0)
  for _, v in ipairs({ client, tonumber(depths[i + 1]), count, oldest }) do
    reply[#reply + 1] = v
  end
end
return reply

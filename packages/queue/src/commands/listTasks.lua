--[[
  Read-only: one bounded step of a list of one shard's tasks in a state, after a position.

  The states, and the set each walks (so the position is stable: a member of that set):
    due        pending tasks whose due time has come (waiting for their turn or an in-flight limit),
    later      pending tasks due later (a schedule inside REDIS_HORIZON, a retry backoff, a wait):
               both walk `pending` by member bytes (partition, then its order), from "<partition>\0"
               when a partition is given;
    leased     tasks in flight: `leases` by lease deadline (then token);
    dead       the queue's dead tasks: `dlq` by dead-letter time (then id).
  At most `budget` members are examined per call (plus the members tied at the position's score):
  a selective filter yields short pages, never a long script.

  KEYS     the shard layout: every key of one shard, in the order of includes/shard.lua
  ARGV[1]  state: due | later | leased | dead
  ARGV[2]  position: '' = the start; else the last member examined (leased/dead: "<score>\0<member>")
  ARGV[3]  limit: the most rows returned
  ARGV[4]  budget: the most members examined
  ARGV[5]  partition ('' = any)
  ARGV[6]  client filter: '1' = only ARGV[7]'s tasks (a partition's client, '' = none), '0' = any
  ARGV[7]  client
  ARGV[8]  from: the state's time (due: due time; leased: lease deadline; dead: dead time) at or
           after (ms; '' = none)
  ARGV[9]  to: that time before (ms; '' = none)
  ARGV[10] publishedBefore: only tasks first published before (ms; '' = none): an age filter

  Returns {nowMs, nextPosition ('' : the shard is done), n, then n groups of 8: id, partition,
           dueAt, deliveries, publishedAt, payload, at (leased: deadline; dead: dead time; else
           dueAt), extra (leased: the lease token; dead: the reason; else '')}
]]
--- @include "includes/shard"

local state = ARGV[1]
local position = ARGV[2]
local limit = tonumber(ARGV[3])
local budget = tonumber(ARGV[4])
local partitionOnly = ARGV[5]
local byClient = ARGV[6] == '1'
local client = ARGV[7]
local from = tonumber(ARGV[8])
local to = tonumber(ARGV[9])
local publishedBefore = tonumber(ARGV[10])
local now = nowMs()
local rows = {}
local count = 0

local function inWindow(at)
  return (not from or at >= from) and (not to or at < to)
end

local function wantedPartition(partition)
  return (partitionOnly == '' or partition == partitionOnly) and (not byClient or clientOf(partition) == client)
end

local function oldEnough(record)
  return not publishedBefore or record[R_PUBLISHED] < publishedBefore
end

local function add(id, record, at, extra)
  count = count + 1
  local priority = priorityOf(id)
  for _, v in ipairs({ id, record[R_PARTITION], record[R_DUE], record[R_DELIVERIES], record[R_PUBLISHED], record[R_PAYLOAD], at, extra, priority }) do
    rows[#rows + 1] = v
  end
end

local nextPosition = ''
if state == 'due' or state == 'later' then
  local min, max = '-', '+'
  if partitionOnly ~= '' then
    min, max = '[' .. partitionOnly .. '\0', '(' .. partitionOnly .. '\1'
  end
  if position ~= '' then
    min = '(' .. position
  end
  local members = redis.call('ZRANGE', K_PENDING, min, max, 'BYLEX', 'LIMIT', 0, budget)
  for i, member in ipairs(members) do
    local partition = string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
    local due = dueOfMember(partition, member)
    if (state == 'due') == (due <= now) and inWindow(due) and wantedPartition(partition) then
      local id = idOfMember(partition, member)
      local record = loadRecord(id)
      if record and oldEnough(record) then
        add(id, record, due, '')
      end
    end
    if count >= limit or i == budget then
      nextPosition = member
      break
    end
  end
else
  local key = state == 'leased' and K_LEASES or K_DLQ
  -- Members tied at the position's score come again from ZRANGE: those up to the position are
  -- skipped by (score, member), the order of a sorted set.
  local atScore, atMember = '-inf', nil
  if position ~= '' then
    local sep = string.find(position, '\0', 1, true)
    atScore, atMember = string.sub(position, 1, sep - 1), string.sub(position, sep + 1)
  end
  local min = atScore
  if from and (atMember == nil or from > tonumber(atScore)) then
    min, atMember = from, nil
  end
  local max = to and ('(' .. to) or '+inf'
  local ties = atMember and redis.call('ZCOUNT', key, atScore, atScore) or 0
  local members = redis.call('ZRANGE', key, min, max, 'BYSCORE', 'LIMIT', 0, budget + ties, 'WITHSCORES')
  local examined = 0
  for i = 1, #members, 2 do
    local member, score = members[i], tonumber(members[i + 1])
    if not (atMember and score == tonumber(atScore) and member <= atMember) then
      examined = examined + 1
      local id, extra = member, ''
      if state == 'leased' then
        id, extra = idOfToken(member), member
      end
      local record = loadRecord(id)
      if record and wantedPartition(record[R_PARTITION]) and oldEnough(record) then
        if state == 'leased' then
          -- While leased, the delivery count lives in the token (see KEYS[4]).
          local _, delivery = parseLeaseToken(member)
          record[R_DELIVERIES] = delivery
        else
          extra = record[R_REASON] or ''
        end
        add(id, record, score, extra)
      end
      if count >= limit or examined == budget then
        nextPosition = string.format('%d', score) .. '\0' .. member
        break
      end
    end
  end
end
local reply = { now, nextPosition, count }
for _, v in ipairs(rows) do
  reply[#reply + 1] = v
end
return reply

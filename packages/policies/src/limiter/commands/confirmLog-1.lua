--[[
  Settles a two-phase take of the sliding log (slidingLog-n.lua): its pending entries are rescored
  at the instant the call was sent, or removed when it was never sent.

  KEYS[1]  the limiter's log (ZSET)
  ARGV[1]  the reservation: the members' head "<us>" the take replied
  ARGV[2]  cost: the take's number of entries
  ARGV[3]  sent: an upper bound of the instant the call was sent, microseconds of the Redis clock;
           -1: the call was never sent (its slot is given back)
  Returns  the number of entries settled (0: already settled, or the log expired)

  A confirmed entry loses its pending mark, so that later waits are reckoned from its score. Its
  score may rise above the pending one only when the call left after its dispatch budget (the
  caller logs that): the entry then counts from its real send all the same.
]]
local head, cost, sent = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local settled = 0
for j = 1, cost do
  local member = head .. ':' .. j
  if redis.call('ZREM', KEYS[1], member .. '!') == 1 then
    settled = settled + 1
    if sent >= 0 then
      redis.call('ZADD', KEYS[1], string.format('%.0f', sent), member)
    end
  end
end
return settled

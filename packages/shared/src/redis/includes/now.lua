-- Redis time in whole milliseconds, never the caller's clock: every process that runs a script
-- agrees on what is due, expired or half-open. Included as "shared/now" (see redis/lua.ts).
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

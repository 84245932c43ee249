--[[
  One step of waiting for a credential's OAuth2 token, atomically: the cached token if there is
  one, else the held failure, else the fetch lock. Checking the token and taking the lock in one
  script closes the window where a holder stores the token and frees the lock between a waiter's
  read and its lock attempt, which made that waiter fetch a second token.

  KEYS[1]  the cached token STRING
  KEYS[2]  the held failure STRING
  KEYS[3]  the fetch lock STRING
  ARGV[1]  the caller's random id (the lock's value)
  ARGV[2]  the lock's lifetime, ms

  Returns {'token', <sealed token>}, {'failed', <message>}, {'fetch'} when the caller now holds
  the lock, or {'wait'} when another holds it
]]
local token = redis.call('GET', KEYS[1])
if token then return {'token', token} end
local failure = redis.call('GET', KEYS[2])
if failure then return {'failed', failure} end
if redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2], 'NX') then return {'fetch'} end
return {'wait'}

-- begin.lua: look a key up and, when it is new, take its in-progress lock, in one step
-- (a caller that completes between a separate "look up" and "lock" could otherwise be
-- followed by a second run of the same work).
--
-- KEYS[1] lock: the in-progress lock, a string "<token>:<payload hash>" with a TTL
-- KEYS[2] done: the completed record, a hash {hash, response, at, token} with the retention TTL
-- ARGV[1] token: the caller's random lock token
-- ARGV[2] payload hash (hex, never contains ':')
-- ARGV[3] lock TTL in milliseconds
--
-- Returns {state, a, b}:
--   {"new"}                         the lock is the caller's now (or was already: a resend)
--   {"completed", response, at_ms}  a completed record with the same payload hash
--   {"in_progress", pttl_ms}        another holder's lock, same payload hash
--   {"mismatch", "completed"|"in_progress"}  the key is known with another payload hash
local done = redis.call('HMGET', KEYS[2], 'hash', 'response', 'at')
if done[1] then
  if done[1] ~= ARGV[2] then
    return {'mismatch', 'completed'}
  end
  return {'completed', done[2] or '', done[3] or '0'}
end
if redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'NX', 'PX', ARGV[3]) then
  return {'new'}
end
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] .. ':' .. ARGV[2] then
  -- The caller's own lock: go-redis resent this very call after its reply was lost (the
  -- token is random per call, so nobody else can match). Answering in_progress would
  -- turn away the only delivery and block the key for the lock's TTL.
  return {'new'}
end
local hash = string.match(held, ':(.*)$')
if hash ~= ARGV[2] then
  return {'mismatch', 'in_progress'}
end
return {'in_progress', tostring(redis.call('PTTL', KEYS[1]))}

-- complete.lua: store the completed record and drop the caller's lock, fenced by the
-- lock's value, so a holder whose lock expired and was taken over never overwrites the
-- new holder's state.
--
-- KEYS[1] lock
-- KEYS[2] done
-- ARGV[1] the caller's lock value "<token>:<payload hash>", kept in the record as token
-- ARGV[2] payload hash
-- ARGV[3] response
-- ARGV[4] completion time, unix milliseconds
-- ARGV[5] retention in milliseconds
--
-- Returns 1 when the caller held the lock, or when the record is already the caller's
-- own; 2 when its lock had expired but nobody took over and nothing is recorded yet (the
-- work did happen, so it is recorded); 0 when another holder has the lock or a record
-- exists already (nothing written).
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'hash', ARGV[2], 'response', ARGV[3], 'at', ARGV[4], 'token', ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('HGET', KEYS[2], 'token') == ARGV[1] then
  -- go-redis resent this very call after its reply was lost (EOF, read timeout): the
  -- first run wrote the record and dropped the lock. The token is random per call, so
  -- no other holder's record can match.
  return 1
end
if not held and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[2], 'hash', ARGV[2], 'response', ARGV[3], 'at', ARGV[4], 'token', ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  return 2
end
return 0

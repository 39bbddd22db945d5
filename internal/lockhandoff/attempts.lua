-- attempts: count a failed run of the envelope in proc, durably, in the entity's slot.
--
-- KEYS[1] lock      the turn (see take.lua)
-- KEYS[2] proc      the envelope being processed (see take.lua)
-- KEYS[3] attempts  hash of the envelope in proc's failed runs:
--                   entry (SHA-1 of the proc entry), n, err, first_at, last_at, skip,
--                   run (the id of the last run counted)
-- ARGV[1] token     the holder's token: nothing changes unless lock still holds it
-- ARGV[2] digest    SHA-1 (hex) of the proc entry the caller ran
-- ARGV[3] error     the run's error text
-- ARGV[4] ttl       retention of the hash in milliseconds
-- ARGV[5] run       the id of this failed run, unique per call: a call sent again after its
--                   reply was lost finds it in run and counts nothing a second time
--
-- The hash belongs to the entry whose digest it holds: a hash left by an earlier envelope
-- (one that failed, then succeeded) starts again from 0 for the next.
--
-- Returns
--   {n, skip, first_at, now}
--                  the envelope's failed runs so far (at least 1), this one counted; skip
--                  is 1 when an operator asked to quarantine it (see skip.lua); first_at
--                  is when its first failure was counted, now this one (server clock, ms)
--   {STATUS_LOST}  the lock is not ours; nothing changed
--   {STATUS_GONE}  proc no longer holds that entry; nothing changed
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {STATUS_LOST}
end
local cur = redis.call('LINDEX', KEYS[2], 0)
if not cur or redis.sha1hex(cur) ~= ARGV[2] then
  return {STATUS_GONE}
end
local now = nowMillis()
if redis.call('HGET', KEYS[3], 'entry') ~= ARGV[2] then
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'entry', ARGV[2], 'first_at', now)
end
local n
if redis.call('HGET', KEYS[3], 'run') == ARGV[5] then
  n = tonumber(redis.call('HGET', KEYS[3], 'n'))
  now = redis.call('HGET', KEYS[3], 'last_at')
else
  n = redis.call('HINCRBY', KEYS[3], 'n', 1)
  redis.call('HSET', KEYS[3], 'err', ARGV[3], 'last_at', now, 'run', ARGV[5])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
local skip = 0
if redis.call('HGET', KEYS[3], 'skip') == '1' then
  skip = 1
end
return {n, skip, tonumber(redis.call('HGET', KEYS[3], 'first_at')), tonumber(now)}

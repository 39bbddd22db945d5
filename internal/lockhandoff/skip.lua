-- skip: ask that the envelope in proc be quarantined by whichever worker runs it next.
--
-- KEYS[1] proc      the envelope being processed (see take.lua)
-- KEYS[2] attempts  the envelope's failed runs (see attempts.lua)
-- ARGV[1] ttl       retention of the hash in milliseconds
--
-- A worker reads the mark when it re-runs the envelope, or when a run of it fails; it then
-- dead-letters the envelope instead of running it (again) and moves the turn on.
--
-- Returns
--   {STATUS_MARKED, entry}  marked; entry is the proc entry "<enqueued_at_ms>:<envelope>"
--   {STATUS_NO_ENVELOPE}    proc is empty: nothing to skip
local cur = redis.call('LINDEX', KEYS[1], 0)
if not cur then
  return {STATUS_NO_ENVELOPE}
end
local d = redis.sha1hex(cur)
if redis.call('HGET', KEYS[2], 'entry') ~= d then
  local now = nowMillis()
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'entry', d, 'n', 0, 'first_at', now)
end
redis.call('HSET', KEYS[2], 'skip', '1')
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {STATUS_MARKED, cur}

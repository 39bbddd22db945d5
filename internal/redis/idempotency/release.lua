-- release.lua: compare-and-delete of the in-progress lock; never deletes another
-- holder's lock (one that took over after the caller's lock expired).
--
-- KEYS[1] lock
-- ARGV[1] the caller's lock value "<token>:<payload hash>"
--
-- Returns 1 when the lock was the caller's and is gone, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

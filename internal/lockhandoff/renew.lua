-- renew: extend the lease while the holder's handler runs.
--
-- KEYS[1] lock
-- ARGV[1] token  the holder's token
-- ARGV[2] ttl    lease TTL in milliseconds
--
-- Returns 1 if the lease was extended, 0 if lock is not ours (expired or taken over).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

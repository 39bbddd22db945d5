-- leave: release the turn, leaving any backlog in place for another worker.
--
-- KEYS[1] lock   KEYS[2] wait   KEYS[3] proc   (see take.lua)
-- ARGV[1] token  the holder's token: nothing changes unless lock still holds it
-- ARGV[2] done   "1": the envelope in proc was processed and is removed;
--                "0": it stays in proc to be re-run (handler failed or was abandoned)
--
-- Returns the backlog left (LLEN proc + LLEN wait), or -1 if the lock was not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
if ARGV[2] == '1' then
  redis.call('DEL', KEYS[3])
end
redis.call('DEL', KEYS[1])
return redis.call('LLEN', KEYS[3]) + redis.call('LLEN', KEYS[2])

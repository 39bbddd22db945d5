-- leave: release the turn, leaving any backlog in place for another worker.
--
-- KEYS[1] lock   KEYS[2] wait   KEYS[3] proc   (see take.lua)
-- KEYS[4..]      the lists the handler trims (see trims.lua)
-- ARGV[1] token  the holder's token: nothing changes unless lock still holds it
-- ARGV[2] done   "1": the envelope in proc was processed and is removed;
--                "0": it stays in proc to be re-run (handler failed or was abandoned)
-- ARGV[3..]      the handler's trims, committed before the release (see trims.lua);
--                there are none unless done is "1"
--
-- Returns
--   {left}                            released; left (never negative) is the backlog left
--                                     (LLEN proc + LLEN wait)
--   {STATUS_LOST}                     the lock was not ours; nothing changed
--   {STATUS_TRIM_FAILED, i, message}  trim i failed; nothing else changed (the caller
--                                     leaves again with done "0")
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {STATUS_LOST}
end
local failed = run_trims(4, 3)
if failed then
  return failed
end
if ARGV[2] == '1' then
  redis.call('DEL', KEYS[3])
end
redis.call('DEL', KEYS[1])
return {redis.call('LLEN', KEYS[3]) + redis.call('LLEN', KEYS[2])}

-- handoff: the holder finished the envelope in proc; commit the handler's trims, then give
-- the turn to the next envelope under the same lock, or release the lock when nothing waits.
--
-- KEYS[1] lock   KEYS[2] wait   KEYS[3] proc   KEYS[4] seq   KEYS[5] waitbytes (see take.lua)
-- KEYS[6..]      the lists the handler trims (see trims.lua)
-- ARGV[1] token  the holder's token: nothing changes unless lock still holds it
-- ARGV[2] ttl    lease TTL in milliseconds, renewed for the next envelope
-- ARGV[3] seq    the seq of the envelope the holder finished: nothing changes unless it is
--                still the current one. A handoff sent again (the client retries a round
--                trip whose reply was lost) must not finish the next envelope unrun.
-- ARGV[4..]      the handler's trims (see trims.lua)
--
-- Returns
--   {STATUS_NEXT, seq, entry, now_ms, depth}  entry moved from wait to proc, lock renewed
--   {STATUS_DONE}                             wait was empty, proc cleared, lock deleted
--   {STATUS_LOST}                             lock is not ours; nothing changed
--   {STATUS_TRIM_FAILED, i, message}          trim i failed; the step did not happen
--   {STATUS_STALE}                            seq moved on (this step ran already);
--                                             nothing changed
--
-- Take and handoff are atomic on the same keys: no envelope can be pushed after the holder
-- saw an empty wait and before it released, so there is no lost wake-up.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {STATUS_LOST}
end
if redis.call('GET', KEYS[4]) ~= ARGV[3] then
  return {STATUS_STALE}
end
local failed = run_trims(6, 4)
if failed then
  return failed
end
redis.call('DEL', KEYS[3])
local nxt = redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
if not nxt then
  redis.call('DEL', KEYS[1], KEYS[5])
  return {STATUS_DONE}
end
local depth = redis.call('LLEN', KEYS[2])
if depth == 0 or redis.call('DECRBY', KEYS[5], #nxt) <= 0 then
  redis.call('DEL', KEYS[5])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local now = nowMillis()
return {STATUS_NEXT, redis.call('INCR', KEYS[4]), nxt, tonumber(now), depth}

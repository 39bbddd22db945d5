-- resume: take a free turn to work off a backlog (sweeper, drain nudge). Unlike take it
-- brings no envelope of its own, and it takes nothing when there is no backlog.
--
-- KEYS[1] lock   KEYS[2] wait   KEYS[3] proc   KEYS[4] seq   KEYS[5] waitbytes (see take.lua)
-- ARGV[1] token  the caller's token
-- ARGV[2] ttl    lease TTL in milliseconds
--
-- Returns
--   {STATUS_TURN, seq, entry, now_ms, depth, rerun}
--                  lock is ours; rerun is 1 when entry is the envelope a previous holder
--                  left in proc (it goes first), 0 when it was moved from wait
--   {STATUS_EMPTY} no backlog, nothing written
--   {STATUS_BUSY}  someone holds the turn
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  -- This very resume ran already (tokens are never reused) and its reply was lost: answer
  -- TURN again, the envelope in proc counted as a re-run.
  local cur = redis.call('LINDEX', KEYS[3], 0)
  if cur then
    local now = nowMillis()
    return {STATUS_TURN, tonumber(redis.call('GET', KEYS[4])), cur, tonumber(now), redis.call('LLEN', KEYS[2]), 1}
  end
end
if holder then
  return {STATUS_BUSY}
end
local rerun = 1
local cur = redis.call('LINDEX', KEYS[3], 0)
local depth = redis.call('LLEN', KEYS[2])
if not cur then
  rerun = 0
  cur = redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
  if not cur then
    redis.call('DEL', KEYS[5])
    return {STATUS_EMPTY}
  end
  depth = depth - 1
  if depth == 0 or redis.call('DECRBY', KEYS[5], #cur) <= 0 then
    redis.call('DEL', KEYS[5])
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local now = nowMillis()
return {STATUS_TURN, redis.call('INCR', KEYS[4]), cur, tonumber(now), depth, rerun}

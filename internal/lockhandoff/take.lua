-- take: take the entity's turn, or queue the envelope behind the current holder.
--
-- KEYS[1] lock   the turn: the holder's token, with the lease TTL
-- KEYS[2] wait   list of envelopes waiting for the turn (never has a TTL)
-- KEYS[3] proc   list of at most one envelope: the one being processed (never has a TTL)
-- KEYS[4] seq    fencing counter, INCRed each time an envelope enters proc
-- KEYS[5] waitbytes  the bytes of the entries in wait (never has a TTL): set on each push,
--                DECRBYed by the scripts that move an entry out of wait (handoff, resume,
--                this one), deleted when wait is empty. A drifted count is harmless: it is
--                reset whenever wait is found empty, and never goes below zero.
-- ARGV[1] token  the caller's token, written to lock if the turn is free
-- ARGV[2] ttl    lease TTL in milliseconds
-- ARGV[3] bound  LLEN wait at which the answer is FULL
-- ARGV[4] envelope
-- KEYS[6] pushed the take's push marker, Key(prefix, entity, "pushed:<token>"): set when
--                this take appended its envelope to wait, kept ARGV[6] ms
-- ARGV[5] max_bytes  the bytes of wait beyond which the answer is FULL. An empty wait
--                always takes one entry: an envelope larger than the bound (SQS bounds it)
--                would otherwise never be queued.
-- ARGV[6] push marker's life in milliseconds: longer than the client's retries of one call
--
-- Entries in wait and proc are "<enqueued_at_ms>:<envelope>", the time taken from the
-- server's clock so that the time waited is measured on one clock.
--
-- A take sent again (after a lost reply) finds its own token in lock: it answers TURN
-- again and writes nothing. One that queued finds its push marker: it answers QUEUED
-- again and writes nothing (the envelope is in wait once).
--
-- Returns
--   {STATUS_TURN, seq, entry, now_ms, depth, rerun}
--                                   lock is ours; entry (now in proc) is to be processed
--                                   first. When proc or wait held a backlog, entry is the
--                                   oldest of it and the envelope was appended to wait; rerun
--                                   is 1 when entry was left in proc by an earlier holder.
--   {STATUS_QUEUED, depth}          the envelope was appended to wait; depth is LLEN wait
--   {STATUS_FULL, depth}            nothing was written (LLEN wait at ARGV[3], or the
--                                   entry would take wait's bytes past ARGV[5])
local now = nowMillis()
local entry = now .. ':' .. ARGV[4]
local bound = tonumber(ARGV[3])
local depth = redis.call('LLEN', KEYS[2])
local holder = redis.call('GET', KEYS[1])
local bytes = 0
if depth > 0 then
  bytes = tonumber(redis.call('GET', KEYS[5]) or '0') or 0
  if bytes < 0 then
    bytes = 0
  end
end
local full = depth >= bound or (depth > 0 and bytes + #entry > tonumber(ARGV[5]))

-- push appends entry to wait and sets its byte count: SET, not INCRBY, so that a count
-- that drifted while wait was empty starts again from this entry.
local function push()
  local n = redis.call('RPUSH', KEYS[2], entry)
  redis.call('SET', KEYS[5], bytes + #entry)
  redis.call('SET', KEYS[6], '1', 'PX', ARGV[6])
  return n
end

if holder == ARGV[1] then
  -- This very take ran already and took the turn (tokens are never reused): the client
  -- sent it again after its reply was lost. Answer TURN again, without a second push. The
  -- first answer's rerun is unknown here, so the envelope in proc counts as a re-run.
  local cur = redis.call('LINDEX', KEYS[3], 0)
  if cur then
    return {STATUS_TURN, tonumber(redis.call('GET', KEYS[4])), cur, tonumber(now), depth, 1}
  end
end
if holder ~= ARGV[1] and redis.call('EXISTS', KEYS[6]) == 1 then
  -- This very take appended its envelope already (tokens are never reused): answer
  -- QUEUED again, without a second push.
  return {STATUS_QUEUED, depth}
end
if holder then
  if full then
    return {STATUS_FULL, depth}
  end
  return {STATUS_QUEUED, push()}
end

local cur = redis.call('LINDEX', KEYS[3], 0)
local rerun = 0
if cur then
  rerun = 1
end
if cur or depth > 0 then
  -- A holder left a backlog (it crashed, was abandoned, or left on a budget): earlier
  -- arrivals go first, so the envelope queues behind them and the turn starts from proc.
  if full then
    return {STATUS_FULL, depth}
  end
  depth = push()
  if not cur then
    cur = redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
    depth = depth - 1
    if depth == 0 or redis.call('DECRBY', KEYS[5], #cur) <= 0 then
      redis.call('DEL', KEYS[5])
    end
  end
else
  redis.call('RPUSH', KEYS[3], entry)
  cur = entry
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {STATUS_TURN, redis.call('INCR', KEYS[4]), cur, tonumber(now), depth, rerun}

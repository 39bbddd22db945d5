-- forget: remove an entity from a shard of the backlog index, unless a push refreshed its
-- entry since the sweeper read it (a missing entry can orphan a backlog; a stale one only
-- costs the sweeper a look).
--
-- KEYS[1] index shard (sorted set: member entity, score = time of its latest push, ms)
-- ARGV[1] entity
-- ARGV[2] the score the sweeper read
--
-- Returns 1 if removed, 0 if the entry changed or was gone.
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0

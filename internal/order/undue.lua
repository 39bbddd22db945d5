-- undue.lua: moves or removes one entry of the due index only while its score is still
-- the one the caller knows (the hold a commit cleared, or a scanner's claim): a newer hold
-- written since, or another claim, is left as it is.
-- KEYS[1] the shard; ARGV[1] the lcid; ARGV[2] the score expected (µs); ARGV[3] the new
-- score, or "" to remove the entry. Returns 1 when it changed the entry, else 0.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
end
return 1

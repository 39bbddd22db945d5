-- Commits what one event did to its entity, fenced by the turn's token.
-- KEYS[1] lock            the entity's turn; must still hold ARGV[1]
-- KEYS[2] state           the entity's State (JSON)
-- KEYS[3] results list          results waiting to be published, oldest first
-- KEYS[4] done:<event_id> of the event that triggered the step
-- KEYS[5..n] done:<event_id> of each result, in order
-- ARGV[1] token
-- ARGV[2] the new state (JSON)
-- ARGV[3] done marker retention in milliseconds
-- ARGV[4..] the results (JSON), aligned with KEYS[5..]
-- Returns {1, first ten results list entries} when committed (the caller publishes them
-- without another round trip), {0} when the triggering event was already done.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED the turn is no longer ours')
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0}
end
redis.call('SET', KEYS[2], ARGV[2])
for i = 5, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i - 1], 'PX', ARGV[3])
  redis.call('RPUSH', KEYS[3], ARGV[i - 1])
end
return {1, redis.call('LRANGE', KEYS[3], 0, 9)}

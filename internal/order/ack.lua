-- Drops the n oldest outbox entries after they were published, only while the turn is
-- ours: a zombie holder must not trim results that the new holder has not published.
-- KEYS[1] lock
-- KEYS[2] outbox
-- ARGV[1] token
-- ARGV[2] n
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('LTRIM', KEYS[2], tonumber(ARGV[2]), -1)
return 1

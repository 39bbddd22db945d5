-- Drops the n oldest results list entries after they were published, only while the turn is
-- ours: a zombie holder must not trim results that the new holder has not published.
-- Safe to run twice (a client retry after a lost reply): it trims only while the results list
-- still starts with the entries it names, the first and the n-th by their SHA-1; once
-- they are gone it is a no-op and the results behind them stay.
-- KEYS[1] lock
-- KEYS[2] results list
-- ARGV[1] token
-- ARGV[2] n
-- ARGV[3] SHA-1 (hex) of the first entry to drop
-- ARGV[4] SHA-1 (hex) of the n-th entry to drop
-- Returns 1 (trimmed, or trimmed already), 0 (the turn is not ours).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local n = tonumber(ARGV[2])
if n < 1 then
  return 1
end
local first = redis.call('LINDEX', KEYS[2], 0)
local last = redis.call('LINDEX', KEYS[2], n - 1)
if not first or not last or redis.sha1hex(first) ~= ARGV[3] or redis.sha1hex(last) ~= ARGV[4] then
  return 1
end
redis.call('LTRIM', KEYS[2], n, -1)
return 1

-- due.lua: claims the due entries of one shard of the due index (internal/order/expiry, Scanner.claim).
-- KEYS[1] the shard (a sorted set: member an lcid, score its hold_until in unix µs).
-- ARGV[1] now (µs), ARGV[2] the claim's score (now + the lease, µs), ARGV[3] the batch.
-- Returns {backlog, oldest score or false, lcid1, lcid2, ...}: backlog and oldest are of
-- the entries due before the claim; each lcid returned is claimed: its score is now the
-- claim's, so no other scanner takes it until the lease is over.
local backlog = redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[1])
if backlog == 0 then
  return {0, false}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {backlog, oldest}
for _, lcid in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], lcid)
  out[#out + 1] = lcid
end
return out

-- load.lua: create a SKU's hash if it does not exist yet (create-if-absent, like SET NX).
--
-- KEYS[1]  the SKU hash <prefix>:inv:{<sku>}
-- ARGV[1]  n, the number of hash arguments that follow
-- ARGV[2..n+1]  field value field value ... (loadFields in layout.go): v, ss, on, n, the
--          index chunks o:<i>, m:, k:, s:, b: (and p:) per lot, t: per transfer, qw and qn
--          for a queue
-- ARGV[n+2..]  member score fields per waiting line: the queue's sorted set KEYS[1]..':q'
--          and hash KEYS[1]..':qe' (ledger.lua's "Waiting demand"), in the SKU's hash tag
--
-- Returns 1 when it created the hash, 0 when the hash existed (it is left untouched:
-- Redis is the source of truth once loaded, so concurrent first touches create it once).

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local n = tonumber(ARGV[1])
-- unpack is bounded by the Lua stack, so write in slices.
for i = 2, n + 1, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, n + 1)))
end
-- A queue left without its SKU hash belongs to no loaded SKU: the load replaces it.
local qkey, qekey = KEYS[1] .. ':q', KEYS[1] .. ':qe'
redis.call('DEL', qkey, qekey)
for i = n + 2, #ARGV, 3 do
  redis.call('ZADD', qkey, ARGV[i + 1], ARGV[i])
  redis.call('HSET', qekey, ARGV[i], ARGV[i + 2])
end
return 1

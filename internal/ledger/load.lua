-- load.lua: create a SKU's hash if it does not exist yet (create-if-absent, like SET NX).
--
-- KEYS[1]  the SKU hash <prefix>:inv:{<sku>}
-- ARGV     field value field value ... (loadFields in layout.go): v, ss, on, n, the
--          index chunks o:<i>, m:, k:, s:, b: (and p:) per lot, t: per transfer
--
-- Returns 1 when it created the hash, 0 when the hash existed (it is left untouched:
-- Redis is the source of truth once loaded, so concurrent first touches create it once).

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
-- unpack is bounded by the Lua stack, so write in slices.
for i = 1, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return 1

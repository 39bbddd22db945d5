-- spread_handler: the spread benchmark's handler, about the cost of an allocation: read a
-- 20-field hash and rewrite every field.
--
-- KEYS[1] the hash
--
-- Returns the number of fields written.
local v = redis.call('HGETALL', KEYS[1])
local out = {}
if #v == 0 then
  for i = 1, 20 do
    out[#out + 1] = 'f' .. i
    out[#out + 1] = 0
  end
else
  for i = 1, #v, 2 do
    out[#out + 1] = v[i]
    out[#out + 1] = tonumber(v[i + 1]) + 1
  end
end
redis.call('HSET', KEYS[1], unpack(out))
return #out / 2

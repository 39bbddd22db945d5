-- available.lua: what an allocation on one SKU would get now, read-only. Runs with
-- candidates.lua prepended (ledger.go), the walk and rules of ledger.lua's 'alloc', and
-- the no-writes flag, so it also runs on a replica and can never change stock.
--
-- KEYS[1]  the SKU hash               <prefix>:inv:{<sku>}
-- ARGV[1]  target date (YYYY-MM-DD), ARGV[2] mode (ship | reserve), ARGV[3] qty (0: none)
--
-- Returns {version, safety_stock, sum, code, detail, candidates, take}:
--   sum         the sellable of every candidate valid on the date
--   code        the reason an allocation of qty would get ('' when it would succeed or
--               qty is 0), detail its detail text
--   candidates  flat {lot, meta, sellable, ...} in allocation order (meta as in layout.go)
--   take        flat {lot, qty, ...}: what an allocation of qty would take, in order
--               (empty when it would fail)
-- Fails with the error reply "ERR_NOT_LOADED 0 " when the SKU is not in Redis.

local key = KEYS[1]
local date, mode, qty = ARGV[1], ARGV[2], tonumber(ARGV[3])

local head = redis.call('HMGET', key, 'v', 'ss', 'on', 'o:0')
if not head[1] then
  return redis.error_reply('ERR_NOT_LOADED 0 ')
end
local ss = tonumber(head[2])

-- Every candidate is read, so in chunks of 1024 from the start.
local cand, sell, sum = walkCandidates(key, head, date, math.huge, nil, 1024)

local code, detail = '', ''
local take = {}
if qty > 0 then
  local need = allocNeed(qty, mode, ss)
  local c, d = refusal(qty, need, sum, ss)
  if c then
    code, detail = c, d
  else
    local lots, q = takeLots(cand, sell, qty)
    for i, lot in ipairs(lots) do
      take[#take + 1] = lot
      take[#take + 1] = string.format('%d', q[i])
    end
  end
end

-- The candidates' metadata, in slices: unpack is bounded by the Lua stack.
local out = {}
for i = 1, #cand, 1000 do
  local f = {}
  for j = i, math.min(i + 999, #cand) do f[#f + 1] = 'm:' .. candidateLot(cand, j) end
  local m = redis.call('HMGET', key, unpack(f))
  for j = i, math.min(i + 999, #cand) do
    out[#out + 1] = candidateLot(cand, j)
    out[#out + 1] = m[j - i + 1] or ''
    out[#out + 1] = string.format('%d', sell[j])
  end
end

return {head[1], head[2], string.format('%d', sum), code, detail, out, take}

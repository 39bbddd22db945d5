-- jsondoc.lua: the baseline allocation on a JSON document per SKU, with the same
-- checks, op memory and version bump as ledger.lua's alloc (and the same early stop
-- once the candidates seen cover the need). The document keeps its lots in allocation
-- order, so no sort runs per call: the cost measured is the decode/encode.
--
-- KEYS[1]  the SKU document (JSON): {"v":n,"ss":n,"lots":[{"id","vf","vt","s","r","a","h","x"},...]}
-- KEYS[2]  the op record
-- ARGV[1] qty, ARGV[2] target date, ARGV[3] mode (ship|reserve), ARGV[4] op-record retention (s)
--
-- Returns the result document (JSON); errors as ledger.lua's replies.

local prev = redis.call('GET', KEYS[2])
if prev then
  if string.byte(prev, 1) == 69 then return redis.error_reply(string.sub(prev, 2)) end
  return prev
end
local raw = redis.call('GET', KEYS[1])
if not raw then return redis.error_reply('ERR_NOT_LOADED 0 ') end
local doc = cjson.decode(raw)
local qty, date, mode, ttl = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local need = qty
if mode == 'ship' then need = qty + doc.ss end
local cand, sum = {}, 0
for _, l in ipairs(doc.lots) do
  if sum >= need then break end
  if l.good and l.vf <= date and date <= l.vt then
    cand[#cand + 1] = l
    sum = sum + l.s
  end
end
local function fail(code, detail)
  redis.call('SET', KEYS[2], 'E' .. code .. ' 1 ' .. detail, 'EX', ttl)
  return redis.error_reply(code .. ' 0 ' .. detail)
end
if sum < qty then return fail('ERR_SHORTAGE', 'available=' .. sum) end
if sum < need then return fail('ERR_SAFETY_STOCK', 'available=' .. sum) end
local to = 'r'
if mode == 'ship' then to = 'a' end
local moves, touched, rem = {}, {}, qty
for _, l in ipairs(cand) do
  if rem == 0 then break end
  if l.s > 0 then
    local t = math.min(l.s, rem)
    l.s = l.s - t
    l[to] = l[to] + t
    rem = rem - t
    moves[#moves + 1] = {lot = l.id, from = 'sellable', to = to, qty = t}
    touched[#touched + 1] = l
  end
end
doc.v = doc.v + 1
redis.call('SET', KEYS[1], cjson.encode(doc))
local res = cjson.encode({version = doc.v, moves = moves, lots = touched})
redis.call('SET', KEYS[2], res, 'EX', ttl)
return res

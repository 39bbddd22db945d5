-- available.lua: what an allocation on one SKU would get now, read-only. Runs with
-- scriptHeader and candidates.lua prepended (ledger.go), the walk and rules of
-- ledger.lua's 'alloc', and the no-writes flag, so it also runs on a replica and can never
-- change stock.
--
-- KEYS[1]  the SKU hash               <prefix>:inv:{<sku>}
-- ARGV[1]  target date (YYYY-MM-DD), ARGV[2] mode (ship | reserve), ARGV[3] qty (0: none)
--
-- Returns {version, safety_stock, sum, code, detail, candidates, take, locations, sl, qw}:
--   sum         the sellable of every candidate valid on the date
--   code        the reason an allocation of qty would get ('' when it would succeed or
--               qty is 0), detail its detail text
--   candidates  one text, a line "head sellable\tlot\tlocation\n" per candidate in
--               allocation order (head: the lot's index record without its field name, 46
--               characters, layout.go; location: p:<lot>, '' for the default one), so the
--               reply is one string however many lots there are
--   take        flat {lot, qty, ...}: what an allocation of qty would take, in order
--               (empty when it would fail)
--   locations   flat {location, sellable, ...}: the candidates' sellable per location
--               (p:<lot>, '' for the default location), in no order; empty when every
--               candidate is at the default location
--   sl          the locations' own safety stocks as the hash holds them (layout.go)
--   qw          what the SKU's queue of waiting lines waits for ('' for none), which
--               an allocation holds back as ledger.lua's alloc does
-- Fails with the error reply "ERR_NOT_LOADED 0 " when the SKU is not in Redis, and
-- "ERR_REINDEX 0 " when its index is in another key layout than KEY_LAYOUT (the Go side
-- re-indexes it and asks again).

local key = KEYS[1]
local date, mode, qty = ARGV[1], ARGV[2], tonumber(ARGV[3])

local head = redis.call('HMGET', key, 'v', 'ss', 'on', 'o:0', 'kl', 'sl', 'qw')
if not head[1] then
  return redis.error_reply('ERR_NOT_LOADED 0 ')
end
if head[5] ~= KEY_LAYOUT then
  return redis.error_reply('ERR_REINDEX 0 ')
end
local ss = tonumber(head[2])
local queued = tonumber(head[7]) or 0

-- queuedRefusal and queuedCapRefusal are ledger.lua's: refusal and capRefusal over what
-- the queue's demand leaves, their details ending with the demand.
local function queuedRefusal(qty, need, sum)
  if queued == 0 then return refusal(qty, need, sum, ss) end
  local code, detail = refusal(qty, need, math.max(0, sum - queued), ss)
  if code then detail = detail .. string.format(' queued=%d', queued) end
  return code, detail
end

local function queuedCapRefusal(qty, sum, total)
  if queued == 0 then return capRefusal(qty, sum, total) end
  local code, detail = capRefusal(qty, math.max(0, sum - queued), math.max(0, total - queued))
  if code then detail = detail .. string.format(' queued=%d', queued) end
  return code, detail
end

-- Every candidate is read, so in chunks of 1024 from the start.
local cand, sell, sum, heads = walkCandidates(key, head, date, math.huge, nil, 1024, true)

-- The candidates' locations (at: 'default' for the default location), in chunks of 1024
-- (unpack is bounded by the Lua stack).
local at, byLoc, other = {}, {}, false
for from = 1, #cand, 1024 do
  local f = {}
  for i = from, math.min(from + 1023, #cand) do f[#f + 1] = 'p:' .. candidateLot(cand, i) end
  local p = redis.call('HMGET', key, unpack(f))
  for j = 1, #f do
    local loc = p[j] or ''
    if loc ~= '' then other = true end
    byLoc[loc] = (byLoc[loc] or 0) + sell[from + j - 1]
    at[from + j - 1] = p[j] or 'default'
  end
end

local code, detail = '', ''
local take = {}
if qty > 0 then
  local need = allocNeed(qty, mode, ss)
  local c, d = queuedRefusal(qty, need, sum)
  -- The locations' safety stocks cap a ship allocation as ledger.lua's alloc does.
  local lss, caps = locSafety(head[6], mode), nil
  if not c and lss then
    local total
    caps, total = capsOf(at, sell, lss)
    c, d = queuedCapRefusal(qty, sum, total)
  end
  if c then
    code, detail = c, d
  else
    local lots, q = takeLots(cand, sell, qty, at, caps)
    for i, lot in ipairs(lots) do
      take[#take + 1] = lot
      take[#take + 1] = string.format('%d', q[i])
    end
  end
end

local locs = {}
if other then
  for loc, s in pairs(byLoc) do
    locs[#locs + 1] = loc
    locs[#locs + 1] = string.format('%d', s)
  end
end

local out = {}
for i = 1, #cand do
  local loc = at[i]
  if loc == 'default' then loc = '' end
  out[i] = heads[i] .. string.format('%d', sell[i]) .. '\t' .. candidateLot(cand, i) .. '\t' .. loc
end

return {head[1], head[2], string.format('%d', sum), code, detail, table.concat(out, '\n'), take, locs, head[6] or '', head[7] or ''}

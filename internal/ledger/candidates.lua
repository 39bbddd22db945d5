-- candidates.lua: the candidate rules of an allocation, shared by ledger.lua (op alloc)
-- and available.lua, which ledger.go runs with this file prepended, so an allocation and
-- an availability read cannot disagree on which lots are candidates, in which order,
-- what they take from each, or why a request fails.
--
-- Defines local functions and the record layout only; reads nothing on its own.

-- A candidate index record (layout.go's indexRecord): the lot's key in the allocation
-- order, SORT_LEN bytes (layout.go's allocKey computes it; no script does), valid_from and
-- valid_to (PERIOD_LEN, 10 each), then the lot's sellable field name "s:<lot_id>" and
-- "\n". Offsets below are from a record's first byte.
local SORT_LEN, PERIOD_LEN = 26, 20
local PERIOD_AT = SORT_LEN                -- valid_from starts after the sort key
local FIELD_AT = SORT_LEN + PERIOD_LEN    -- the field name starts after the period

-- walkCandidates walks the candidate index of the SKU hash key (head: its HMGET of
-- 'v', 'ss', 'on', 'o:0', 'kl', 'sl') in allocation order, keeping the lots valid on date, and reads
-- their sellable in growing chunks until the candidates seen sum to need or more
-- (math.huge: every candidate). The first candidate is read by first(lot), which returns
-- its sellable (the allocation reads it whole: it is the one usually taken from, and the
-- result needs its state); the next ones only for sellable, in chunks of 4, 16, 64, ...
-- so a hot SKU's usual cost does not grow with its number of lots. A walk that reads
-- every candidate anyway starts at chunk0 (up to 1024) instead of 1, and first is not
-- called.
-- Returns cand (the field names 's:<lot>': candidateLot turns them into lot ids), sell
-- (their sellable) and sum; with keepHeads, also heads: each candidate's index record
-- without its field name (sort key, valid_from, valid_to: layout.go), which says its kind,
-- best-before, registration and validity without reading its meta.
-- An operation that changed lots before it allocates (ledger.lua's change) passes what it
-- has not written yet: chunks, the index as edited (every chunk, chunks[1] is o:0), and
-- known, lot -> state whose s is the lot's sellable now.
-- stop, when given, is called after each chunk with cand, sell, heads and the index in
-- them of the chunk's first candidate; the walk ends when it returns true.
local function walkCandidates(key, head, date, need, first, chunk0, keepHeads, chunks, known, stop)
  local cand, sell, sum, heads = {}, {}, 0, {}
  local ALWAYS = '0001-01-019999-12-31'
  local nchunks, cur = tonumber(head[3]), head[4]
  if chunks then nchunks, cur = #chunks, chunks[1] end
  local ci, pos, n, chunk = 0, 1, #cur, chunk0
  while sum < need do
    local f = {}
    while #f < chunk do
      if pos > n then
        ci = ci + 1
        if ci >= nchunks then break end
        if chunks then cur = chunks[ci + 1] else cur = redis.call('HGET', key, 'o:' .. ci) end
        pos, n = 1, #cur
      else
        local nl = string.find(cur, '\n', pos + FIELD_AT, true)
        local period = string.sub(cur, pos + PERIOD_AT, pos + FIELD_AT - 1)
        if period == ALWAYS or (string.sub(period, 1, 10) <= date and date <= string.sub(period, 11, 20)) then
          f[#f + 1] = string.sub(cur, pos + FIELD_AT, nl - 1)
          if keepHeads then heads[#heads + 1] = string.sub(cur, pos, pos + FIELD_AT - 1) end
        end
        pos = nl + 1
      end
    end
    if #f == 0 then break end
    if chunk == 1 then
      local s = first(string.sub(f[1], 3))
      cand[1], sell[1], sum = f[1], s, s
    else
      local v = redis.call('HMGET', key, unpack(f))
      for i, fld in ipairs(f) do
        local s = tonumber(v[i])
        local k = known and known[string.sub(fld, 3)]
        if k then s = k.s end
        cand[#cand + 1] = fld
        sell[#sell + 1] = s
        sum = sum + s
      end
    end
    chunk = math.min(chunk * 4, 1024) -- unpack is bounded by the Lua stack
    if stop and stop(cand, sell, heads, #cand - #f + 1) then break end
  end
  return cand, sell, sum, heads
end

-- candidateLot returns the lot id of cand[i].
local function candidateLot(cand, i) return string.sub(cand[i], 3) end

-- allocNeed is what the candidates must hold for an allocation of qty: ship keeps the
-- safety stock ss on top.
local function allocNeed(qty, mode, ss)
  if mode == 'ship' then return qty + ss end
  return qty
end

-- refusal returns the reason code and detail of an allocation of qty whose candidates
-- sum to sum, or nil when it succeeds.
local function refusal(qty, need, sum, ss)
  local function fmtn(x) return string.format('%d', x) end
  if sum < qty then
    return 'ERR_SHORTAGE', 'requested=' .. fmtn(qty) .. ' available=' .. fmtn(sum)
  end
  if sum < need then
    return 'ERR_SAFETY_STOCK', 'requested=' .. fmtn(qty) .. ' available=' .. fmtn(sum) .. ' safety_stock=' .. fmtn(ss)
  end
  return nil
end

-- takeLots returns the lots an allocation of qty takes from, in order, and how much from
-- each: candidates in allocation order, each emptied before the next; with caps
-- (location -> the most the allocation may take there; locs[i] is cand[i]'s location),
-- at most each location's cap.
local function takeLots(cand, sell, qty, locs, caps)
  local lots, take, rem, left = {}, {}, qty, nil
  if caps then
    left = {}
    for l, c in pairs(caps) do left[l] = c end
  end
  for i = 1, #cand do
    if rem == 0 then break end
    local t = math.min(sell[i], rem)
    if left then
      t = math.min(t, left[locs[i]])
      left[locs[i]] = left[locs[i]] - t
    end
    if t > 0 then
      lots[#lots + 1] = candidateLot(cand, i)
      take[#take + 1] = t
      rem = rem - t
    end
  end
  return lots, take
end

-- locSafety parses the SKU hash's sl field ("loc \t n \t loc \t n ...", layout.go):
-- location -> its safety stock; nil when no location has one or mode is not ship (a
-- reserve allocation reads no safety stock).
local function locSafety(sl, mode)
  if mode ~= 'ship' or not sl or sl == '' then return nil end
  local m = {}
  for loc, n in string.gmatch(sl, '([^\t]+)\t(%d+)') do m[loc] = tonumber(n) end
  return m
end

-- capsOf returns the most a ship allocation may take at each location of its candidates
-- (locs[i], sell[i]: a candidate's location and sellable), max(0, S_L - ss_L) with lss
-- the locations' safety stocks, and the caps' sum.
local function capsOf(locs, sell, lss)
  local caps, total = {}, 0
  for i = 1, #locs do caps[locs[i]] = (caps[locs[i]] or 0) + sell[i] end
  for l, s in pairs(caps) do
    caps[l] = math.max(0, s - (lss[l] or 0))
    total = total + caps[l]
  end
  return caps, total
end

-- capRefusal is the refusal of a ship allocation of qty whose candidates sum to sum but
-- whose locations' caps sum to total only, nil when the caps allow it.
local function capRefusal(qty, sum, total)
  if total >= qty then return nil end
  return 'ERR_SAFETY_STOCK', string.format('requested=%d available=%d capped=%d', qty, sum, total)
end

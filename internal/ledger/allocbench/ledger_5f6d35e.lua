-- Benchmark-only copy of internal/ledger/ledger.lua at commit 5f6d35e, before the warehouse
-- operations (reglot, regsku, ss, recall, holders, the defective bucket, the n field). It
-- exists only so that `junbanctl bench alloc` can compare the allocation before and after
-- them in the same run (contender junban_before); it expects b:<lot> with four numbers
-- "r a h x" and takes alloc qty target_date mode, with no holder. Nothing else runs it.
--
-- ledger.lua: one inventory operation on one SKU, atomically (layout.go documents the keys).
-- Runs with candidates.lua prepended (ledger.go): the allocation's candidate rules.
--
-- KEYS[1]  the SKU hash               <prefix>:inv:{<sku>}
-- KEYS[2]  the operation's record     <prefix>:inv:{<sku>}:op:<op_id>
-- ARGV[1]  operation, ARGV[2] retention of the op record in seconds, then per operation:
--   alloc    qty target_date mode           mode: ship (sellable->allocated, safety check)
--                                                 | reserve (sellable->reserved)
--   move     from to lot1 qty1 lot2 qty2 ...  bucket codes s r a h x (release, confirm,
--                                                 ship, hide, unhide)
--   receive  lot best_before counted        counted 0 keeps the planned quantity
--   defect   lot
--   adjust   lot delta reason
--
-- Returns {replayed 0|1, result text} (decodeResult in layout.go parses the text).
-- Fails with the error reply "<CODE> <replayed 0|1> <detail>". Every outcome but
-- ERR_NOT_LOADED is remembered in KEYS[2], so a replay gets the first answer and moves
-- nothing. Nothing is written to KEYS[1] unless the whole operation succeeds.

local key, opkey, op, ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2]

local prev = redis.call('GET', opkey)
if prev then
  if string.byte(prev, 1) == 69 then -- 'E': a remembered failure
    local code, detail = string.match(prev, '^E(%S+) (.*)$')
    return redis.error_reply(code .. ' 1 ' .. detail)
  end
  return {1, prev}
end

local head = redis.call('HMGET', key, 'v', 'ss', 'on', 'o:0')
if not head[1] then
  return redis.error_reply('ERR_NOT_LOADED 0 ')
end

local function fmt(n) return string.format('%d', n) end

local function fail(code, detail)
  redis.call('SET', opkey, 'E' .. code .. ' ' .. detail, 'EX', ttl)
  return redis.error_reply(code .. ' 0 ' .. detail)
end

local names = {s = 'sellable', r = 'reserved', a = 'allocated', h = 'hidden', x = 'shipped', e = 'external'}

-- State of the read lots: lot -> {m = meta, s, r, a, h, x = numbers}; touched lists the
-- lots the operation changed or names, in order of first touch.
local st, touched, moves = {}, {}, {}

-- The candidate index is split into fields o:0 .. o:<on-1> of up to 32 records each, so
-- an allocation reads only as far as it walks. Updates load it whole (indexOps), edit
-- it and write it back re-split (commit).
local CHUNK = 32
local nchunks = tonumber(head[3])
local index, indexDirty = nil, false

-- fetch reads the fields of the lots not read yet; returns the first unknown lot.
local function fetch(lots)
  local f, want = {}, {}
  for _, lot in ipairs(lots) do
    if not st[lot] and not want[lot] then
      want[lot] = true
      want[#want + 1] = lot
      f[#f + 1] = 'm:' .. lot
      f[#f + 1] = 's:' .. lot
      f[#f + 1] = 'b:' .. lot
    end
  end
  if #f == 0 then return nil end
  local v = redis.call('HMGET', key, unpack(f))
  for i, lot in ipairs(want) do
    local b = (i - 1) * 3
    if not v[b + 1] then return lot end
    local r, a, h, x = string.match(v[b + 3], '^(%d+) (%d+) (%d+) (%d+)$')
    local sv = tonumber(v[b + 2])
    st[lot] = {m = v[b + 1], m0 = v[b + 1], s = sv, s0 = sv, r = tonumber(r), a = tonumber(a), h = tonumber(h), x = tonumber(x)}
  end
  return nil
end

-- touch adds a lot to the result (and to the write) once, in order of first touch.
local function touch(lot)
  local l = st[lot]
  if not l.touched then
    l.touched = true
    touched[#touched + 1] = lot
  end
  return l
end

local function move(lot, from, to, qty)
  local l = touch(lot)
  if from ~= 'e' then l[from] = l[from] - qty end
  if to ~= 'e' then l[to] = l[to] + qty end
  moves[#moves + 1] = string.format('m\t%s\t%s\t%s\t%d', lot, names[from], names[to], qty)
end

-- Index helpers, created on first need: most operations never edit the index, and
-- defining closures costs on every call.
local ix
local function indexOps()
  if ix then return ix end
  ix = {}
  local function loadIndex()
    if index then return end
    index = head[4]
    if nchunks > 1 then
      local f = {}
      for i = 1, nchunks - 1 do f[i] = 'o:' .. i end
      index = index .. table.concat(redis.call('HMGET', key, unpack(f)))
    end
  end

  function ix.parseMeta(m)
    return string.match(m, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
  end

  -- Candidate index records: kind(1) sort(25) valid_from(10) valid_to(10) "s:" lot_id "\n"
  -- (the lot's sellable field name, so the walk cuts one string per record).
  function ix.record(kind, bb, reg, vf, vt, lot)
    local sk
    if kind == 'planned' then
      sk = 'p0000-00-00' .. string.format('%015d', 999999999999999 - tonumber(reg))
    else
      if bb == '' then bb = '9999-99-99' end
      sk = 'o' .. bb .. string.format('%015d', tonumber(reg))
    end
    return sk .. vf .. vt .. 's:' .. lot .. '\n'
  end

  -- dropRecord removes the lot's record from the index.
  function ix.dropRecord(lot)
    loadIndex()
    local fld = 's:' .. lot
    local pos, n = 1, #index
    while pos <= n do
      local nl = string.find(index, '\n', pos + 46, true)
      if string.sub(index, pos + 46, nl - 1) == fld then
        index = string.sub(index, 1, pos - 1) .. string.sub(index, nl + 1)
        indexDirty = true
        return
      end
      pos = nl + 1
    end
  end

  -- addRecord inserts rec before the first record with a larger sort key.
  function ix.addRecord(rec)
    loadIndex()
    local k = string.sub(rec, 1, 26)
    local pos, n = 1, #index
    while pos <= n do
      if string.sub(index, pos, pos + 25) > k then break end
      pos = string.find(index, '\n', pos + 46, true) + 1
    end
    index = string.sub(index, 1, pos - 1) .. rec .. string.sub(index, pos)
    indexDirty = true
  end
  return ix
end

-- commit writes the touched lots, bumps the version, remembers and returns the result.
local function commit(extra)
  local v = fmt(tonumber(head[1]) + 1)
  local w = {'v', v}
  local out = {v}
  for _, m in ipairs(moves) do out[#out + 1] = m end
  for _, lot in ipairs(touched) do
    local l = st[lot]
    -- The index holds the good lots with sellable stock only, so lots that ran empty
    -- (FEFO puts them first) cost an allocation nothing: update it on the crossings.
    if (l.s0 > 0) ~= (l.s > 0) or l.dirtyMeta then
      local I = indexOps()
      local was = l.s0 > 0 and string.find(l.m0, '^[^\t]*\t1\t') ~= nil
      local kind, good, bb, reg, _, vf, vt = I.parseMeta(l.m)
      local now = l.s > 0 and good == '1'
      if was and (not now or l.dirtyMeta) then I.dropRecord(lot) end
      if now and (not was or l.dirtyMeta) then I.addRecord(I.record(kind, bb, reg, vf, vt, lot)) end
    end
    local n = #w
    if l.dirtyMeta then w[n + 1] = 'm:' .. lot; w[n + 2] = l.m; n = n + 2 end
    local sv, bv = fmt(l.s), string.format('%d %d %d %d', l.r, l.a, l.h, l.x)
    w[n + 1] = 's:' .. lot
    w[n + 2] = sv
    w[n + 3] = 'b:' .. lot
    w[n + 4] = bv
    out[#out + 1] = 'l\t' .. lot .. '\t' .. l.m .. '\t' .. sv .. '\t' .. bv
  end
  if extra then out[#out + 1] = extra end
  if indexDirty then
    local n, pos, count, start, ci = #index, 1, 0, 1, 0
    while pos <= n do
      pos = string.find(index, '\n', pos + 46, true) + 1
      count = count + 1
      if count == CHUNK then
        w[#w + 1] = 'o:' .. ci; w[#w + 1] = string.sub(index, start, pos - 1)
        ci, start, count = ci + 1, pos, 0
      end
    end
    if count > 0 or ci == 0 then
      w[#w + 1] = 'o:' .. ci; w[#w + 1] = string.sub(index, start)
      ci = ci + 1
    end
    w[#w + 1] = 'on'; w[#w + 1] = fmt(ci)
    if ci < nchunks then
      local d = {}
      for i = ci, nchunks - 1 do d[#d + 1] = 'o:' .. i end
      redis.call('HDEL', key, unpack(d))
    end
  end
  for i = 1, #w, 1000 do -- one call unless a huge index was rewritten
    redis.call('HSET', key, unpack(w, i, math.min(i + 999, #w)))
  end
  local text = table.concat(out, '\n')
  redis.call('SET', opkey, text, 'EX', ttl)
  return {0, text}
end

if op == 'alloc' then
  local qty, date, mode = tonumber(ARGV[3]), ARGV[4], ARGV[5]
  local ss = tonumber(head[2])
  local need = allocNeed(qty, mode, ss)
  local cand, sell, sum = walkCandidates(key, head, date, need, function(lot)
    fetch({lot})
    return st[lot].s
  end, 1)
  local code, detail = refusal(qty, need, sum, ss)
  if code then return fail(code, detail) end
  local lots, take = takeLots(cand, sell, qty)
  if #lots > 1 or not st[lots[1]] then fetch(lots) end
  local to = 'r'
  if mode == 'ship' then to = 'a' end
  for i, lot in ipairs(lots) do move(lot, 's', to, take[i]) end
  return commit()
end

if op == 'move' then
  local from, to = ARGV[3], ARGV[4]
  local lots = {}
  for i = 5, #ARGV, 2 do lots[#lots + 1] = ARGV[i] end
  local unknown = fetch(lots)
  if unknown then return fail('ERR_UNKNOWN_LOT', 'lot=' .. unknown) end
  for i = 5, #ARGV, 2 do
    local lot, qty = ARGV[i], tonumber(ARGV[i + 1])
    if st[lot][from] < qty then
      return fail('ERR_INSUFFICIENT', 'lot=' .. lot .. ' ' .. names[from] .. '=' .. fmt(st[lot][from]) .. ' requested=' .. fmt(qty))
    end
    move(lot, from, to, qty)
  end
  return commit()
end

local lot = ARGV[3]
if fetch({lot}) then return fail('ERR_UNKNOWN_LOT', 'lot=' .. lot) end
local l = touch(lot)

if op == 'adjust' then
  local delta = tonumber(ARGV[4])
  if delta > 0 then
    move(lot, 'e', 's', delta)
  else
    if l.s < -delta then
      return fail('ERR_INSUFFICIENT', 'lot=' .. lot .. ' sellable=' .. fmt(l.s) .. ' requested=' .. fmt(-delta))
    end
    move(lot, 's', 'e', -delta)
  end
  return commit('c\t' .. ARGV[5])
end

if op == 'receive' then
  local kind, good, _, reg, arr, vf, vt = indexOps().parseMeta(l.m)
  if kind ~= 'planned' then
    return fail('ERR_LOT_STATE', 'lot=' .. lot .. ' kind=' .. kind)
  end
  local bb, counted = ARGV[4], tonumber(ARGV[5])
  if counted > 0 then
    local diff = counted - (l.s + l.r + l.a + l.h)
    if diff > 0 then
      move(lot, 'e', 's', diff)
    elseif diff < 0 then
      if l.s < -diff then
        return fail('ERR_INSUFFICIENT', 'lot=' .. lot .. ' sellable=' .. fmt(l.s) .. ' short_by=' .. fmt(-diff))
      end
      move(lot, 's', 'e', -diff)
    end
  end
  l.m = table.concat({'onhand', good, bb, reg, arr, vf, vt}, '\t')
  l.dirtyMeta = true
  return commit()
end

if op == 'defect' then
  local kind, good, bb, reg, arr, vf, vt = indexOps().parseMeta(l.m)
  if good == '1' then
    l.m = table.concat({kind, '0', bb, reg, arr, vf, vt}, '\t')
    l.dirtyMeta = true
  end
  return commit()
end

return redis.error_reply('ERR_INVALID_REQUEST 0 unknown operation ' .. tostring(op))

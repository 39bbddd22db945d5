-- ledger.lua: one inventory operation on one SKU, atomically (layout.go documents the keys).
-- Runs with scriptHeader (KEY_LAYOUT: the key layout of the Go side that runs it) and
-- candidates.lua prepended (ledger.go): the allocation's candidate rules.
--
-- KEYS[1]  the SKU hash               <prefix>:inv:{<sku>}
-- KEYS[2]  the operation's record     <prefix>:inv:{<sku>}:op:<op_id>
-- KEYS[3]  optional: the record of the operation's legacy op id, the id an older worker
--          named it by (docs/ledger.md, "Operation ids"): replayed when KEYS[2] has none;
--          never written
-- ARGV[1]  operation, ARGV[2] retention of the op record in seconds, ARGV[3] the request's
--          fingerprint (fingerprint.go, 16 bytes) followed by its fence (stock.Fenced:
--          digits naming the entity's step the request is made at; none: unfenced),
--          then per operation:
--   alloc    qty target_date mode holder    mode: ship (sellable->allocated, safety check)
--                                                 | reserve (sellable->reserved)
--            [route nosplit n loc1 pos1 ... locn posn]
--                                           a routed allocation (stock.Route): only lots at
--                                           the n locations, by position, then key;
--                                           nosplit 1: all from one location
--   move     from to holder reason n lot1 qty1 ... lotn qtyn back1 bqty1 ...
--                                           bucket codes s r a h x d (release, confirm,
--                                           ship, undo, hold, release hold, damage, return);
--                                           the n lots move from -> to, then the back
--                                           lots to -> from (the undo of a change)
--   change   [route nosplit m loc1 pos1 ...] mode date holder n lot1 qty1 ... lotn qtyn aqty1 aqty2 ...
--                                           an order's change on the SKU: releases the n
--                                           lots from mode's bucket (ship: a, reserve: r),
--                                           then allocates each aqty in turn as alloc does,
--                                           all or nothing
--   move_alloc to mode date holder n lot1 qty1 ... lotn qtyn
--                                           a line's allocation moved to location to:
--                                           releases the n lots as change does, then
--                                           allocates their sum from the lots at to alone,
--                                           all or nothing (a refusal's detail names to)
--   receive  lot best_before counted reg key
--                                           counted 0 keeps the planned quantity; reg is
--                                           the lot's reg_seq as Go read it, key its
--                                           allocKey as an on-hand lot with best_before
--   recall   lot reason max_holders         good=0; sellable, hidden -> defective
--   adjust   lot delta reason
--   reglot   lot kind good best_before arrives_at valid_from valid_to qty reg key1 ... keyn
--                                           reg is the first registration number Go expects
--                                           the lot may get (the hash's n), key1..keyn its
--                                           allocKey with reg, reg+1, ... (registrations at
--                                           the same time take the numbers in between)
--   ss       safety_stock
--   regsku   safety_stock create            create 1: make the SKU when Redis lacks it
--
-- holder ("" for none) is the order whose holdings the moves change: a move into
-- reserved/allocated adds to its entry in <key>:h:<lot> (hash lcid -> units), a move out
-- of them takes from it; a recall lists the lot's entries.
--
-- The script never builds a lot's key in the allocation order (layout.go's allocKey): it
-- copies the key Go passed (reglot, receive) or the one stored in k:<lot>, which holds for
-- as long as the lot's meta is the one stored after it.
--
-- Returns {replayed 0|1, result text} (decodeResult in layout.go parses the text).
-- Fails with the error reply "<CODE> <replayed 0|1> <detail>". Every outcome but
-- ERR_NOT_LOADED, ERR_REINDEX, ERR_REG_SEQ, ERR_OP_CONFLICT and ERR_OP_FENCED is remembered in KEYS[2]
-- with the request's fingerprint and fence, so a replay of the same request gets the first
-- answer and moves nothing (a replay of KEYS[3]'s record likewise); a request with another
-- fingerprint under KEYS[2] fails with ERR_OP_CONFLICT and changes nothing, and KEYS[3]'s
-- record with another fingerprint is passed over. A record kept at a fence answers a
-- request made at another fence with ERR_OP_FENCED and changes nothing: the old answer is
-- not the moved-on entity's (a record or a request without a fence replays as before). Nothing is written to KEYS[1] unless
-- the whole operation succeeds. The Go side answers the three:
--   ERR_NOT_LOADED           it loads the SKU and runs the operation again;
--   ERR_REINDEX              the SKU was indexed in another key layout than KEY_LAYOUT, or
--                            a lot the operation (re)indexes has no stored key for its meta
--                            (written by an older version): it re-indexes the SKU
--                            (reindex.lua) and runs the operation again;
--   ERR_REG_SEQ <reg>        Go passed no key for the lot's registration number <reg>
--                            (reglot: other lots were registered meanwhile; receive: Go
--                            did not know it): it computes the keys from <reg> and runs the
--                            operation again.

local key, opkey, op, ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
-- ARGV[1] is the operation, or the operation, a tab and a location (wantLoc): the location
-- a registered lot is stored at (reglot), or where the lots an operation names must be
-- (ERR_LOCATION otherwise: receive, adjust, recall, move).
local wantLoc = ''
do
  local tab = string.find(op, '\t', 1, true)
  if tab then op, wantLoc = string.sub(op, 1, tab - 1), string.sub(op, tab + 1) end
end
local fp, fence = string.sub(ARGV[3], 1, 16), string.sub(ARGV[3], 17)

-- recorded returns the outcome remembered under k for this request and the fence it was
-- made at ('' for none): nil when k has no record, false when its record answers another
-- request. A record is "#", the request's fingerprint (its 16 bytes) and the outcome, or
-- "%", the fingerprint, the fence's digits, "|" and the outcome; one written before
-- fingerprints is the outcome alone and answers any request, as it did then (its first
-- byte is a digit or 'E', never '#' or '%').
local function recorded(k)
  local rec = redis.call('GET', k)
  if not rec then return nil end
  local b = string.byte(rec, 1)
  if b ~= 35 and b ~= 37 then return rec, '' end
  if string.sub(rec, 2, #fp + 1) ~= fp then return false end
  if b == 35 then return string.sub(rec, #fp + 2), '' end
  local bar = string.find(rec, '|', #fp + 2, true)
  return string.sub(rec, bar + 1), string.sub(rec, #fp + 2, bar - 1)
end

local function opName(k) return string.sub(k, #key + 5) end

local prev, made = recorded(opkey)
if prev == false then
  return redis.error_reply('ERR_OP_CONFLICT 0 op_id=' .. opName(opkey) .. ' answered another request')
end
-- A legacy record of another request is another operation's (only an older worker wrote
-- this one's there, without a fingerprint): it is not this one's outcome.
if not prev and KEYS[3] then
  prev, made = recorded(KEYS[3])
  if not prev then prev = nil end
end
if prev and made ~= '' and fence ~= '' and made ~= fence then
  return redis.error_reply('ERR_OP_FENCED 0 op_id=' .. opName(opkey) .. ' made at fence ' .. made .. ', asked at ' .. fence)
end
if prev then
  if string.byte(prev, 1) == 69 then -- 'E': a remembered failure
    local code, detail = string.match(prev, '^E(%S+) (.*)$')
    return redis.error_reply(code .. ' 1 ' .. detail)
  end
  return {1, prev}
end

local function fmt(n) return string.format('%d', n) end

-- remember stores the operation's outcome under its op id with the request's fingerprint
-- and fence.
local function remember(outcome)
  if fence == '' then
    redis.call('SET', opkey, '#' .. fp .. outcome, 'EX', ttl)
  else
    redis.call('SET', opkey, '%' .. fp .. fence .. '|' .. outcome, 'EX', ttl)
  end
end

local function fail(code, detail)
  remember('E' .. code .. ' ' .. detail)
  return redis.error_reply(code .. ' 0 ' .. detail)
end

local function reindex() return redis.error_reply('ERR_REINDEX 0 ') end

local head = redis.call('HMGET', key, 'v', 'ss', 'on', 'o:0', 'kl')

if op == 'regsku' then
  if head[1] then return fail('ERR_SKU_EXISTS', '') end
  if ARGV[5] ~= '1' then return redis.error_reply('ERR_NOT_LOADED 0 ') end
  redis.call('HSET', key, 'v', '1', 'ss', ARGV[4], 'on', '1', 'o:0', '', 'n', '0', 'kl', KEY_LAYOUT)
  local text = '1\ns\t' .. ARGV[4]
  remember(text)
  return {0, text}
end

if not head[1] then
  return redis.error_reply('ERR_NOT_LOADED 0 ')
end
-- An index in another layout would be walked, and edited, in another order.
if head[5] ~= KEY_LAYOUT then return reindex() end

local names = {s = 'sellable', r = 'reserved', a = 'allocated', h = 'hidden', x = 'shipped', d = 'defective', e = 'external'}
-- held marks the buckets whose units an order holds.
local held = {r = 1, a = 1}

-- State of the read lots: lot -> {m = meta, s, r, a, h, x, d = numbers}; touched lists
-- the lots the operation changed or names, in order of first touch. holder is the order
-- whose holdings the moves change (''); heldLots lists the lots whose holdings change,
-- heldBy their net change (applied once per lot, so a change that releases and
-- allocates in one lot clamps as the model does). A lot's k is its key for the meta m0
-- once known (false: none stored), knew the key Go passed for a new meta m.
-- writes are fields an operation writes besides the lots' (commit writes them).
local st, touched, moves, writes = {}, {}, {}, {}
local holder, heldLots, heldBy = '', nil, nil

-- The candidate index is split into fields o:0 .. o:<on-1> ("chunks"), so an allocation
-- reads only as far as it walks. A load writes chunks of CHUNK records; an edit changes
-- only the chunk its record belongs in, splits a chunk that grew past 2*CHUNK records and
-- drops one that emptied (renaming the chunks after it), so an operation's cost does not
-- grow with the SKU's lots.
local CHUNK = 32
local nchunks = tonumber(head[3])

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
      f[#f + 1] = 'p:' .. lot
    end
  end
  if #f == 0 then return nil end
  local v = redis.call('HMGET', key, unpack(f))
  for i, lot in ipairs(want) do
    local b = (i - 1) * 4
    if not v[b + 1] then return lot end
    -- "r a h x d"; a hash written before the defective bucket has "r a h x".
    local r, a, h, x, d = string.match(v[b + 3], '^(%d+) (%d+) (%d+) (%d+) ?(%d*)$')
    local sv = tonumber(v[b + 2])
    st[lot] = {m = v[b + 1], m0 = v[b + 1], s = sv, s0 = sv, r = tonumber(r), a = tonumber(a), h = tonumber(h), x = tonumber(x), d = tonumber(d) or 0, p = v[b + 4] or ''}
  end
  return nil
end

-- atLoc returns the error reply of a lot (fetched) not stored at wantLoc, nil when it
-- is or no location is named. p:<lot> holds a lot's location; none: the default location.
local function atLoc(lot)
  if wantLoc == '' then return nil end
  local have = st[lot].p
  if have == '' then have = 'default' end
  if have == wantLoc then return nil end
  return fail('ERR_LOCATION', 'lot=' .. lot .. ' location=' .. have .. ' requested=' .. wantLoc)
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
  if holder ~= '' then
    local dh = ((held[to] or 0) - (held[from] or 0)) * qty
    if dh ~= 0 then
      if not heldLots then heldLots, heldBy = {}, {} end
      if not heldBy[lot] then
        heldLots[#heldLots + 1] = lot
        heldBy[lot] = 0
      end
      heldBy[lot] = heldBy[lot] + dh
    end
  end
end

-- Index helpers, created on first need: most operations never edit the index, and
-- defining closures costs on every call.
local ix
-- ch holds the chunks once read (ch[1] is o:0); dirty the ones an edit changed, and
-- shiftFrom the first whose position changed (a split or a drop renames every later one).
local ch, dirty, shiftFrom = nil, {}, nil
local function indexOps()
  if ix then return ix end
  ix = {}
  local function loadChunks()
    if ch then return end
    ch = {head[4]}
    if nchunks > 1 then
      local f = {}
      for i = 1, nchunks - 1 do f[i] = 'o:' .. i end
      local v = redis.call('HMGET', key, unpack(f))
      for i = 1, nchunks - 1 do ch[i + 1] = v[i] end
    end
  end

  -- chunkOf returns the chunk a record with sort key k is or belongs in: the last one
  -- whose first record does not sort after k (sort keys are unique in a SKU; chunks other
  -- than a lone o:0 are never empty).
  local function chunkOf(k)
    loadChunks()
    local i = 1
    while i < #ch and string.sub(ch[i + 1], 1, SORT_LEN) <= k do i = i + 1 end
    return i
  end

  local function shifted(i)
    if not shiftFrom or i < shiftFrom then shiftFrom = i end
  end

  function ix.parseMeta(m)
    return string.match(m, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
  end

  -- Candidate index records (candidates.lua's SORT_LEN, FIELD_AT): the lot's key, its
  -- period, "s:" lot_id "\n" (the lot's sellable field name, so the walk cuts one string
  -- per record).
  function ix.record(k, m, lot)
    local _, _, _, _, _, vf, vt = ix.parseMeta(m)
    return k .. vf .. vt .. 's:' .. lot .. '\n'
  end

  -- dropRecord removes rec, a record as the index holds it, from its chunk.
  function ix.dropRecord(rec)
    local i = chunkOf(string.sub(rec, 1, SORT_LEN))
    local c, from = ch[i], 1
    while true do
      local p = string.find(c, rec, from, true)
      if not p then return end
      if p == 1 or string.byte(c, p - 1) == 10 then -- at a record's start
        c = string.sub(c, 1, p - 1) .. string.sub(c, p + #rec)
        if c == '' and #ch > 1 then
          table.remove(ch, i)
          shifted(i)
        else
          ch[i], dirty[i] = c, true
        end
        return
      end
      from = p + 1
    end
  end

  -- addRecord inserts rec into its chunk, before the first record with a larger sort key.
  function ix.addRecord(rec)
    local k = string.sub(rec, 1, SORT_LEN)
    local i = chunkOf(k)
    local c = ch[i]
    local pos, n = 1, #c
    while pos <= n do
      if string.sub(c, pos, pos + SORT_LEN - 1) > k then break end
      pos = string.find(c, '\n', pos + FIELD_AT, true) + 1
    end
    c = string.sub(c, 1, pos - 1) .. rec .. string.sub(c, pos)
    local _, count = string.gsub(c, '\n', '\n')
    if count <= 2 * CHUNK then
      ch[i], dirty[i] = c, true
      return
    end
    -- Split after CHUNK records.
    pos = 1
    for _ = 1, CHUNK do pos = string.find(c, '\n', pos + FIELD_AT, true) + 1 end
    ch[i] = string.sub(c, 1, pos - 1)
    table.insert(ch, i + 1, string.sub(c, pos))
    shifted(i)
  end
  return ix
end

-- storedKey returns the lot's key for its meta as the hash holds it (m0), from k:<lot>,
-- or nil when k:<lot> is missing or stored for another meta (an older version registered
-- or received the lot).
local function storedKey(lot)
  local l = st[lot]
  if l.k == nil then
    local v = redis.call('HGET', key, 'k:' .. lot)
    l.k = (v and string.sub(v, SORT_LEN + 1) == l.m0 and string.sub(v, 1, SORT_LEN)) or false
  end
  return l.k or nil
end

-- indexLot edits the candidate index (in ch, written by commit) so that it holds the lot
-- as it is now, and makes that the state the index holds (s0, m0, k). The index holds the
-- good lots with sellable stock only, so lots that ran empty (FEFO puts them first) cost
-- an allocation nothing: it changes on the crossings. Called once per lot by commit, and
-- before by a change for the lots its releases touched (which change no meta). Returns
-- false, having changed nothing, when it needs a key it does not have (ERR_REINDEX).
local function indexLot(lot)
  local l = st[lot]
  if (l.s0 > 0) ~= (l.s > 0) or l.dirtyMeta then
    local was = l.s0 > 0 and string.find(l.m0, '^[^\t]*\t1\t') ~= nil
    local now = l.s > 0 and string.find(l.m, '^[^\t]*\t1\t') ~= nil
    local drop = was and (not now or l.dirtyMeta)
    local add = now and (not was or l.dirtyMeta)
    if drop or add or l.dirtyMeta then -- else a crossing of a lot that is no candidate
      local k0
      if drop or not l.knew then
        k0 = storedKey(lot)
        if not k0 then return false end
      end
      -- A new meta comes with its key from Go (reglot, receive) or keeps the lot's (recall).
      local k = l.knew or k0
      local I = indexOps()
      if drop then I.dropRecord(I.record(k0, l.m0, lot)) end
      if add then I.addRecord(I.record(k, l.m, lot)) end
      l.k = k
    end
  end
  l.s0, l.m0, l.knew = l.s, l.m, nil
  return true
end

-- commit writes the touched lots, bumps the version, remembers and returns the result.
local function commit(extra)
  local v = fmt(tonumber(head[1]) + 1)
  local w = {'v', v}
  local out = {v}
  for _, m in ipairs(moves) do out[#out + 1] = m end
  for _, lot in ipairs(touched) do
    local l = st[lot]
    if not indexLot(lot) then return reindex() end
    local n = #w
    if l.dirtyMeta then
      w[n + 1] = 'm:' .. lot; w[n + 2] = l.m
      w[n + 3] = 'k:' .. lot; w[n + 4] = l.k .. l.m
      n = n + 4
    end
    local sv, bv = fmt(l.s), string.format('%d %d %d %d %d', l.r, l.a, l.h, l.x, l.d)
    w[n + 1] = 's:' .. lot
    w[n + 2] = sv
    w[n + 3] = 'b:' .. lot
    w[n + 4] = bv
    if l.p ~= '' then
      out[#out + 1] = 'l\t' .. lot .. '\t' .. l.m .. '\t' .. sv .. '\t' .. bv .. '\t' .. l.p
    else
      out[#out + 1] = 'l\t' .. lot .. '\t' .. l.m .. '\t' .. sv .. '\t' .. bv
    end
  end
  if extra then out[#out + 1] = extra end
  for _, f in ipairs(writes) do w[#w + 1] = f end
  if ch then
    for i = 1, #ch do
      if dirty[i] or (shiftFrom and i >= shiftFrom) then
        w[#w + 1] = 'o:' .. (i - 1); w[#w + 1] = ch[i]
      end
    end
    if shiftFrom then
      w[#w + 1] = 'on'; w[#w + 1] = fmt(#ch)
      if #ch < nchunks then
        local d = {}
        for i = #ch, nchunks - 1 do d[#d + 1] = 'o:' .. i end
        redis.call('HDEL', key, unpack(d))
      end
    end
  end
  for i = 1, #w, 1000 do -- one call unless many chunks were renamed
    redis.call('HSET', key, unpack(w, i, math.min(i + 999, #w)))
  end
  if heldLots then
    for _, lot in ipairs(heldLots) do
      local d = heldBy[lot]
      if d ~= 0 then
        local hk = key .. ':h:' .. lot
        -- A release of more than the holder holds (junban never sends one) clamps at 0.
        if redis.call('HINCRBY', hk, holder, d) <= 0 then redis.call('HDEL', hk, holder) end
      end
    end
  end
  local text = table.concat(out, '\n')
  remember(text)
  return {0, text}
end

-- routeArgs reads a route's arguments from ARGV[at]: the no-split flag, n, then n
-- location/position pairs. Returns pos (location -> position), noSplit and the index of
-- the first argument after them.
local function routeArgs(at)
  local pos, n = {}, tonumber(ARGV[at + 1])
  for i = at + 2, at + 1 + 2 * n, 2 do pos[ARGV[i]] = tonumber(ARGV[i + 1]) end
  return pos, ARGV[at] == '1', at + 2 + 2 * n
end

-- routedCandidates returns a routed allocation's candidates and their sellable: those at
-- the eligible locations (pos: location -> position), ordered by position, then by their
-- key; with noSplit, only the first location's, in that order, whose candidates cover
-- qty. Every candidate is read (chunks and known as walkCandidates takes them). Returns
-- nil, the reason code and its detail when the allocation does not fit.
local function routedCandidates(date, pos, noSplit, qty, need, ss, chunks, known)
  local cand, sell, _, heads = walkCandidates(key, head, date, math.huge, nil, 1024, true, chunks, known)
  local el, sum = {}, 0
  for i = 1, #cand, 1000 do
    local f = {}
    for j = i, math.min(i + 999, #cand) do f[#f + 1] = 'p:' .. candidateLot(cand, j) end
    local v = redis.call('HMGET', key, unpack(f))
    for j = 1, #f do
      local c = i + j - 1
      local loc = v[j] or 'default'
      local p = pos[loc]
      if p then
        el[#el + 1] = {k = string.format('%06d', p) .. string.sub(heads[c], 1, SORT_LEN), f = cand[c], s = sell[c], loc = loc}
        sum = sum + sell[c]
      end
    end
  end
  table.sort(el, function(a, b) return a.k < b.k end)
  local code, detail = refusal(qty, need, sum, ss)
  if code then return nil, code, detail end
  if noSplit then
    -- The first location, in this order, whose candidates cover qty takes it all.
    local by, order, best, chosen = {}, {}, 0, nil
    for _, e in ipairs(el) do
      if e.s > 0 then
        if not by[e.loc] then by[e.loc] = 0; order[#order + 1] = e.loc end
        by[e.loc] = by[e.loc] + e.s
      end
    end
    for _, l in ipairs(order) do
      if by[l] >= qty then chosen = l; break end
      if by[l] > best then best = by[l] end
    end
    if not chosen then
      return nil, 'ERR_SHORTAGE', 'requested=' .. fmt(qty) .. ' available=' .. fmt(best) .. ' no_split'
    end
    local only = {}
    for _, e in ipairs(el) do if e.loc == chosen then only[#only + 1] = e end end
    el = only
  end
  local c2, s2 = {}, {}
  for i, e in ipairs(el) do c2[i], s2[i] = e.f, e.s end
  return c2, s2
end

if op == 'alloc' then
  local qty, date, mode = tonumber(ARGV[4]), ARGV[5], ARGV[6]
  holder = ARGV[7] or ''
  local ss = tonumber(head[2])
  local need = allocNeed(qty, mode, ss)
  if ARGV[8] == 'route' then
    local pos, noSplit = routeArgs(9)
    local c2, s2, detail = routedCandidates(date, pos, noSplit, qty, need, ss)
    if not c2 then return fail(s2, detail) end
    local lots, take = takeLots(c2, s2, qty)
    fetch(lots)
    local to = 'r'
    if mode == 'ship' then to = 'a' end
    for i, lot in ipairs(lots) do move(lot, 's', to, take[i]) end
    return commit()
  end
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

-- moveEach moves the lot/qty pairs ARGV[first..last] from one bucket to another, each
-- after checking that its bucket holds it; returns the error reply of the first that
-- does not.
local function moveEach(first, last, from, to)
  for i = first, last, 2 do
    local lot, qty = ARGV[i], tonumber(ARGV[i + 1])
    if st[lot][from] < qty then
      return fail('ERR_INSUFFICIENT', 'lot=' .. lot .. ' ' .. names[from] .. '=' .. fmt(st[lot][from]) .. ' requested=' .. fmt(qty))
    end
    move(lot, from, to, qty)
  end
  return nil
end

-- lotsOf lists the lots of the lot/qty pairs ARGV[first..last].
local function lotsOf(first, last)
  local lots = {}
  for i = first, last, 2 do lots[#lots + 1] = ARGV[i] end
  return lots
end

if op == 'move' then
  local from, to, reason = ARGV[4], ARGV[5], ARGV[7]
  holder = ARGV[6]
  local split = 9 + 2 * tonumber(ARGV[8]) -- the first back pair
  local unknown = fetch(lotsOf(9, #ARGV))
  if unknown then return fail('ERR_UNKNOWN_LOT', 'lot=' .. unknown) end
  for i = 9, split - 1, 2 do
    local e = atLoc(ARGV[i])
    if e then return e end
  end
  local refused = moveEach(9, split - 1, from, to) or moveEach(split, #ARGV, to, from)
  if refused then return refused end
  if reason ~= '' then return commit('c\t' .. reason) end
  return commit()
end

if op == 'change' then
  -- A routed change: its route's arguments first (o: how many).
  local o, pos, noSplit = 0, nil, false
  if ARGV[4] == 'route' then
    local nxt
    pos, noSplit, nxt = routeArgs(5)
    o = nxt - 4
  end
  local mode, date = ARGV[4 + o], ARGV[5 + o]
  holder = ARGV[6 + o]
  local b = 'r'
  if mode == 'ship' then b = 'a' end
  local split = 8 + o + 2 * tonumber(ARGV[7 + o]) -- the first allocation
  local unknown = fetch(lotsOf(8 + o, split - 1))
  if unknown then return fail('ERR_UNKNOWN_LOT', 'lot=' .. unknown) end
  local refused = moveEach(8 + o, split - 1, b, 's')
  if refused then return refused end
  -- The allocations walk the index as the releases left it: a lot they gave units back
  -- to from zero is a candidate again, in its place.
  for _, lot in ipairs(touched) do
    if not indexLot(lot) then return reindex() end
  end
  local ss = tonumber(head[2])
  local function first(lot)
    fetch({lot})
    return st[lot].s
  end
  for i = split, #ARGV do
    local qty = tonumber(ARGV[i])
    local need = allocNeed(qty, mode, ss)
    local cand, sell
    if pos then
      local code, detail
      cand, code, detail = routedCandidates(date, pos, noSplit, qty, need, ss, ch, st)
      if not cand then return fail(code, detail) end
      sell = code
    else
      local sum
      cand, sell, sum = walkCandidates(key, head, date, need, first, 1, false, ch, st)
      local code, detail = refusal(qty, need, sum, ss)
      if code then return fail(code, detail) end
    end
    local lots, take = takeLots(cand, sell, qty)
    fetch(lots)
    for j, lot in ipairs(lots) do move(lot, 's', b, take[j]) end
  end
  return commit()
end

if op == 'move_alloc' then
  -- A line's allocation moved to one location: the releases as a change's, then their
  -- sum allocated at that location alone (a route of one location), all or nothing.
  local to, mode, date = ARGV[4], ARGV[5], ARGV[6]
  holder = ARGV[7]
  local b = 'r'
  if mode == 'ship' then b = 'a' end
  local unknown = fetch(lotsOf(9, #ARGV))
  if unknown then return fail('ERR_UNKNOWN_LOT', 'lot=' .. unknown) end
  local refused = moveEach(9, #ARGV, b, 's')
  if refused then return refused end
  for _, lot in ipairs(touched) do
    if not indexLot(lot) then return reindex() end
  end
  local qty = 0
  for i = 10, #ARGV, 2 do qty = qty + tonumber(ARGV[i]) end
  local ss = tonumber(head[2])
  local cand, sell, detail = routedCandidates(date, {[to] = 0}, false, qty, allocNeed(qty, mode, ss), ss, ch, st)
  if not cand then return fail(sell, detail .. ' location=' .. to) end
  local lots, take = takeLots(cand, sell, qty)
  fetch(lots)
  for j, lot in ipairs(lots) do move(lot, 's', b, take[j]) end
  return commit()
end

if op == 'ss' then
  local v = fmt(tonumber(head[1]) + 1)
  redis.call('HSET', key, 'v', v, 'ss', ARGV[4])
  local text = v .. '\ns\t' .. ARGV[4]
  remember(text)
  return {0, text}
end

if op == 'reglot' then
  local lot = ARGV[4]
  if redis.call('HEXISTS', key, 'm:' .. lot) == 1 then return fail('ERR_LOT_EXISTS', 'lot=' .. lot) end
  -- n is the next registration number; a hash loaded before it existed has none, so it
  -- is found once from the lots' metas.
  local reg = tonumber(redis.call('HGET', key, 'n'))
  if not reg then
    reg = 0
    local all = redis.call('HGETALL', key)
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'm:' then
        local r = tonumber(string.match(all[i + 1], '^[^\t]*\t[^\t]*\t[^\t]*\t([^\t]*)\t'))
        if r >= reg then reg = r + 1 end
      end
    end
  end
  if reg > 999999999999999 then -- the index's 15 digits (layout.go's MaxRegSeq)
    return fail('ERR_LOT_STATE', 'lot=' .. lot .. ' no registration number left after ' .. fmt(reg - 1))
  end
  -- Go computed the keys for the numbers from the one it expected the lot to get on.
  local k = ARGV[13 + reg - tonumber(ARGV[12])]
  if reg < tonumber(ARGV[12]) or not k then return redis.error_reply('ERR_REG_SEQ 0 ' .. fmt(reg)) end
  local m = table.concat({ARGV[5], ARGV[6], ARGV[7], fmt(reg), ARGV[8], ARGV[9], ARGV[10]}, '\t')
  st[lot] = {m = m, m0 = m, s = 0, s0 = 0, r = 0, a = 0, h = 0, x = 0, d = 0, dirtyMeta = true, knew = k, p = wantLoc}
  move(lot, 'e', 's', tonumber(ARGV[11]))
  writes = {'n', fmt(reg + 1)}
  -- The default location is stored as none (Go passes it so): a lot without p: is there.
  if wantLoc ~= '' then writes[3], writes[4] = 'p:' .. lot, wantLoc end
  return commit()
end

local lot = ARGV[4]
if fetch({lot}) then return fail('ERR_UNKNOWN_LOT', 'lot=' .. lot) end
do
  local e = atLoc(lot)
  if e then return e end
end
local l = touch(lot)

if op == 'adjust' then
  local delta = tonumber(ARGV[5])
  if delta > 0 then
    move(lot, 'e', 's', delta)
  else
    if l.s < -delta then
      return fail('ERR_INSUFFICIENT', 'lot=' .. lot .. ' sellable=' .. fmt(l.s) .. ' requested=' .. fmt(-delta))
    end
    move(lot, 's', 'e', -delta)
  end
  return commit('c\t' .. ARGV[6])
end

if op == 'receive' then
  local kind, good, _, reg, arr, vf, vt = indexOps().parseMeta(l.m)
  if kind ~= 'planned' then
    return fail('ERR_LOT_STATE', 'lot=' .. lot .. ' kind=' .. kind)
  end
  -- Go computed the key with the registration number it read.
  if tonumber(ARGV[7]) ~= tonumber(reg) then return redis.error_reply('ERR_REG_SEQ 0 ' .. reg) end
  local bb, counted = ARGV[5], tonumber(ARGV[6])
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
  l.dirtyMeta, l.knew = true, ARGV[8]
  return commit()
end

if op == 'recall' then
  local kind, good, bb, reg, arr, vf, vt = indexOps().parseMeta(l.m)
  if good == '1' then
    l.m = table.concat({kind, '0', bb, reg, arr, vf, vt}, '\t')
    l.dirtyMeta = true
  end
  if l.s > 0 then move(lot, 's', 'd', l.s) end
  if l.h > 0 then move(lot, 'h', 'd', l.h) end
  -- The orders holding the lot's reserved and allocated units, by lcid: the first
  -- max_holders of them, and their count.
  local hs = redis.call('HGETALL', key .. ':h:' .. lot)
  local list = {}
  for i = 1, #hs, 2 do list[#list + 1] = hs[i] end
  table.sort(list)
  local byID = {}
  for i = 1, #hs, 2 do byID[hs[i]] = hs[i + 1] end
  local out = {'c\t' .. ARGV[5], 'n\t' .. fmt(#list)}
  for i = 1, math.min(#list, tonumber(ARGV[6])) do
    out[#out + 1] = 'k\t' .. list[i] .. '\t' .. byID[list[i]]
  end
  return commit(table.concat(out, '\n'))
end

return redis.error_reply('ERR_INVALID_REQUEST 0 unknown operation ' .. tostring(op))

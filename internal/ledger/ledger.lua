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
--            [route nosplit n loc1 pos1 ... locn posn [plan k ploc1 ... plock]]
--                                           a routed allocation (stock.Route): only lots at
--                                           the n locations, by position, then key;
--                                           nosplit 1: all from one location; plan: the
--                                           k planned locations must cover qty
--                                           (ERR_STALE_PLAN)
--   move     from to holder reason n lot1 qty1 ... lotn qtyn back1 bqty1 ...
--                                           bucket codes s r a h x d (release, confirm,
--                                           ship, undo, hold, release hold, damage, return);
--                                           the n lots move from -> to, then the back
--                                           lots to -> from (the undo of a change)
--   change   [route nosplit m loc1 pos1 ... [plan k ...]] mode date holder n lot1 qty1 ... lotn qtyn aqty1 aqty2 ...
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
--   ss       safety_stock                   with a location (ARGV[1]'s): that location's,
--                                           kept in sl (0 removes it)
--   transfer transfer_id from to qty arrives_at reg max_lots key1 ... keyn
--                                           takes qty from the good on-hand lots at from
--                                           (index order), sellable -> transit, into new
--                                           planned lots at to (transit -> sellable);
--                                           reg and the keys as reglot's, one number per
--                                           lot taken; t:<transfer_id> records it
--   treceive transfer_id counted n lot1 key1 ... lotn keyn
--                                           the transfer's transit lots (as Go read its
--                                           record) become on hand, keyi the on-hand key
--                                           of loti; the shortfall moves sellable ->
--                                           defective, last lot first
--   tcancel  transfer_id                    the transit lots' units go back to their
--                                           source lots (sellable -> transit -> sellable)
--   regsku   safety_stock create            create 1: make the SKU when Redis lacks it
--   smove    as move                        a SKU's move (hold, release hold, damage):
--                                           fills the queue after it
--   walloc   qty target_date mode holder line class at
--                                           a backorder: what the candidates give now less
--                                           the queue's demand, the rest queued
--   dequeue  holder line qty                the line waits for qty less (0: nothing)
--   fill     (none)                         fills the queue
--
-- The queue of waiting lines (docs/ledger.md, "Waiting demand"): KEYS[1]..':q' (sorted
-- set), KEYS[1]..':qe' (hash) and the SKU hash's qw and qn, in the SKU's hash tag.
--
-- holder ("" for none) is the order whose holdings the moves change: a move into
-- reserved/allocated adds to its entry in <key>:h:<lot> (hash lcid -> units), a move out
-- of them takes from it; a recall lists the lot's entries.
--
-- The script never builds a lot's key in the allocation order (layout.go's allocKey): it
-- copies the key Go passed (reglot, receive) or the one stored in k:<lot>, which holds for
-- as long as the lot's meta is the one stored after it.
--
-- Returns {replayed 0|1, result text} (decodeResult in layout.go parses the text; a
-- transfer's operations end it with the transfer as they left it, transferLine).
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
--                            (reglot, transfer: other lots were registered meanwhile;
--                            receive: Go did not know it; treceive, with reg -1: the
--                            transfer's lots are not the ones Go read): it computes the
--                            keys from <reg> (treceive: reads the record again) and runs
--                            the operation again.

local key, opkey, op, ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
-- ARGV[1] is the operation, or the operation, a tab and a location (wantLoc): the location
-- a registered lot is stored at (reglot), where the lots an operation names must be
-- (ERR_LOCATION otherwise: receive, adjust, recall, move), or whose safety stock ss sets.
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

local head = redis.call('HMGET', key, 'v', 'ss', 'on', 'o:0', 'kl', 'sl', 'qw')
-- queued is what the SKU's queue of waiting lines waits for (qw; absent: none): every
-- allocation sees the candidates' sellable less it (docs/ledger.md, "Waiting demand").
local queued = tonumber(head[7]) or 0

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

local names = {s = 'sellable', r = 'reserved', a = 'allocated', h = 'hidden', x = 'shipped', d = 'defective', e = 'external', t = 'transit'}
-- held marks the buckets whose units an order holds.
local held = {r = 1, a = 1}

-- State of the read lots: lot -> {m = meta, s, r, a, h, x, d = numbers}; touched lists
-- the lots the operation changed or names, in order of first touch. holder is the order
-- whose holdings the moves change (''; a fill sets its line's order while it moves);
-- heldLots lists the holder/lot pairs whose holdings change, heldBy their net change by
-- holder .. '\n' .. lot (applied once per pair, so a change that releases and
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

-- outside marks the move ends that are no bucket of a lot: external (the outside world)
-- and transit (a transfer's units between two locations' lots).
local outside = {e = true, t = true}

local function move(lot, from, to, qty)
  local l = touch(lot)
  if not outside[from] then l[from] = l[from] - qty end
  if not outside[to] then l[to] = l[to] + qty end
  moves[#moves + 1] = string.format('m\t%s\t%s\t%s\t%d', lot, names[from], names[to], qty)
  if holder ~= '' then
    local dh = ((held[to] or 0) - (held[from] or 0)) * qty
    if dh ~= 0 then
      if not heldLots then heldLots, heldBy = {}, {} end
      local hl = holder .. '\n' .. lot
      if not heldBy[hl] then
        heldLots[#heldLots + 1] = {holder, lot}
        heldBy[hl] = 0
      end
      heldBy[hl] = heldBy[hl] + dh
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
-- A SKU's operation (smove: a hold, its release, a damage) but a recall (it only takes
-- stock, and its result has no room for fills) and fill fill the queue first
-- (fillQueue, defined below); an order's do not: its event may still move them back, and
-- its step fills once it has succeeded. The queue's writes (qwrite) wait until nothing
-- can fail.
local fillQueue, qwrite, qtext = nil, {}, {}
local fills = {smove = true, receive = true, adjust = true, reglot = true, ss = true,
  transfer = true, treceive = true, tcancel = true, fill = true}
local function commit(extra)
  if queued > 0 and fills[op] then
    if not fillQueue() then return reindex() end
  end
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
  for _, t in ipairs(qtext) do out[#out + 1] = t end
  for _, f in ipairs(writes) do w[#w + 1] = f end
  for _, q in ipairs(qwrite) do q() end
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
    for _, hl in ipairs(heldLots) do
      local who, lot = hl[1], hl[2]
      local d = heldBy[who .. '\n' .. lot]
      if d ~= 0 then
        local hk = key .. ':h:' .. lot
        -- A release of more than the holder holds (junban never sends one) clamps at 0.
        if redis.call('HINCRBY', hk, who, d) <= 0 then redis.call('HDEL', hk, who) end
      end
    end
  end
  local text = table.concat(out, '\n')
  remember(text)
  return {0, text}
end

-- queuedRefusal is refusal (candidates.lua) over what the queue's demand leaves of the
-- candidates' sum; queuedCapRefusal capRefusal so. Their details end with the demand.
local function queuedRefusal(qty, need, sum, ss)
  if queued == 0 then return refusal(qty, need, sum, ss) end
  local code, detail = refusal(qty, need, math.max(0, sum - queued), ss)
  if code then detail = detail .. ' queued=' .. fmt(queued) end
  return code, detail
end

local function queuedCapRefusal(qty, sum, total)
  if queued == 0 then return capRefusal(qty, sum, total) end
  local code, detail = capRefusal(qty, math.max(0, sum - queued), math.max(0, total - queued))
  if code then detail = detail .. ' queued=' .. fmt(queued) end
  return code, detail
end

-- routeArgs reads a route's arguments from ARGV[at]: the no-split flag, n, then n
-- location/position pairs, then optionally 'plan', k and k planned locations. Returns pos
-- (location -> position), noSplit, the index of the first argument after them and plan
-- (location -> true; nil for none).
local function routeArgs(at)
  local pos, n = {}, tonumber(ARGV[at + 1])
  for i = at + 2, at + 1 + 2 * n, 2 do pos[ARGV[i]] = tonumber(ARGV[i + 1]) end
  local nxt, plan = at + 2 + 2 * n, nil
  if ARGV[nxt] == 'plan' then
    plan = {}
    local k = tonumber(ARGV[nxt + 1])
    for i = nxt + 2, nxt + 1 + k do plan[ARGV[i]] = true end
    nxt = nxt + 2 + k
  end
  return pos, ARGV[at] == '1', nxt, plan
end

-- topCovers tells whether the candidates read so far at the top position (el's entries
-- with top set, in the order read, which is the allocation order among them) give qty
-- as the whole walk would: their first qty units, taken without caps, within the caps
-- (lss: location -> safety stock; nil: none) that the read candidates alone give. Later
-- candidates only raise a location's sellable, so its cap, and come after these in the
-- order: the lots taken cannot change.
local function topCovers(el, qty, lss)
  local by, used, rem = {}, {}, qty
  for _, e in ipairs(el) do
    if e.top then
      by[e.loc] = (by[e.loc] or 0) + e.s
      local t = math.min(e.s, rem)
      used[e.loc] = (used[e.loc] or 0) + t
      rem = rem - t
    end
  end
  if rem > 0 then return false end
  if lss then
    for l, u in pairs(used) do
      if u > by[l] - (lss[l] or 0) then return false end
    end
  end
  return true
end

-- capsCover tells whether the caps of the candidates read so far (el; lss: location ->
-- safety stock, nil: no caps) sum to n or more: with a waiting demand, the top location
-- covering qty does not make the caps' sum cover qty and the demand, and the refusal
-- reads the sum.
local function capsCover(el, n, lss)
  if not lss then return true end
  local by, total = {}, 0
  for _, e in ipairs(el) do by[e.loc] = (by[e.loc] or 0) + e.s end
  for l, s in pairs(by) do total = total + math.max(0, s - (lss[l] or 0)) end
  return total >= n
end

-- oneLocation keeps the entries of the first location, in el's order, whose candidates
-- cover qty (under its cap, with caps); returns nil, the reason code and its detail when
-- none does: ERR_SAFETY_STOCK when one's sellable would have covered it but its cap
-- does not, ERR_SHORTAGE otherwise.
local function oneLocation(el, qty, caps)
  local by, order, best, chosen, uncapped = {}, {}, 0, nil, false
  for _, e in ipairs(el) do
    if e.s > 0 then
      if not by[e.loc] then by[e.loc] = 0; order[#order + 1] = e.loc end
      by[e.loc] = by[e.loc] + e.s
    end
  end
  for _, l in ipairs(order) do
    local have = by[l]
    if caps then have = caps[l] end
    if have >= qty then chosen = l; break end
    if have > best then best = have end
    if by[l] >= qty then uncapped = true end
  end
  if not chosen then
    local code = 'ERR_SHORTAGE'
    if uncapped then code = 'ERR_SAFETY_STOCK' end
    return nil, code, 'requested=' .. fmt(qty) .. ' available=' .. fmt(best) .. ' no_split'
  end
  local only = {}
  for _, e in ipairs(el) do if e.loc == chosen then only[#only + 1] = e end end
  return only
end

-- routedCandidates returns a routed allocation's candidates, their sellable, their
-- locations and the caps of a ship allocation (lss: location -> safety stock, nil when
-- none applies; caps nil then): those at the eligible locations (pos: location ->
-- position; nil: every location at one position, an unrouted allocation), ordered by
-- position, then by their key; with noSplit, only the first location's, in that order,
-- whose candidates cover qty (chunks and known as walkCandidates takes them). Returns
-- nil, the reason code and its detail when the allocation does not fit.
local function routedCandidates(date, pos, noSplit, qty, need, ss, plan, chunks, known, lss)
  -- The walk reads the candidates in the allocation order and their locations, chunk by
  -- chunk. Without noSplit or a plan it stops once the eligible candidates read cover need
  -- and those at the first position (top) alone cover qty under their caps (topCovers):
  -- every later candidate comes after them in the order, so the lots taken are the same
  -- as after reading them all, and the refusal checks pass either way. Otherwise it
  -- reads every candidate.
  local top = 0
  if pos then
    top = math.huge
    for _, p in pairs(pos) do top = math.min(top, p) end
  end
  local el, sum, atTop = {}, 0, 0
  local early = not noSplit and not plan
  local function classify(cand, sell, heads, from)
    for i = from, #cand, 1000 do
      local f = {}
      for j = i, math.min(i + 999, #cand) do f[#f + 1] = 'p:' .. candidateLot(cand, j) end
      local v = redis.call('HMGET', key, unpack(f))
      for j = 1, #f do
        local c = i + j - 1
        local loc = v[j] or 'default'
        local p = 0
        if pos then p = pos[loc] end
        if p then
          el[#el + 1] = {k = string.format('%06d', p) .. string.sub(heads[c], 1, SORT_LEN), f = cand[c], s = sell[c], loc = loc, top = p == top}
          sum = sum + sell[c]
          if p == top then atTop = atTop + sell[c] end
        end
      end
    end
    return early and sum >= need + queued and atTop >= qty and topCovers(el, qty, lss) and capsCover(el, qty + queued, lss)
  end
  local chunk0 = 1024
  if early then chunk0 = 4 end
  walkCandidates(key, head, date, math.huge, nil, chunk0, true, chunks, known, classify)
  table.sort(el, function(a, b) return a.k < b.k end)
  local code, detail = queuedRefusal(qty, need, sum, ss)
  if code then return nil, code, detail end
  local caps
  if lss then
    local ls, ss2 = {}, {}
    for i, e in ipairs(el) do ls[i], ss2[i] = e.loc, e.s end
    local total
    caps, total = capsOf(ls, ss2, lss)
    code, detail = queuedCapRefusal(qty, sum, total)
    if code then return nil, code, detail end
  end
  if plan then
    local by, planned = {}, 0
    for _, e in ipairs(el) do if plan[e.loc] then by[e.loc] = (by[e.loc] or 0) + e.s end end
    for l, s in pairs(by) do
      if caps then s = caps[l] end
      planned = planned + s
    end
    if planned < qty then
      return nil, 'ERR_STALE_PLAN', 'requested=' .. fmt(qty) .. ' planned=' .. fmt(planned)
    end
  end
  if noSplit then
    el, code, detail = oneLocation(el, qty, caps)
    if not el then return nil, code, detail end
  end
  local c2, s2, l2 = {}, {}, {}
  for i, e in ipairs(el) do c2[i], s2[i], l2[i] = e.f, e.s, e.loc end
  return c2, s2, l2, caps
end

-- allocateFrom moves qty from the candidates (routedCandidates' answer) to bucket to.
local function allocateFrom(c2, s2, l2, caps, qty, to)
  local lots, take = takeLots(c2, s2, qty, l2, caps)
  fetch(lots)
  for i, lot in ipairs(lots) do move(lot, 's', to, take[i]) end
end

-- Waiting demand (docs/ledger.md, "Waiting demand"). The queue is the sorted set <key>:q
-- of "holder \t line", scored by class (higher first) and the SKU's sequence qn, and the
-- hash <key>:qe of each entry's "want \t mode \t date \t class \t seq \t at"; qw in the SKU
-- hash is the sum of the wants. The queue's writes wait in qwrite for commit.
local qkey, qekey = key .. ':q', key .. ':qe'
-- MAX_FILLS is stock.MaxResultFills, a transfer's operations' stock.MaxTransferFills.
local MAX_CLASS, MAX_FILLS = 9, 8
if op == 'transfer' or op == 'treceive' or op == 'tcancel' then MAX_FILLS = 2 end

local function qscore(class, seq) return string.format('%d', (MAX_CLASS - class) * 1e13 + seq) end

local function bucketOf(mode)
  if mode == 'ship' then return 'a' end
  return 'r'
end

-- takeable returns what an allocation of mode on date could take now before the
-- queue's demand (the candidates' sellable, less the safety stock for ship; may be
-- negative), the candidates and their sellable, and for ship with locations' safety
-- stocks their locations, caps and the caps' sum (nil otherwise). The walk reads the
-- index as the operation left it: its touched lots are indexed first.
local function takeable(date, mode)
  for _, lot in ipairs(touched) do
    if not indexLot(lot) then return nil end
  end
  local cand, sell, sum = walkCandidates(key, head, date, math.huge, nil, 1024, false, ch, st)
  local avail = sum
  if mode == 'ship' then avail = avail - tonumber(head[2]) end
  local lss = locSafety(head[6], mode)
  if not lss or #cand == 0 then return avail, cand, sell end
  -- A lot the operation read (or registered) has its location in st; the others' p:.
  local locs, f, at = {}, {}, {}
  for i = 1, #cand do
    local l = st[candidateLot(cand, i)]
    if l then
      locs[i] = l.p
      if locs[i] == '' then locs[i] = 'default' end
    else
      f[#f + 1] = 'p:' .. candidateLot(cand, i)
      at[#at + 1] = i
    end
  end
  for i = 1, #f, 1000 do
    local v = redis.call('HMGET', key, unpack(f, i, math.min(i + 999, #f)))
    for j = 1, #v do locs[at[i + j - 1]] = v[j] or 'default' end
  end
  local caps, total = capsOf(locs, sell, lss)
  return avail, cand, sell, locs, caps, total
end

-- takeFor moves qty of the candidates (takeable's) into mode's bucket as who's; returns
-- the lots and quantities taken as "lot \t qty" pairs.
local function takeFor(who, mode, qty, cand, sell, locs, caps)
  local lots, take = takeLots(cand, sell, qty, locs, caps)
  fetch(lots)
  local saved, out = holder, {}
  holder = who
  for i, lot in ipairs(lots) do
    move(lot, 's', bucketOf(mode), take[i])
    out[#out + 1] = lot .. '\t' .. fmt(take[i])
  end
  holder = saved
  return table.concat(out, '\t')
end

-- setWant queues the entry mem's new want (its other fields rest: "mode \t date \t class
-- \t seq \t at"), or its removal at 0, and says the entry as it leaves it (a Q line).
local function setWant(mem, want, rest)
  qtext[#qtext + 1] = 'Q\t' .. mem .. '\t' .. fmt(want) .. '\t' .. rest
  if want == 0 then
    qwrite[#qwrite + 1] = function()
      redis.call('ZREM', qkey, mem)
      redis.call('HDEL', qekey, mem)
    end
  else
    qwrite[#qwrite + 1] = function() redis.call('HSET', qekey, mem, fmt(want) .. '\t' .. rest) end
  end
end

-- fillQueue serves the queue from its head: each line gets what an allocation of its
-- mode on its date could take now (the queue's demand is not held back from it), up to
-- its want, in allocation order; a line that gets nothing is passed over. At most
-- MAX_FILLS lines (then an F line says more may be filled). Returns false when an index
-- edit needs a key it lacks (ERR_REINDEX).
fillQueue = function()
  -- The queue is read in chunks, so a fill that ends after MAX_FILLS lines reads no
  -- further than it serves.
  local n, members, vals, base = redis.call('ZCARD', qkey), {}, {}, 0
  local fills, dry = 0, {}
  for i = 1, n do
    if fills == MAX_FILLS then
      qtext[#qtext + 1] = 'F'
      break
    end
    if i > base + #members then
      base = i - 1
      members = redis.call('ZRANGE', qkey, base, base + 63)
      vals = redis.call('HMGET', qekey, unpack(members))
    end
    local mem = members[i - base]
    local want, mode, date, rest = string.match(vals[i - base], '^(%d+)\t([^\t]*)\t([^\t]*)\t(.*)$')
    want = tonumber(want)
    -- A fill only takes: a mode and date that had nothing left has nothing later.
    if not dry[mode .. date] then
      local avail, cand, sell, locs, caps, total = takeable(date, mode)
      if not avail then return false end
      if caps then avail = math.min(avail, total) end
      local take = math.min(want, avail)
      if take <= 0 then
        dry[mode .. date] = true
      else
        local who, line = string.match(mem, '^([^\t]*)\t(.*)$')
        qtext[#qtext + 1] = 'f\t' .. who .. '\t' .. line .. '\t' .. fmt(take) .. '\t' .. takeFor(who, mode, take, cand, sell, locs, caps)
        fills = fills + 1
        queued = queued - take
        setWant(mem, want - take, mode .. '\t' .. date .. '\t' .. rest)
      end
    end
  end
  for _, lot in ipairs(touched) do
    if not indexLot(lot) then return false end
  end
  writes[#writes + 1] = 'qw'
  writes[#writes + 1] = fmt(queued)
  return true
end

if op == 'walloc' then
  -- A backorder: what the candidates give now less the queue's demand, the rest queued.
  local qty, date, mode, line, class, at = tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[8], tonumber(ARGV[9]), ARGV[10]
  holder = ARGV[7]
  local mem = holder .. '\t' .. line
  if redis.call('HEXISTS', qekey, mem) == 1 then
    return fail('ERR_QUEUED', 'holder=' .. holder .. ' line=' .. line)
  end
  local avail, cand, sell, locs, caps, total = takeable(date, mode)
  if not avail then return reindex() end
  avail = avail - queued
  if caps then avail = math.min(avail, total - queued) end
  local take = math.max(0, math.min(qty, avail))
  if take > 0 then takeFor(holder, mode, take, cand, sell, locs, caps) end
  local left = qty - take
  if left > 0 then
    local seq = (tonumber(redis.call('HGET', key, 'qn')) or 0) + 1
    local score = qscore(class, seq)
    local pos = redis.call('ZCOUNT', qkey, '-inf', '(' .. score) + 1
    queued = queued + left
    writes[#writes + 1] = 'qn'; writes[#writes + 1] = fmt(seq)
    writes[#writes + 1] = 'qw'; writes[#writes + 1] = fmt(queued)
    local fields = fmt(left) .. '\t' .. mode .. '\t' .. date .. '\t' .. fmt(class) .. '\t' .. fmt(seq) .. '\t' .. at
    qwrite[#qwrite + 1] = function()
      redis.call('ZADD', qkey, score, mem)
      redis.call('HSET', qekey, mem, fields)
    end
    qtext[#qtext + 1] = 'q\t' .. fmt(left) .. '\t' .. fmt(pos) .. '\t0'
    qtext[#qtext + 1] = 'Q\t' .. mem .. '\t' .. fields
  end
  return commit()
end

if op == 'dequeue' then
  local who, line, q = ARGV[4], ARGV[5], tonumber(ARGV[6])
  local mem = who .. '\t' .. line
  local v = redis.call('HGET', qekey, mem)
  if v then
    local want, rest = string.match(v, '^(%d+)\t(.*)$')
    want = tonumber(want)
    local off = want
    if q ~= 0 then off = math.min(q, want) end
    queued = queued - off
    writes[#writes + 1] = 'qw'; writes[#writes + 1] = fmt(queued)
    qtext[#qtext + 1] = 'q\t' .. fmt(want - off) .. '\t0\t' .. fmt(off)
    setWant(mem, want - off, rest)
  end
  return commit()
end

if op == 'fill' then return commit() end

if op == 'alloc' then
  local qty, date, mode = tonumber(ARGV[4]), ARGV[5], ARGV[6]
  holder = ARGV[7] or ''
  local ss = tonumber(head[2])
  local need = allocNeed(qty, mode, ss)
  local to = 'r'
  if mode == 'ship' then to = 'a' end
  local lss = locSafety(head[6], mode)
  -- A routed allocation, or one that locations' safety stocks cap, reads the
  -- candidates' locations.
  if ARGV[8] == 'route' or lss then
    local pos, noSplit, plan = nil, false, nil
    if ARGV[8] == 'route' then
      local nxt
      pos, noSplit, nxt, plan = routeArgs(9)
    end
    local c2, s2, l2, caps = routedCandidates(date, pos, noSplit, qty, need, ss, plan, nil, nil, lss)
    if not c2 then return fail(s2, l2) end
    allocateFrom(c2, s2, l2, caps, qty, to)
    return commit()
  end
  local cand, sell, sum = walkCandidates(key, head, date, need + queued, function(lot)
    fetch({lot})
    return st[lot].s
  end, 1)
  local code, detail = queuedRefusal(qty, need, sum, ss)
  if code then return fail(code, detail) end
  local lots, take = takeLots(cand, sell, qty)
  if #lots > 1 or not st[lots[1]] then fetch(lots) end
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

if op == 'move' or op == 'smove' then
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
  local o, pos, noSplit, plan = 0, nil, false, nil
  if ARGV[4] == 'route' then
    local nxt
    pos, noSplit, nxt, plan = routeArgs(5)
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
  local lss = locSafety(head[6], mode)
  local function first(lot)
    fetch({lot})
    return st[lot].s
  end
  for i = split, #ARGV do
    local qty = tonumber(ARGV[i])
    local need = allocNeed(qty, mode, ss)
    if pos or lss then
      local c2, s2, l2, caps = routedCandidates(date, pos, noSplit, qty, need, ss, plan, ch, st, lss)
      if not c2 then return fail(s2, l2) end
      allocateFrom(c2, s2, l2, caps, qty, b)
    else
      local cand, sell, sum = walkCandidates(key, head, date, need + queued, first, 1, false, ch, st)
      local code, detail = queuedRefusal(qty, need, sum, ss)
      if code then return fail(code, detail) end
      local lots, take = takeLots(cand, sell, qty)
      fetch(lots)
      for j, lot in ipairs(lots) do move(lot, 's', b, take[j]) end
    end
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
  local c2, s2, l2, caps = routedCandidates(date, {[to] = 0}, false, qty, allocNeed(qty, mode, ss), ss, nil, ch, st, locSafety(head[6], mode))
  if not c2 then return fail(s2, l2 .. ' location=' .. to) end
  allocateFrom(c2, s2, l2, caps, qty, b)
  return commit()
end

if op == 'ss' then
  -- Through commit: a lower safety stock may fill the queue.
  if wantLoc == '' then
    head[2] = ARGV[4]
    writes[#writes + 1] = 'ss'; writes[#writes + 1] = ARGV[4]
    return commit('s\t' .. ARGV[4])
  else
    -- A location's safety stock: its entry in sl, by location id (0 removes it).
    local m, ids = {}, {}
    for loc, n in string.gmatch(head[6] or '', '([^\t]+)\t(%d+)') do m[loc] = n end
    m[wantLoc] = nil
    if ARGV[4] ~= '0' then m[wantLoc] = ARGV[4] end
    for loc in pairs(m) do ids[#ids + 1] = loc end
    table.sort(ids)
    local out = {}
    for _, loc in ipairs(ids) do out[#out + 1] = loc .. '\t' .. m[loc] end
    head[6] = table.concat(out, '\t')
    writes[#writes + 1] = 'sl'; writes[#writes + 1] = head[6]
    return commit('s\t' .. ARGV[4] .. '\nS\t' .. wantLoc)
  end
end

-- nextReg returns the next registration number, n; a hash loaded before it existed has
-- none, so it is found once from the lots' metas.
local function nextReg()
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
  return reg
end

if op == 'reglot' then
  local lot = ARGV[4]
  if redis.call('HEXISTS', key, 'm:' .. lot) == 1 then return fail('ERR_LOT_EXISTS', 'lot=' .. lot) end
  local reg = nextReg()
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

-- Transfers (docs/ledger.md, "Transfers"). t:<transfer_id> holds a transfer:
-- "state \t from \t to", then "source \t transit \t qty" per lot taken (stock.EncodeTransfer).

local function transferText(state, t)
  local out = {state .. '\t' .. t.from .. '\t' .. t.to}
  for _, x in ipairs(t.lots) do out[#out + 1] = x.src .. '\t' .. x.tl .. '\t' .. fmt(x.qty) end
  return table.concat(out, '\n')
end

-- transferLine is the result's line of the transfer as the operation left it:
-- "t \t id \t state \t from \t to", then "\t source \t transit \t qty" per lot.
local function transferLine(tid, state, t)
  local out = {'t', tid, state, t.from, t.to}
  for _, x in ipairs(t.lots) do
    out[#out + 1] = x.src; out[#out + 1] = x.tl; out[#out + 1] = fmt(x.qty)
  end
  return table.concat(out, '\t')
end

-- transferOf returns the transfer in transit by id with the units it sent, or nil and
-- the error reply of its absence or its state.
local function transferOf(tid)
  local rec = redis.call('HGET', key, 't:' .. tid)
  if not rec then return nil, fail('ERR_UNKNOWN_TRANSFER', 'transfer=' .. tid) end
  local t, sent = {lots = {}}, 0
  for ln in string.gmatch(rec, '[^\n]+') do
    if not t.state then
      t.state, t.from, t.to = string.match(ln, '^([^\t]*)\t([^\t]*)\t([^\t]*)$')
    else
      local src, tl, q = string.match(ln, '^([^\t]*)\t([^\t]*)\t(%d+)$')
      t.lots[#t.lots + 1] = {src = src, tl = tl, qty = tonumber(q)}
      sent = sent + tonumber(q)
    end
  end
  if t.state ~= 'in_transit' then return nil, fail('ERR_TRANSFER_STATE', 'transfer=' .. tid .. ' state=' .. t.state) end
  return t, sent
end

if op == 'transfer' then
  local tid, from, to, qty, arr, reg0, maxLots = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])
  if redis.call('HEXISTS', key, 't:' .. tid) == 1 then return fail('ERR_TRANSFER_EXISTS', 'transfer=' .. tid) end
  -- The sources: the index's on-hand records (good lots with sellable stock, whatever
  -- their period), in its order (FEFO), at from.
  local chunks = {head[4]}
  if nchunks > 1 then
    local f = {}
    for i = 1, nchunks - 1 do f[i] = 'o:' .. i end
    local v = redis.call('HMGET', key, unpack(f))
    for i = 1, nchunks - 1 do chunks[i + 1] = v[i] end
  end
  local onhand = {}
  for _, c in ipairs(chunks) do
    local pos = 1
    while pos <= #c do
      local nl = string.find(c, '\n', pos + FIELD_AT, true)
      if string.byte(c, pos) == 111 then onhand[#onhand + 1] = string.sub(c, pos + FIELD_AT + 2, nl - 1) end -- 'o'
      pos = nl + 1
    end
  end
  fetch(onhand)
  local src, sum = {}, 0
  for _, lot in ipairs(onhand) do
    local p = st[lot].p
    if p == '' then p = 'default' end
    if p == from then
      src[#src + 1] = lot
      sum = sum + st[lot].s
    end
  end
  if sum < qty then
    return fail('ERR_SHORTAGE', 'requested=' .. fmt(qty) .. ' available=' .. fmt(sum) .. ' location=' .. from)
  end
  local t, rem = {from = from, to = to, lots = {}}, qty
  for _, lot in ipairs(src) do
    if rem == 0 then break end
    local q = math.min(rem, st[lot].s)
    -- stock.TransitLotID
    local tl = tid .. '~' .. lot
    if #tl > 200 then tl = '~' .. redis.sha1hex(tl) end
    t.lots[#t.lots + 1] = {src = lot, tl = tl, qty = q}
    rem = rem - q
  end
  if #t.lots > maxLots then
    return fail('ERR_TRANSFER_LOTS', 'transfer=' .. tid .. ' lots=' .. #t.lots .. ' max=' .. maxLots)
  end
  for _, x in ipairs(t.lots) do
    if redis.call('HEXISTS', key, 'm:' .. x.tl) == 1 then return fail('ERR_LOT_EXISTS', 'lot=' .. x.tl) end
  end
  local reg = nextReg()
  if reg + #t.lots - 1 > 999999999999999 then -- the index's 15 digits (layout.go's MaxRegSeq)
    return fail('ERR_LOT_STATE', 'lot=' .. t.lots[1].tl .. ' no registration number left after ' .. fmt(reg - 1))
  end
  if reg < reg0 or not ARGV[10 + reg - reg0 + #t.lots] then return redis.error_reply('ERR_REG_SEQ 0 ' .. fmt(reg)) end
  -- The default location is stored as none.
  local toP = to
  if to == 'default' then toP = '' end
  writes = {'n', fmt(reg + #t.lots), 't:' .. tid, transferText('in_transit', t)}
  for i, x in ipairs(t.lots) do
    local _, _, bb, _, _, vf, vt = indexOps().parseMeta(st[x.src].m)
    move(x.src, 's', 't', x.qty)
    local m = table.concat({'planned', '1', bb, fmt(reg + i - 1), arr, vf, vt}, '\t')
    st[x.tl] = {m = m, m0 = m, s = 0, s0 = 0, r = 0, a = 0, h = 0, x = 0, d = 0, dirtyMeta = true,
      knew = ARGV[10 + reg - reg0 + i], p = toP}
    move(x.tl, 't', 's', x.qty)
    if toP ~= '' then writes[#writes + 1] = 'p:' .. x.tl; writes[#writes + 1] = toP end
  end
  return commit(transferLine(tid, 'in_transit', t))
end

if op == 'treceive' then
  local tid, counted = ARGV[4], tonumber(ARGV[5])
  local t, sent = transferOf(tid)
  if not t then return sent end
  if counted > sent then
    return fail('ERR_TRANSFER_STATE', 'transfer=' .. tid .. ' sent=' .. fmt(sent) .. ' counted=' .. fmt(counted))
  end
  -- Go passed each transit lot's on-hand key, from the record as it read it.
  local lots = {}
  for i, x in ipairs(t.lots) do
    if ARGV[5 + 2 * i] ~= x.tl then return redis.error_reply('ERR_REG_SEQ 0 -1') end
    lots[i] = x.tl
  end
  if tonumber(ARGV[6]) ~= #t.lots then return redis.error_reply('ERR_REG_SEQ 0 -1') end
  local unknown = fetch(lots)
  if unknown then return fail('ERR_UNKNOWN_LOT', 'lot=' .. unknown) end
  local sell = 0
  for _, lot in ipairs(lots) do sell = sell + touch(lot).s end
  local short = sent - counted
  if sell < short then
    return fail('ERR_INSUFFICIENT', 'transfer=' .. tid .. ' sellable=' .. fmt(sell) .. ' short_by=' .. fmt(short))
  end
  for i = #lots, 1, -1 do
    if short == 0 then break end
    local q = math.min(short, st[lots[i]].s)
    if q > 0 then
      move(lots[i], 's', 'd', q)
      short = short - q
    end
  end
  for i, lot in ipairs(lots) do
    local l = st[lot]
    local _, good, bb, reg, arr, vf, vt = indexOps().parseMeta(l.m)
    l.m = table.concat({'onhand', good, bb, reg, arr, vf, vt}, '\t')
    l.dirtyMeta, l.knew = true, ARGV[6 + 2 * i]
  end
  writes = {'t:' .. tid, transferText('received', t)}
  return commit(transferLine(tid, 'received', t))
end

if op == 'tcancel' then
  local tid = ARGV[4]
  local t, sent = transferOf(tid)
  if not t then return sent end
  local tls, srcs = {}, {}
  for i, x in ipairs(t.lots) do tls[i], srcs[i] = x.tl, x.src end
  local unknown = fetch(tls)
  if unknown then return fail('ERR_UNKNOWN_LOT', 'lot=' .. unknown) end
  for _, x in ipairs(t.lots) do
    local l = touch(x.tl)
    if l.s < x.qty then
      return fail('ERR_TRANSFER_PROMISED', 'transfer=' .. tid .. ' lot=' .. x.tl .. ' promised=' .. fmt(x.qty - l.s))
    end
  end
  unknown = fetch(srcs)
  if unknown then return fail('ERR_UNKNOWN_LOT', 'lot=' .. unknown) end
  for _, lot in ipairs(srcs) do touch(lot) end
  for _, x in ipairs(t.lots) do
    move(x.tl, 's', 't', x.qty)
    move(x.src, 't', 's', x.qty)
  end
  writes = {'t:' .. tid, transferText('cancelled', t)}
  return commit(transferLine(tid, 'cancelled', t))
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

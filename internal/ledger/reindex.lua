-- reindex.lua: rewrites one SKU's candidate index, its lots' stored keys and its layout
-- stamp in the key layout of the Go side that runs it (Reindex in reindex.go), atomically.
-- Runs with scriptHeader (KEY_LAYOUT) and candidates.lua (SORT_LEN) prepended.
--
-- Go read the SKU and computed every lot's key (layout.go's allocKey); the script takes
-- the lots as they are now: their sellable, and a key for each meta. A lot whose meta is
-- still the one Go read gets Go's key; one registered or received since by this layout's
-- ledger.lua (the stamp says so) keeps the key it stored; for any other (an older version
-- wrote it, or another layout) the script writes nothing and answers 0, and Go reads
-- again. An operation on the SKU runs wholly before the script (which reads what it left)
-- or after it (which finds the new index), so nothing an operation does is lost. The
-- version is not bumped: the stock does not change.
--
-- KEYS[1]  the SKU hash <prefix>:inv:{<sku>}
-- ARGV[1]  records per index chunk (layout.go's indexChunk), then per lot Go read: lot_id
--          and its stored key (k:<lot>: the key, then the meta Go read)
--
-- Returns 1 when it rewrote the SKU, 0 when a lot has no key from Go or of this layout
-- (Go reads again), -1 when the SKU is not in Redis.

local key = KEYS[1]
local all = redis.call('HGETALL', key)
if #all == 0 then return -1 end
local h = {}
for i = 1, #all, 2 do h[all[i]] = all[i + 1] end
local given = {}
for i = 2, #ARGV, 2 do given[ARGV[i]] = ARGV[i + 1] end
local ours = h['kl'] == KEY_LAYOUT

local w, records, nextReg = {}, {}, 0
for f, meta in pairs(h) do
  if string.sub(f, 1, 2) == 'm:' then
    local lot = string.sub(f, 3)
    local stored = given[lot]
    if not (stored and string.sub(stored, SORT_LEN + 1) == meta) then
      stored = h['k:' .. lot]
      if not (ours and stored and string.sub(stored, SORT_LEN + 1) == meta) then return 0 end
    end
    w[#w + 1] = 'k:' .. lot
    w[#w + 1] = stored
    local _, good, _, reg, _, vf, vt = string.match(meta, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$')
    nextReg = math.max(nextReg, tonumber(reg) + 1)
    if good == '1' and (tonumber(h['s:' .. lot]) or 0) > 0 then
      records[#records + 1] = string.sub(stored, 1, SORT_LEN) .. vf .. vt .. 's:' .. lot .. '\n'
    end
  end
end

-- Records start with their key, and keys are unique in a SKU.
table.sort(records)
local per, chunks, cur = tonumber(ARGV[1]), {}, {}
for _, r in ipairs(records) do
  cur[#cur + 1] = r
  if #cur == per then
    chunks[#chunks + 1] = table.concat(cur)
    cur = {}
  end
end
if #cur > 0 or #chunks == 0 then chunks[#chunks + 1] = table.concat(cur) end

for i, c in ipairs(chunks) do
  w[#w + 1] = 'o:' .. (i - 1)
  w[#w + 1] = c
end
w[#w + 1] = 'on'; w[#w + 1] = tostring(#chunks)
w[#w + 1] = 'kl'; w[#w + 1] = KEY_LAYOUT
if not h['n'] then
  w[#w + 1] = 'n'; w[#w + 1] = string.format('%d', nextReg)
end
local d = {}
for f in pairs(h) do
  local i = string.match(f, '^o:(%d+)$')
  if i and tonumber(i) >= #chunks then d[#d + 1] = f end
end
for i = 1, #d, 1000 do
  redis.call('HDEL', key, unpack(d, i, math.min(i + 999, #d)))
end
for i = 1, #w, 1000 do
  redis.call('HSET', key, unpack(w, i, math.min(i + 999, #w)))
end
return 1

-- prefetch.lua: the reads a handler makes first, made by the script that gives an envelope
-- its turn (take, handoff, resume) and returned beside it (Config.Prefetch, prefetch.go),
-- so that they cost the handler no round trip of its own. Prepended to those scripts.
--
-- KEYS[k..k+n-1]  keys of the entity read with every envelope
-- ARGV[a]         n
-- ARGV[a+1]       the name of a top-level string field of the envelope's JSON ("": none)
-- ARGV[a+2]       the key that field's value completes: that key is read too
--
-- prefetch(k, a, entry) returns nil when there is nothing to read, else
-- {field value or false, the completed key's value or false, KEYS[k..]'s values or false...}.
-- The field is found by a pattern, not by a JSON parse: it may find a nested field of the
-- same name, or none when the value holds an escape. The Go side uses what was read for the
-- field only when the value returned is the one it decoded itself.
local function prefetch(k, a, entry)
  local n, field = tonumber(ARGV[a]), ARGV[a + 1]
  if n == 0 and field == '' then
    return nil
  end
  local out = {false, false}
  if field ~= '' then
    local colon = string.find(entry, ':', 1, true) or 0
    local id = string.match(entry, '"' .. field .. '"%s*:%s*"([^"\\]*)"', colon + 1)
    if id then
      out[1], out[2] = id, redis.call('GET', ARGV[a + 2] .. id)
    end
  end
  for i = 0, n - 1 do
    out[3 + i] = redis.call('GET', KEYS[k + i])
  end
  return out
end
